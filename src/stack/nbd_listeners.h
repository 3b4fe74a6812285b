// The NBD listeners a running daemon serves (`volstack nbd serve` through the daemon), and
// their record in <state_dir>/nbd.json (stack/nbd_state.h), from which `up` restores them.
//
// Each listener has an NbdServer over a small registry of its own holding just the devices it
// exports (export name -> device). The devices are the daemon's own (an active pool volume or
// LV is used as registered) or files it opened for the listener. The listener follows the
// daemon's registry: when a device it exports is unregistered it disappears from the export
// list, and when a device of that name is registered again (the pool came back, an LV was
// remapped) the listener serves the new one to new connections.
//
// Threads: every function runs on the daemon's request thread (requests are serialized), or
// at start and stop. NBD I/O runs on the servers' own threads and never takes a lock here.
#pragma once

#include <string>
#include <vector>

#include "cli/cli.h"
#include "export/nbd/nbd_server.h"
#include "stack/daemon.h"
#include "stack/nbd_state.h"

namespace volstack::cli {

struct NbdListenerStatus {
  stack::NbdListenerRecord record;
  bool serving = false;               // a live listener in this daemon
  size_t connections = 0;             // clients connected now
  std::vector<std::string> unserved;  // export names whose device is not open
};

// Starts `record` (its bind port may be 0) in the daemon and records it in nbd.json. Returns
// the listener's address. EEXIST if a listener already serves that address. Nothing is
// recorded or left listening on failure.
Result<std::string> ServeNbdInDaemon(stack::Daemon& daemon, const Context& ctx,
                                     stack::NbdListenerRecord record);
// Stops the listener at `address` (if live) and removes its record. ENOENT if neither exists.
Status StopNbd(const Context& ctx, const std::string& address);
// Recorded listeners (and live ones, in the daemon), in record order.
Result<std::vector<NbdListenerStatus>> ListNbd(const Context& ctx);

// At `up`: starts every recorded listener that is not live. A device that cannot be opened
// is reported and left out; the listener serves the rest (and picks it up when registered).
Status RestoreNbdListeners(stack::Daemon& daemon, const Context& ctx);
// At `down`: disconnects clients and closes every listener. Records stay for the next `up`.
void StopAllNbdListeners();

// The server options a record asks for (addresses, TLS, limits), checked and with the TLS
// mode resolved (exportfs::nbd::ValidateServerOptions): InvalidArgument with one message.
Result<exportfs::nbd::NbdServerOptions> NbdServerOptionsOf(const stack::NbdListenerRecord& r);

// The live listeners' addresses exporting device `device` (busy checks, status).
std::vector<std::string> NbdListenersOf(const std::string& device);

}  // namespace volstack::cli
