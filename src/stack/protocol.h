// The control protocol between the CLI and the daemon (docs/stack.md, "The protocol").
//
// Frames on the Unix stream socket <state_dir>/daemon.sock: a u32 little-endian length
// (at most kMaxMessageBytes) and that many bytes of one JSON object with a "type":
//
//   client -> daemon  {"type":"hello","version":V}
//   daemon -> client  {"type":"hello","version":V}        the versions match; go on
//                     {"type":"error","message":"..."}    anything else; the daemon hangs up
//   client -> daemon  {"type":"request","verb":"zfs","args":["zfs","list"],"cwd":"/root",
//                      "tty":{"stdin":false,"stdout":true,"stderr":true}}
//                     with the client's stdin, stdout and stderr as SCM_RIGHTS descriptors on
//                     the frame's first byte
//   daemon -> client  {"type":"exit","code":N}            the command has finished
//                     {"type":"error","message":"..."}    the request was refused
//
// or, for a verb with a typed reply (stack/requests.h), instead of the request:
//
//   client -> daemon  {"type":"call","verb":"jobs","args":{...}}    no descriptors
//   daemon -> client  {"type":"progress","text":"..."}              zero or more
//                     {"type":"reply","code":N,"data":{...},"errors":["..."]}
//                     {"type":"error","message":"..."}              the call was refused
//
// "args" is the command line after the program name (global options included); "verb" is its
// first word that is not an option, for the daemon to refuse the verbs it never runs. The
// descriptors are used by that request only (util/request_io.h), and "cwd" is the request's
// own working directory (a thread of its own, never the daemon's). Decoding never trusts the
// bytes: a malformed frame is a Corruption naming what was wrong.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace volstack::stack {

// Bumped whenever a message changes meaning; client and daemon must agree exactly.
inline constexpr int kProtocolVersion = 2;
inline constexpr uint32_t kMaxMessageBytes = 1 << 20;

struct ControlRequest {
  std::string verb;
  std::vector<std::string> argv;  // argv[0] is the program ("volstack"), then the args
  std::string cwd;                // absolute
  bool stdin_tty = false;
  bool stdout_tty = false;
  bool stderr_tty = false;
};

// A typed request: the verb and its arguments as the verb's handler takes them
// (stack/requests.h), with no streams: the client formats the reply itself.
struct Request {
  std::string verb;
  nlohmann::json args = nlohmann::json::object();
};
// What a typed request answers: the exit code, the verb's data, and the error lines its client
// prints on stderr ("volstack: " + each), in order.
struct Reply {
  int code = 0;
  nlohmann::json data = nlohmann::json::object();
  std::vector<std::string> errors;
};

std::string EncodeHello(int version);
// The version a hello carries.
Result<int> DecodeHello(std::string_view body);

std::string EncodeRequest(const ControlRequest& request);
Result<ControlRequest> DecodeRequest(std::string_view body);

std::string EncodeExit(int code);
std::string EncodeError(const std::string& message);
// An exit frame's code; an error frame becomes a Status carrying its message (EPROTO).
Result<int> DecodeReply(std::string_view body);

std::string EncodeCall(const Request& request);
// A "call" frame (the type already checked by the caller, who peeks at it with FrameType).
Result<Request> DecodeCall(std::string_view body);
// The "type" of a frame ("" when it has none).
std::string FrameType(std::string_view body);
std::string EncodeProgress(const std::string& text);
std::string EncodeTypedReply(const Reply& reply);
// What the daemon says after a call: a progress line (`progress` set) or the reply; an error
// frame becomes a Status carrying its message (EPROTO).
struct CallAnswer {
  std::optional<std::string> progress;
  Reply reply;
};
Result<CallAnswer> DecodeCallAnswer(std::string_view body);

// The verb of a command line: its first word that is not an option or an option's value.
std::string VerbOf(const std::vector<std::string>& args);

}  // namespace volstack::stack
