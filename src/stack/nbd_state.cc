#include "stack/nbd_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "bdev/device_registry.h"
#include "util/file_util.h"
#include "util/state_file.h"

namespace volstack::stack {

namespace {

using nlohmann::json;

// "line L, column C" of byte offset `byte` (1-based, as nlohmann counts) in `text`.
std::string LineOf(const std::string& text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); i++) {
    if (text[i] == '\n') {
      line++;
      column = 1;
    } else {
      column++;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

class Validator {
 public:
  explicit Validator(std::string path) : path_(std::move(path)) {}

  Status Bad(const std::string& field, const std::string& what) const {
    return Status::Corruption(path_ + ": " + field + ": " + what);
  }

  Result<std::string> String(const json& obj, const std::string& key, const std::string& field,
                             bool required) const {
    if (!obj.contains(key)) {
      if (required) return Bad(field + "." + key, "missing");
      return std::string();
    }
    if (!obj[key].is_string()) return Bad(field + "." + key, "not a string");
    return obj[key].get<std::string>();
  }

 private:
  std::string path_;
};

bool IsValidTcpAddress(const std::string& bind) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == bind.size()) return false;
  const std::string port = bind.substr(colon + 1);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
  const int p = std::stoi(port);
  return p > 0 && p < 65536;
}

}  // namespace

Result<std::vector<NbdListenerRecord>> ParseNbdState(const std::string& text,
                                                     const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status::Corruption(path + ": " + LineOf(text, e.byte) + ": not valid JSON");
  }
  const Validator v(path);
  if (!doc.is_object()) return v.Bad("top level", "not an object");
  if (!doc.contains("version")) return v.Bad("version", "missing");
  if (!doc["version"].is_number_unsigned() || doc["version"].get<uint64_t>() != 1) {
    return v.Bad("version", "unsupported (this volstack reads version 1)");
  }
  if (!doc.contains("listeners") || !doc["listeners"].is_array()) {
    return v.Bad("listeners", "missing or not an array");
  }
  std::vector<NbdListenerRecord> out;
  std::set<std::string> addresses;
  const auto& listeners = doc["listeners"];
  for (size_t i = 0; i < listeners.size(); i++) {
    const std::string field = "listeners[" + std::to_string(i) + "]";
    const json& l = listeners[i];
    if (!l.is_object()) return v.Bad(field, "not an object");
    NbdListenerRecord r;
    VS_ASSIGN_OR_RETURN(r.socket, v.String(l, "socket", field, false));
    VS_ASSIGN_OR_RETURN(r.bind, v.String(l, "bind", field, false));
    if (r.socket.empty() == r.bind.empty()) {
      return v.Bad(field, "needs exactly one of \"socket\" and \"bind\"");
    }
    if (!r.socket.empty() && r.socket.front() != '/') {
      return v.Bad(field + ".socket", "not an absolute path: '" + r.socket + "'");
    }
    if (!r.bind.empty() && !IsValidTcpAddress(r.bind)) {
      return v.Bad(field + ".bind", "not HOST:PORT with a port in 1-65535: '" + r.bind + "'");
    }
    if (l.contains("read_only")) {
      if (!l["read_only"].is_boolean()) return v.Bad(field + ".read_only", "not true or false");
      r.read_only = l["read_only"].get<bool>();
    }
    VS_ASSIGN_OR_RETURN(r.tls, v.String(l, "tls", field, false));
    if (!r.tls.empty() && r.tls != "off" && r.tls != "on" && r.tls != "require") {
      return v.Bad(field + ".tls", "not off, on or require: '" + r.tls + "'");
    }
    if (l.contains("tls_verify_peer")) {
      if (!l["tls_verify_peer"].is_boolean()) {
        return v.Bad(field + ".tls_verify_peer", "not true or false");
      }
      r.tls_verify_peer = l["tls_verify_peer"].get<bool>();
    }
    VS_ASSIGN_OR_RETURN(r.tls_psk, v.String(l, "tls_psk", field, false));
    VS_ASSIGN_OR_RETURN(r.tls_certificates, v.String(l, "tls_certificates", field, false));
    for (const auto* path : {&r.tls_psk, &r.tls_certificates}) {
      if (!path->empty() && path->front() != '/') {
        return v.Bad(field + (path == &r.tls_psk ? ".tls_psk" : ".tls_certificates"),
                     "not an absolute path: '" + *path + "'");
      }
    }
    for (auto [key, out, max] : {std::tuple{"max_connections", &r.max_connections, 65536ull},
                                 std::tuple{"handshake_limit", &r.handshake_limit, 3600ull}}) {
      if (!l.contains(key)) continue;
      if (!l[key].is_number_unsigned() || l[key].get<uint64_t>() == 0 ||
          l[key].get<uint64_t>() > max) {
        return v.Bad(field + "." + key, "not a number in 1-" + std::to_string(max));
      }
      *out = l[key].get<uint64_t>();
    }
    if (!l.contains("exports") || !l["exports"].is_array() || l["exports"].empty()) {
      return v.Bad(field + ".exports", "missing, empty or not an array");
    }
    std::set<std::string> names;
    for (size_t j = 0; j < l["exports"].size(); j++) {
      const std::string efield = field + ".exports[" + std::to_string(j) + "]";
      const json& e = l["exports"][j];
      if (!e.is_object()) return v.Bad(efield, "not an object");
      NbdExportRecord x;
      VS_ASSIGN_OR_RETURN(x.name, v.String(e, "name", efield, true));
      VS_ASSIGN_OR_RETURN(x.device, v.String(e, "device", efield, true));
      if (!bdev::DeviceRegistry::IsValidName(x.name)) {
        return v.Bad(efield + ".name", "not a valid export name: '" + x.name + "'");
      }
      if (x.device.empty()) return v.Bad(efield + ".device", "empty");
      if (!names.insert(x.name).second) {
        return v.Bad(efield + ".name", "'" + x.name + "' is exported twice");
      }
      r.exports.push_back(std::move(x));
    }
    if (!addresses.insert(r.address()).second) {
      return v.Bad(field, "a second listener on " + r.address());
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string FormatNbdState(const std::vector<NbdListenerRecord>& listeners) {
  json arr = json::array();
  for (const auto& l : listeners) {
    json j = json::object();
    if (!l.socket.empty()) j["socket"] = l.socket;
    if (!l.bind.empty()) j["bind"] = l.bind;
    j["read_only"] = l.read_only;
    if (!l.tls.empty()) j["tls"] = l.tls;
    if (!l.tls_psk.empty()) j["tls_psk"] = l.tls_psk;
    if (!l.tls_certificates.empty()) j["tls_certificates"] = l.tls_certificates;
    if (l.tls_verify_peer) j["tls_verify_peer"] = true;
    if (l.max_connections != 0) j["max_connections"] = l.max_connections;
    if (l.handshake_limit != 0) j["handshake_limit"] = l.handshake_limit;
    json exports = json::array();
    for (const auto& e : l.exports) exports.push_back({{"name", e.name}, {"device", e.device}});
    j["exports"] = exports;
    arr.push_back(j);
  }
  return json{{"version", 1}, {"listeners", arr}}.dump(2) + "\n";
}

Result<std::vector<NbdListenerRecord>> LoadNbdState(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::vector<NbdListenerRecord>{};
    return text.status();
  }
  return ParseNbdState(*text, path);
}

Status UpdateNbdState(const std::string& state_dir, const std::string& path,
                      const std::function<Status(std::vector<NbdListenerRecord>&)>& modify) {
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        std::vector<NbdListenerRecord> listeners;
        if (old) {
          VS_ASSIGN_OR_RETURN(listeners, ParseNbdState(*old, path));
        }
        VS_RETURN_IF_ERROR(modify(listeners));
        return std::optional<std::string>(FormatNbdState(listeners));
      });
}

std::string NbdAddressOf(const std::string& text) {
  if (!text.empty() && text.front() == '/') return "unix:" + text;
  return text;
}

}  // namespace volstack::stack
