#include "stack/protocol.h"

#include <nlohmann/json.hpp>

namespace volstack::stack {

namespace {

using nlohmann::json;

Result<json> ParseObject(std::string_view body, const char* what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Corruption(std::string("control protocol: ") + what + " is not a JSON object");
  }
  if (!j.contains("type") || !j["type"].is_string()) {
    return Status::Corruption(std::string("control protocol: ") + what + " has no \"type\"");
  }
  return j;
}

Status Bad(const std::string& what) { return Status::Corruption("control protocol: " + what); }

}  // namespace

std::string EncodeHello(int version) {
  return json{{"type", "hello"}, {"version", version}}.dump();
}

Result<int> DecodeHello(std::string_view body) {
  VS_ASSIGN_OR_RETURN(json j, ParseObject(body, "the hello"));
  if (j["type"] == "error" && j.contains("message") && j["message"].is_string()) {
    return Status::FromErrno(EPROTO, j["message"].get<std::string>());
  }
  if (j["type"] != "hello")
    return Bad("expected a hello, got \"" + j["type"].get<std::string>() + "\"");
  if (!j.contains("version") || !j["version"].is_number_integer()) {
    return Bad("the hello has no integer \"version\"");
  }
  return j["version"].get<int>();
}

std::string EncodeRequest(const ControlRequest& r) {
  const std::vector<std::string> args(r.argv.size() > 1 ? r.argv.begin() + 1 : r.argv.end(),
                                      r.argv.end());
  return json{{"type", "request"},
              {"verb", r.verb},
              {"args", args},
              {"cwd", r.cwd},
              {"tty", {{"stdin", r.stdin_tty}, {"stdout", r.stdout_tty}, {"stderr", r.stderr_tty}}}}
      .dump();
}

Result<ControlRequest> DecodeRequest(std::string_view body) {
  VS_ASSIGN_OR_RETURN(json j, ParseObject(body, "the request"));
  if (j["type"] != "request") {
    return Bad("expected a request, got \"" + j["type"].get<std::string>() + "\"");
  }
  ControlRequest r;
  if (!j.contains("verb") || !j["verb"].is_string()) return Bad("request.verb is not a string");
  r.verb = j["verb"].get<std::string>();
  if (!j.contains("args") || !j["args"].is_array()) return Bad("request.args is not an array");
  r.argv.push_back("volstack");
  for (const auto& a : j["args"]) {
    if (!a.is_string()) return Bad("request.args holds a non-string");
    r.argv.push_back(a.get<std::string>());
  }
  if (!j.contains("cwd") || !j["cwd"].is_string()) return Bad("request.cwd is not a string");
  r.cwd = j["cwd"].get<std::string>();
  if (r.cwd.empty() || r.cwd[0] != '/') return Bad("request.cwd is not an absolute path");
  if (j.contains("tty")) {
    const json& t = j["tty"];
    if (!t.is_object()) return Bad("request.tty is not an object");
    for (const auto& [key, field] :
         {std::pair{"stdin", &r.stdin_tty}, std::pair{"stdout", &r.stdout_tty},
          std::pair{"stderr", &r.stderr_tty}}) {
      if (!t.contains(key)) continue;
      if (!t[key].is_boolean()) return Bad(std::string("request.tty.") + key + " is not a boolean");
      *field = t[key].get<bool>();
    }
  }
  if (r.verb != VerbOf(std::vector<std::string>(r.argv.begin() + 1, r.argv.end()))) {
    return Bad("request.verb '" + r.verb + "' is not the verb of its args");
  }
  return r;
}

std::string EncodeExit(int code) { return json{{"type", "exit"}, {"code", code}}.dump(); }

std::string EncodeError(const std::string& message) {
  return json{{"type", "error"}, {"message", message}}.dump();
}

Result<int> DecodeReply(std::string_view body) {
  VS_ASSIGN_OR_RETURN(json j, ParseObject(body, "the daemon's reply"));
  if (j["type"] == "error") {
    if (!j.contains("message") || !j["message"].is_string()) return Bad("error without a message");
    return Status::FromErrno(EPROTO, j["message"].get<std::string>());
  }
  if (j["type"] != "exit" || !j.contains("code") || !j["code"].is_number_integer()) {
    return Bad("the daemon's reply is neither an exit code nor an error");
  }
  return j["code"].get<int>();
}

std::string EncodeCall(const Request& r) {
  return json{{"type", "call"}, {"verb", r.verb}, {"args", r.args}}.dump();
}

Result<Request> DecodeCall(std::string_view body) {
  VS_ASSIGN_OR_RETURN(json j, ParseObject(body, "the call"));
  if (j["type"] != "call") {
    return Bad("expected a call, got \"" + j["type"].get<std::string>() + "\"");
  }
  Request r;
  if (!j.contains("verb") || !j["verb"].is_string()) return Bad("call.verb is not a string");
  r.verb = j["verb"].get<std::string>();
  if (!j.contains("args") || !j["args"].is_object()) return Bad("call.args is not an object");
  r.args = j["args"];
  return r;
}

std::string FrameType(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return "";
  }
  return j["type"].get<std::string>();
}

std::string EncodeProgress(const std::string& text) {
  return json{{"type", "progress"}, {"text", text}}.dump();
}

std::string EncodeTypedReply(const Reply& reply) {
  return json{
      {"type", "reply"}, {"code", reply.code}, {"data", reply.data}, {"errors", reply.errors}}
      .dump();
}

Result<CallAnswer> DecodeCallAnswer(std::string_view body) {
  VS_ASSIGN_OR_RETURN(json j, ParseObject(body, "the daemon's reply"));
  CallAnswer a;
  if (!j.contains("type") || !j["type"].is_string()) return Bad("a reply without a type");
  if (j["type"] == "error") {
    if (!j.contains("message") || !j["message"].is_string()) return Bad("error without a message");
    return Status::FromErrno(EPROTO, j["message"].get<std::string>());
  }
  if (j["type"] == "progress") {
    if (!j.contains("text") || !j["text"].is_string()) return Bad("progress without a text");
    a.progress = j["text"].get<std::string>();
    return a;
  }
  if (j["type"] != "reply")
    return Bad("expected a reply, got \"" + j["type"].get<std::string>() + "\"");
  if (!j.contains("code") || !j["code"].is_number_integer())
    return Bad("reply.code is not an integer");
  if (!j.contains("data")) return Bad("reply has no data");
  if (!j.contains("errors") || !j["errors"].is_array()) return Bad("reply.errors is not an array");
  a.reply.code = j["code"].get<int>();
  a.reply.data = j["data"];
  for (const auto& e : j["errors"]) {
    if (!e.is_string()) return Bad("reply.errors holds a non-string");
    a.reply.errors.push_back(e.get<std::string>());
  }
  return a;
}

std::string VerbOf(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--state-dir") {
      i++;  // its value
    } else if (!a.empty() && a[0] != '-') {
      return a;
    }
  }
  return "";
}

}  // namespace volstack::stack
