#include "cli/verbs.h"

namespace volstack::cli {

void RegisterLvmVerbs(CLI::App& app, Context& ctx) {
  AddReservedVerb(app, ctx, "pvcreate", "LVM2 pvcreate");
  AddReservedVerb(app, ctx, "pvremove", "LVM2 pvremove");
  AddReservedVerb(app, ctx, "pvs", "LVM2 pvs");
  AddReservedVerb(app, ctx, "pvdisplay", "LVM2 pvdisplay");
  AddReservedVerb(app, ctx, "pvscan", "LVM2 pvscan");
  AddReservedVerb(app, ctx, "pvchange", "LVM2 pvchange");
  AddReservedVerb(app, ctx, "pvmove", "LVM2 pvmove");
  AddReservedVerb(app, ctx, "vgcreate", "LVM2 vgcreate");
  AddReservedVerb(app, ctx, "vgextend", "LVM2 vgextend");
  AddReservedVerb(app, ctx, "vgreduce", "LVM2 vgreduce");
  AddReservedVerb(app, ctx, "vgremove", "LVM2 vgremove");
  AddReservedVerb(app, ctx, "vgrename", "LVM2 vgrename");
  AddReservedVerb(app, ctx, "vgs", "LVM2 vgs");
  AddReservedVerb(app, ctx, "vgdisplay", "LVM2 vgdisplay");
  AddReservedVerb(app, ctx, "vgchange", "LVM2 vgchange");
  AddReservedVerb(app, ctx, "vgck", "LVM2 vgck");
  AddReservedVerb(app, ctx, "vgcfgbackup", "LVM2 vgcfgbackup");
  AddReservedVerb(app, ctx, "vgcfgrestore", "LVM2 vgcfgrestore");
  AddReservedVerb(app, ctx, "lvcreate", "LVM2 lvcreate");
  AddReservedVerb(app, ctx, "lvextend", "LVM2 lvextend");
  AddReservedVerb(app, ctx, "lvreduce", "LVM2 lvreduce");
  AddReservedVerb(app, ctx, "lvrename", "LVM2 lvrename");
  AddReservedVerb(app, ctx, "lvremove", "LVM2 lvremove");
  AddReservedVerb(app, ctx, "lvs", "LVM2 lvs");
  AddReservedVerb(app, ctx, "lvdisplay", "LVM2 lvdisplay");
}

}  // namespace volstack::cli
