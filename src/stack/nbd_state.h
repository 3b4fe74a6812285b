// The NBD listeners the daemon serves, recorded in <state_dir>/nbd.json so `volstack up`
// restores them after a restart (stack/state_dir.h lists the state files):
//
//   {"version": 1,
//    "listeners": [{"socket": "/var/lib/volstack/nbd.sock",     (or "bind": "127.0.0.1:10809")
//                   "read_only": false,
//                   "tls": "require",                 (optional: "off", "on", "require")
//                   "tls_psk": "/etc/volstack/keys.psk",  (or "tls_certificates": DIR,
//                                               and "tls_verify_peer": true, optional)
//                   "max_connections": 64, "handshake_limit": 10,   (optional)
//                   "exports": [{"name": "funk", "device": "trunk/funk"}]}]}
//
// `name` is the NBD export name a client asks for; `device` what the daemon opens (a volstack
// device name or a path). Exactly one of socket/bind per listener; a listener is identified
// by its address ("unix:PATH" or "HOST:PORT", as NbdServer::address() prints it), so two
// listeners never share one.
//
// The file is changed under the state dir's lock, replaced atomically (state_file.h) and
// validated on read: a damaged or hand-edited file is Corruption with a message naming the
// file and the line (JSON syntax) or the field ("listeners[1].exports[0].name") at fault, never a
// crash.
//
// Threads: free functions without shared state; the daemon serialises writers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::stack {

struct NbdExportRecord {
  std::string name;    // export name
  std::string device;  // what to open

  bool operator==(const NbdExportRecord&) const = default;
};

struct NbdListenerRecord {
  std::string socket;  // Unix socket path, or
  std::string bind;    // HOST:PORT (the real port, never 0)
  bool read_only = false;
  std::string tls;      // "", "off", "on" or "require" (exportfs::nbd::TlsMode)
  std::string tls_psk;  // absolute paths, or empty
  std::string tls_certificates;
  bool tls_verify_peer = false;  // "tls_verify_peer": client certificates required
  uint64_t max_connections = 0;  // 0: the server's default
  uint64_t handshake_limit = 0;  // seconds; 0: the server's default
  std::vector<NbdExportRecord> exports;

  // "unix:PATH" or "HOST:PORT".
  std::string address() const { return socket.empty() ? bind : "unix:" + socket; }
  bool operator==(const NbdListenerRecord&) const = default;
};

// Parses the text of nbd.json; `path` is only used in messages.
Result<std::vector<NbdListenerRecord>> ParseNbdState(const std::string& text,
                                                     const std::string& path);
std::string FormatNbdState(const std::vector<NbdListenerRecord>& listeners);

// An absent file is no listeners.
Result<std::vector<NbdListenerRecord>> LoadNbdState(const std::string& path);
// Read-modify-write of `path` (in `state_dir`) under the state dir's lock
// (util/state_file.h); an error from `modify` leaves the file as it was.
Status UpdateNbdState(const std::string& state_dir, const std::string& path,
                      const std::function<Status(std::vector<NbdListenerRecord>&)>& modify);

// What a user types to name a listener ("/path/nbd.sock", "unix:/path", "127.0.0.1:10809")
// as its address.
std::string NbdAddressOf(const std::string& text);

}  // namespace volstack::stack
