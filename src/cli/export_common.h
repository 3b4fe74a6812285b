// Helpers shared by the export verbs (devfs, losetup, nbd): one file per verb, registered
// from export_verbs.cc.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "cli/cli.h"

namespace volstack::cli {

void RegisterDevfsVerb(CLI::App& app, Context& ctx);    // export_devfs.cc
void RegisterLosetupVerb(CLI::App& app, Context& ctx);  // export_losetup.cc
void RegisterNbdVerb(CLI::App& app, Context& ctx);      // export_nbd.cc

// "NAME=PATH" -> {NAME, PATH}; a path -> {its basename, the path}; a volstack device name
// -> {name, name}; an rbd: name (whose options hold '=') -> {POOL/IMAGE[@SNAP], name}, a
// remote URI -> {uri, uri}. The first is the exported name (devfs file, NBD export), the second
// what OpenDeviceByName opens.
std::pair<std::string, std::string> SplitExportArg(const std::string& arg);

// The devfs mount point for --devfs (empty: the default for the state dir).
std::string DevfsDir(const Context& ctx, const std::string& devfs_option);

// Runs a long-lived server verb. `start` sets the service up (opening devices, mounting,
// listening); then the process waits for SIGINT, SIGTERM or SIGHUP and runs `stop`.
// Without `foreground`, it forks first (before any device is opened or thread started), and
// the parent exits 0 only once `start` succeeded in the child (or 1 with its error); the
// child detaches (setsid), sends stdout to /dev/null and stderr to <state_dir>/<what>.log.
// The server's pid is in <state_dir>/<what>.pid while it runs.
int RunServer(const Context& ctx, const std::string& what, bool foreground,
              const std::function<Status()>& start, const std::function<void()>& stop);

}  // namespace volstack::cli
