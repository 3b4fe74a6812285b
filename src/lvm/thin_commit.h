// Writing a thin pool's metadata transaction (thin_format.h, thin_space_map.h).
//
// Theory. dm-thin never overwrites a block the committed transaction uses: new and changed
// nodes go to free blocks, and the superblock, written last, switches to them. volstack
// keeps the simplest form of that rule: a commit writes the whole metadata anew (every
// device's mapping tree, the top tree, the details tree, both space maps) into blocks the
// committed transaction does not use, flushes, then writes and flushes the superblock. A
// crash before the superblock reaches the disk leaves the previous transaction whole; after
// it, the new one. The cost is a rewrite of all metadata per commit (proportional to the
// mapped blocks), paid only when something changed.
//
// The trees are packed full (entries spread evenly over as few nodes as hold them), which
// satisfies persistent-data's rule that a non-root node is at least a third full. Every
// metadata block the new transaction uses has count 1, the superblock's block included.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/thin_format.h"

namespace volstack::lvm {

struct ThinPoolState {
  struct Device {
    uint64_t mapped_blocks = 0;
    uint64_t transaction_id = 0;
    uint32_t creation_time = 0;
    uint32_t snapshotted_time = 0;
    std::map<uint64_t, uint64_t> map;  // virtual block -> data block << 24 | time
  };
  ThinSuperblock sb;  // the committed superblock; roots are replaced at commit
  std::map<uint64_t, Device> devices;
  std::vector<uint32_t> data_refs;  // per data block (sb.data_sm.nr_blocks)
};

// Writes `state` as a new transaction into blocks `used` (the committed transaction's,
// metadata_sm.nr_blocks long) leaves free, then the superblock. On success state.sb holds
// the new superblock and `used` the new transaction's blocks. NoSpace when the free blocks
// cannot hold it; on any failure the previous transaction is what the disk holds.
Status CommitThinMetadata(const bdev::BlockDevicePtr& meta, ThinPoolState& state,
                          std::vector<bool>& used);

}  // namespace volstack::lvm
