// The NBD listeners a live stack serves (`volstack nbd serve` through the daemon), and
// their record in <state_dir>/nbd.json (stack/nbd_state.h), from which `up` restores them.
// A one-shot stack has none live: it lists and removes records only.
//
// Each listener has an NbdServer over a small registry of its own holding just the devices it
// exports (export name -> device). The devices are the stack's own (an active pool volume or
// LV is used as registered) or files it opened for the listener. The listener follows the
// daemon's registry: when a device it exports is unregistered it disappears from the export
// list, and when a device of that name is registered again (the pool came back, an LV was
// remapped) the listener serves the new one to new connections.
//
// Threads: every function runs on the daemon's request thread (requests are serialized), or
// at start and stop. NBD I/O runs on the servers' own threads and never takes a lock here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "export/nbd/nbd_server.h"
#include "stack/nbd_state.h"

namespace volstack::stack {

class Stack;

struct NbdListenerStatus {
  NbdListenerRecord record;
  bool serving = false;               // a live listener in this daemon
  size_t connections = 0;             // clients connected now
  std::vector<std::string> unserved;  // export names whose device is not open
};

// The server options a record asks for (addresses, TLS, limits), checked and with the TLS
// mode resolved (exportfs::nbd::ValidateServerOptions): InvalidArgument with one message.
Result<exportfs::nbd::NbdServerOptions> NbdServerOptionsOf(const NbdListenerRecord& r);

class NbdListeners {
 public:
  explicit NbdListeners(Stack& stack);
  ~NbdListeners();

  // Starts `record` (its bind port may be 0) in the live stack and records it in nbd.json.
  // Returns the listener's address. EEXIST if a listener already serves that address.
  // Nothing is recorded or left listening on failure.
  Result<std::string> Serve(NbdListenerRecord record);
  // Stops the listener at `address` (if live) and removes its record. ENOENT if neither
  // exists.
  Status Stop(const std::string& address);
  // Recorded listeners (and live ones), in record order.
  Result<std::vector<NbdListenerStatus>> List();

  // At `up`: starts every recorded listener that is not live. A device that cannot be opened
  // is reported and left out; the listener serves the rest (and picks it up when registered).
  Status Restore();
  // At `down`: disconnects clients and closes every listener. Records stay for the next `up`.
  void StopAll();

  // Every export of the live listeners, by address: {address, export name, device}.
  struct LiveExport {
    std::string address, export_name, device;
  };
  // (The graph's NBD nodes, stack/graph.h.)
  std::vector<LiveExport> LiveExports() const;

 private:
  struct Listener;
  Result<std::unique_ptr<Listener>> StartListener(const NbdListenerRecord& record,
                                                  std::vector<Status>* missing);
  std::string StatePath() const;

  Stack& stack_;
  std::map<std::string, std::unique_ptr<Listener>> live_;  // by address
};

}  // namespace volstack::stack
