// Byte-granular reads and writes on a BlockDevice for metadata (label sector, mda headers,
// metadata text): requests are widened to the device's logical block size, and partial
// blocks are read, patched and written back. Metadata has one writer (the process holding
// the VG), so the read-modify-write is not racing another writer of the same block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bdev/block_device.h"

namespace volstack::lvm {

Result<std::vector<uint8_t>> ReadBytes(bdev::BlockDevice& dev, uint64_t offset, uint64_t length);
Status WriteBytes(bdev::BlockDevice& dev, uint64_t offset, std::span<const uint8_t> data);

}  // namespace volstack::lvm
