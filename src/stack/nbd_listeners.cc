#include "stack/nbd_listeners.h"

#include <cstdio>
#include <map>
#include <memory>

#include "bdev/device_registry.h"
#include "export/nbd/nbd_server.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::stack {

struct NbdListeners::Listener {
  NbdListenerRecord record;                          // bind holds the real port
  std::shared_ptr<bdev::DeviceRegistry> exports;     // export name -> device
  std::unique_ptr<exportfs::nbd::NbdServer> server;  // destroyed before `exports`
  int subscription = 0;                              // on the daemon's registry
  bdev::DeviceRegistry* daemon_registry = nullptr;

  ~Listener() {
    if (daemon_registry != nullptr) daemon_registry->Unsubscribe(subscription);
    server.reset();
    for (const auto& [name, device] : exports->List()) device->Flush().IgnoreError();
  }
};

NbdListeners::NbdListeners(Stack& stack) : stack_(stack) {}

NbdListeners::~NbdListeners() { StopAll(); }

std::string NbdListeners::StatePath() const { return stack_.state().nbd_path(); }

// Opens the record's devices into a new listener's registry and starts its server. Devices
// that cannot be opened are returned in `missing` (with why); the listener still starts.
Result<std::unique_ptr<NbdListeners::Listener>> NbdListeners::StartListener(
    const NbdListenerRecord& record, std::vector<Status>* missing) {
  auto l = std::make_unique<Listener>();
  l->record = record;
  l->exports = std::make_shared<bdev::DeviceRegistry>();
  for (const auto& e : record.exports) {
    auto device =
        stack_.OpenDevice(e.device, record.read_only ? Access::kReadOnly : Access::kReadWrite);
    Status s = device.ok() ? l->exports->Add(e.name, *device) : device.status();
    // Kept as a Status: its own code and message, with no errno text folded in twice.
    if (!s.ok()) missing->push_back(s.WithContext(e.name + " (" + e.device + ")"));
  }
  // Follow the daemon's registry: a device of an exported name that is registered again
  // (its pool re-imported, an LV remapped) replaces the old one for new connections.
  std::weak_ptr<bdev::DeviceRegistry> weak = l->exports;
  const auto exports = record.exports;
  l->daemon_registry = &stack_.registry();
  l->subscription = stack_.registry().Subscribe(
      [weak, exports](bdev::DeviceRegistry::Change change, const std::string& name,
                      const bdev::BlockDevicePtr& device) {
        auto registry = weak.lock();
        if (!registry) return;
        for (const auto& e : exports) {
          if (e.device != name) continue;
          registry->Remove(e.name).IgnoreError();
          if (change == bdev::DeviceRegistry::Change::kAdded) {
            registry->Add(e.name, device).IgnoreError();
          }
        }
      });
  VS_ASSIGN_OR_RETURN(auto options, NbdServerOptionsOf(record));
  VS_ASSIGN_OR_RETURN(l->server, exportfs::nbd::NbdServer::Start(*l->exports, options));
  if (!record.bind.empty()) l->record.bind = l->server->address();
  l->record.tls = exportfs::nbd::TlsModeName(l->server->tls_mode());
  return l;
}

Result<exportfs::nbd::NbdServerOptions> NbdServerOptionsOf(const NbdListenerRecord& r) {
  exportfs::nbd::NbdServerOptions options;
  options.socket_path = r.socket;
  options.bind = r.bind;
  options.read_only = r.read_only;
  if (!r.tls.empty()) {
    VS_ASSIGN_OR_RETURN(options.tls, exportfs::nbd::ParseTlsMode(r.tls));
  }
  options.tls_psk = r.tls_psk;
  options.tls_certificates = r.tls_certificates;
  options.tls_verify_peer = r.tls_verify_peer;
  if (r.max_connections != 0) options.max_connections = r.max_connections;
  if (r.handshake_limit != 0)
    options.handshake_limit_sec = static_cast<unsigned>(r.handshake_limit);
  VS_RETURN_IF_ERROR(exportfs::nbd::ValidateServerOptions(options));
  return options;
}

Result<std::string> NbdListeners::Serve(NbdListenerRecord record) {
  VS_ASSIGN_OR_RETURN(auto recorded, LoadNbdState(StatePath()));
  const bool port_zero = record.bind.size() > 2 && record.bind.ends_with(":0");
  if (!port_zero) {
    const std::string address = record.address();
    if (live_.count(address)) {
      return Status::Exists("NBD is already served on " + address + "; `volstack nbd stop " +
                            address + "` first");
    }
    for (const auto& r : recorded) {
      if (r.address() == address) {
        return Status::Exists(address + " is recorded in " + StatePath() +
                              " but not serving; `volstack nbd stop " + address + "` first");
      }
    }
  }
  std::vector<Status> missing;
  VS_ASSIGN_OR_RETURN(auto l, StartListener(record, &missing));
  if (!missing.empty()) return missing.front().WithContext("cannot open");
  VS_RETURN_IF_ERROR(
      UpdateNbdState(stack_.state().root, StatePath(), [&](std::vector<NbdListenerRecord>& now) {
        now.push_back(l->record);
        return Status::Ok();
      }));
  const std::string address = l->server->address();
  live_[l->record.address()] = std::move(l);
  return address;
}

Status NbdListeners::Stop(const std::string& address) {
  auto recorded = LoadNbdState(StatePath());
  const bool live = live_.erase(address) > 0;  // flushes and closes
  if (!recorded.ok()) {
    // A damaged record must not keep a listener alive; it is reported, not rewritten.
    return live ? Status::Ok() : recorded.status();
  }
  bool found = false;
  VS_RETURN_IF_ERROR(
      UpdateNbdState(stack_.state().root, StatePath(), [&](std::vector<NbdListenerRecord>& now) {
        found = std::erase_if(now, [&](const auto& r) { return r.address() == address; }) > 0;
        return Status::Ok();
      }));
  if (!found) return live ? Status::Ok() : Status::NotFound("no NBD listener on " + address);
  return Status::Ok();
}

Result<std::vector<NbdListenerStatus>> NbdListeners::List() {
  VS_ASSIGN_OR_RETURN(auto recorded, LoadNbdState(StatePath()));
  std::vector<NbdListenerStatus> out;
  for (const auto& r : recorded) {
    NbdListenerStatus st;
    st.record = r;
    if (stack_.live()) {
      if (auto it = live_.find(r.address()); it != live_.end()) {
        st.serving = true;
        st.connections = it->second->server->active_connections();
        for (const auto& e : r.exports) {
          if (!it->second->exports->Find(e.name)) st.unserved.push_back(e.name);
        }
      }
    }
    out.push_back(std::move(st));
  }
  return out;
}

Status NbdListeners::Restore() {
  VS_ASSIGN_OR_RETURN(auto recorded, LoadNbdState(StatePath()));
  Status result;
  for (const auto& r : recorded) {
    if (live_.count(r.address())) continue;
    std::vector<Status> missing;
    auto l = StartListener(r, &missing);
    if (!l.ok()) {
      result = l.status().WithContext("nbd " + r.address());
      continue;
    }
    for (const auto& m : missing) {
      std::fprintf(Err(), "volstack: nbd %s: not serving %s\n", r.address().c_str(),
                   m.ToString().c_str());
      result = m.WithContext("nbd " + r.address() + ": cannot open");
    }
    live_[r.address()] = std::move(*l);
  }
  return result;
}

void NbdListeners::StopAll() { live_.clear(); }

std::vector<NbdListeners::LiveExport> NbdListeners::LiveExports() const {
  std::vector<LiveExport> out;
  for (const auto& [address, l] : live_) {
    for (const auto& e : l->record.exports) out.push_back({address, e.name, e.device});
  }
  return out;
}

}  // namespace volstack::stack
