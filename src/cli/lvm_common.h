// Shared pieces of the lvm2-compatible verbs (lvm_*_verbs.cc): exit codes, the session that
// scans the devices a command may touch, the devices and activation files (their format:
// stack/lvm_state.h), lvm2 units.
//
// A command scans the devices file, every pool volume and the names given on its command
// line, in an lvm::Lvm session its stack opens (stack::Stack::OpenLvm): open, do, flush,
// close. In a command's own process that is all; when the daemon runs the command, a device
// name resolves to the daemon's live device when one is registered (stack/device_names.cc),
// and the daemon's Reconcile (stack/stack.cc) activates or releases LVs after the verb
// changed lvm/active.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "lvm/lvm.h"

namespace volstack::cli::lvmcli {

// lvm2's exit codes.
inline constexpr int kLvmOk = 0;
inline constexpr int kLvmFailed = 5;
inline constexpr int kLvmInvalid = 3;

// Prints "  <message>" on stderr, as lvm2 does, and returns `code`.
int Fail(const std::string& message, int code = kLvmFailed);
// lvm2's "Volume group "VG" not found", or, when the session could not open a device
// because another process holds it (EBUSY: a pool volume whose pool is in use), that the
// VG is busy and which device.
std::string VgNotFound(const lvm::Lvm& session, const std::string& vg);
int Fail(const Status& status, int code = kLvmFailed);
// "  <message>" on stdout.
void Say(const std::string& message);

std::vector<std::string> ReadListFile(const std::string& path);
// The list files are changed under the state dir's lock (util/state_file.h). `modify`
// returns false to leave the file unchanged.
Status UpdateListFile(const Context& ctx, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify);
Status WriteListFile(const Context& ctx, const std::string& path,
                     const std::vector<std::string>& lines);
std::string DevicesFile(const Context& ctx);
std::string ActiveFile(const Context& ctx);
Status AddToList(const Context& ctx, const std::string& path,
                 const std::vector<std::string>& names);
Status RemoveFromList(const Context& ctx, const std::string& path,
                      const std::vector<std::string>& names);

// A device name as it is recorded: relative paths made absolute; others unchanged.
std::string NormalizeDeviceName(const std::string& name);

// Opens an LVM session over the devices file, the pool volumes and `extra` names.
std::unique_ptr<lvm::Lvm> OpenSession(const Context& ctx, bool read_only,
                                      const std::vector<std::string>& extra = {});
// Prints warnings about scan errors and partial/inconsistent VGs on stderr.
void WarnScan(lvm::Lvm& lvm);

// "Write from <argv>." for the metadata description.
std::string Description(const std::string& verb, const std::vector<std::string>& args);

// lvm2 sizes: `units` is one of rRhHbBsSkKmMgGtTpPeE ("h": human, powers of 1024, lower-case
// suffix; upper-case letters: powers of 1000). Values are rounded to two decimals, except in
// "r"/"R" (lvm2's default report units), which round down and mark an inexact value with a
// "<" prefix. Zero is "0 " in human units ("0" without suffix), "0<unit>" otherwise. Other
// human-unit values keep their suffix even when `suffix` is false, as under lvm2's --nosuffix.
std::string FormatSize(uint64_t bytes, char units = 'h', bool suffix = true);
// pvdisplay/vgdisplay style: "64.00 MiB".
std::string FormatSizeLong(uint64_t bytes);
bool IsValidUnits(const std::string& units);

// Parses a size argument (-L, -s): default unit MiB unless the text has a suffix.
Result<uint64_t> ParseLvmSize(const std::string& text);

// "vg/lv" or "/dev/vg/lv" -> {vg, lv}; a bare name gives {name, ""}.
std::pair<std::string, std::string> SplitLvName(const std::string& name);

// LVs recorded active.
bool IsActive(const Context& ctx, const std::string& vg, const std::string& lv);

void RegisterPvVerbs(CLI::App& app, Context& ctx);
void RegisterVgVerbs(CLI::App& app, Context& ctx);
void RegisterLvVerbs(CLI::App& app, Context& ctx);
void RegisterReportVerbs(CLI::App& app, Context& ctx);
void RegisterCatVerb(CLI::App& app, Context& ctx);

}  // namespace volstack::cli::lvmcli
