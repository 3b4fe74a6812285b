// The LVM half of the state dir (lvm2's devices file, kept by volstack):
//
//   <state_dir>/lvm/devices   one PV device name per line (a path, or a volstack device such
//                             as trunk/funk); pvcreate/vgcreate add, pvremove removes, pvscan
//                             adds what it finds.
//   <state_dir>/lvm/active    one "vg/lv" per line: the LVs `vgchange -a y` / lvcreate
//                             activated; `up` activates them.
//
// Both are changed under the state dir's lock and replaced atomically (util/state_file.h).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace volstack::stack {

std::string LvmDevicesPath(const std::string& state_dir);
std::string LvmActivePath(const std::string& state_dir);

// The lines of a list file; a missing file is empty.
std::vector<std::string> ReadListFile(const std::string& path);
// `modify` returns false to leave the file unchanged.
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
