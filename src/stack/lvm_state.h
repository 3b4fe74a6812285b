// The LVM half of the state dir (lvm2's devices file, kept by volstack):
//
//   <state_dir>/lvm/devices   one PV device name per line (a path, or a volstack device such
//                             as trunk/funk); pvcreate/vgcreate add, pvremove removes, pvscan
//                             adds what it finds.
//   <state_dir>/lvm/active    one "vg/lv" per line: the LVs `vgchange -a y` / lvcreate
//                             activated; `up` activates them.
//
// Both are changed under the state dir's lock and replaced atomically (util/state_file.h).
// Each is written with a first line "# volstack list format 1" (util/format_version.h): a file
// with a newer format is refused by name and left as it is; a file without that line (written
// before versions were) reads as format 1.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"
#include "util/status.h"

namespace volstack::stack {

std::string LvmDevicesPath(const std::string& state_dir);
std::string LvmActivePath(const std::string& state_dir);

// The lines of a list file; a missing file is empty. ENOTSUP for a newer format.
Result<std::vector<std::string>> ReadListFile(const std::string& path);
// `modify` returns false to leave the file unchanged. A newer format is refused untouched.
Status UpdateListFile(const std::string& state_dir, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify);
Status WriteListFile(const std::string& state_dir, const std::string& path,
                     const std::vector<std::string>& lines);
Status AddToList(const std::string& state_dir, const std::string& path,
                 const std::vector<std::string>& names);
Status RemoveFromList(const std::string& state_dir, const std::string& path,
                      const std::vector<std::string>& names);

// A device name as it is recorded: relative paths made absolute; others unchanged.
std::string NormalizeDeviceName(const std::string& name);

// "vg/lv" or "/dev/vg/lv" -> {vg, lv}; a bare name gives {name, ""}.
std::pair<std::string, std::string> SplitLvName(const std::string& name);

}  // namespace volstack::stack
