// Pools and VGs share one namespace of device names: "NAME/x" is pool NAME's volume x or VG
// NAME's LV x (stack/device_names.cc tries pool volumes first), and devfs shows both as
// dev/NAME/x, so a pool and a VG of one name would make a write meant for the LV land in
// the pool's volume. A name is therefore a pool's or a VG's, never both: the verbs that give
// a pool or a VG its name (zpool create/import; vgcreate, vgrename, vgcfgrestore) refuse a
// name the other kind holds, before anything is written.
#pragma once

#include <string>

#include "cli/cli.h"
#include "util/status.h"

namespace volstack::cli {

// EEXIST when a VG (on the scanned devices: the devices file and the pool volumes) is
// called `name`.
Status CheckNoVgNamed(const Context& ctx, const std::string& name);
// EEXIST when a pool in the state dir's zpool.cache is called `name`.
Status CheckNoPoolNamed(const Context& ctx, const std::string& name);

}  // namespace volstack::cli
