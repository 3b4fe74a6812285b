#include "lvm/raid_format.h"

#include <algorithm>
#include <cstring>

#include "util/coding.h"

namespace volstack::lvm {

namespace {
bool AllZero(std::span<const uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t c) { return c == 0; });
}
}  // namespace

Result<DmRaidSuperblock> DecodeDmRaidSuperblock(std::span<const uint8_t> block) {
  if (block.size() < 148) return Status::InvalidArgument("dm-raid superblock: short buffer");
  const uint8_t* p = block.data();
  if (DecodeLE32(p) != kDmRaidMagic) {
    if (AllZero(block)) return Status::NotFound("no dm-raid superblock");
    return Status::Corruption("not a dm-raid superblock (bad magic)");
  }
  DmRaidSuperblock sb;
  sb.compat_features = DecodeLE32(p + 4);
  sb.num_devices = DecodeLE32(p + 8);
  sb.array_position = DecodeLE32(p + 12);
  sb.events = DecodeLE64(p + 16);
  sb.failed_devices = DecodeLE64(p + 24);
  sb.disk_recovery_offset = DecodeLE64(p + 32);
  sb.array_resync_offset = DecodeLE64(p + 40);
  sb.level = DecodeLE32(p + 48);
  sb.layout = DecodeLE32(p + 52);
  sb.stripe_sectors = DecodeLE32(p + 56);
  if (sb.compat_features & kDmRaidFeatureV190) {
    sb.flags = DecodeLE32(p + 60);
    sb.reshape_position = DecodeLE64(p + 64);
    sb.new_level = DecodeLE32(p + 72);
    sb.new_layout = DecodeLE32(p + 76);
    sb.new_stripe_sectors = DecodeLE32(p + 80);
    sb.delta_disks = DecodeLE32(p + 84);
    sb.array_sectors = DecodeLE64(p + 88);
    sb.data_offset = DecodeLE64(p + 96);
    sb.new_data_offset = DecodeLE64(p + 104);
    sb.sectors = DecodeLE64(p + 112);
    for (int i = 0; i < 3; i++) sb.extended_failed_devices[i] = DecodeLE64(p + 120 + 8 * i);
    sb.incompat_features = DecodeLE32(p + 144);
  }
  return sb;
}

void EncodeDmRaidSuperblock(const DmRaidSuperblock& sb, std::span<uint8_t> block) {
  std::fill(block.begin(), block.end(), 0);
  uint8_t* p = block.data();
  EncodeLE32(p, kDmRaidMagic);
  EncodeLE32(p + 4, sb.compat_features);
  EncodeLE32(p + 8, sb.num_devices);
  EncodeLE32(p + 12, sb.array_position);
  EncodeLE64(p + 16, sb.events);
  EncodeLE64(p + 24, sb.failed_devices);
  EncodeLE64(p + 32, sb.disk_recovery_offset);
  EncodeLE64(p + 40, sb.array_resync_offset);
  EncodeLE32(p + 48, sb.level);
  EncodeLE32(p + 52, sb.layout);
  EncodeLE32(p + 56, sb.stripe_sectors);
  EncodeLE32(p + 60, sb.flags);
  EncodeLE64(p + 64, sb.reshape_position);
  EncodeLE32(p + 72, sb.new_level);
  EncodeLE32(p + 76, sb.new_layout);
  EncodeLE32(p + 80, sb.new_stripe_sectors);
  EncodeLE32(p + 84, sb.delta_disks);
  EncodeLE64(p + 88, sb.array_sectors);
  EncodeLE64(p + 96, sb.data_offset);
  EncodeLE64(p + 104, sb.new_data_offset);
  EncodeLE64(p + 112, sb.sectors);
  for (int i = 0; i < 3; i++) EncodeLE64(p + 120 + 8 * i, sb.extended_failed_devices[i]);
  EncodeLE32(p + 144, sb.incompat_features);
}

Result<MdBitmapSuper> DecodeMdBitmapSuper(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMdBitmapSuperBytes) return Status::InvalidArgument("bitmap: short buffer");
  const uint8_t* p = bytes.data();
  if (DecodeLE32(p) != kMdBitmapMagic) {
    if (AllZero(bytes.first(kMdBitmapSuperBytes))) return Status::NotFound("no md bitmap");
    return Status::Corruption("not an md bitmap superblock (bad magic)");
  }
  MdBitmapSuper sb;
  sb.version = DecodeLE32(p + 4);
  std::memcpy(sb.uuid, p + 8, 16);
  sb.events = DecodeLE64(p + 24);
  sb.events_cleared = DecodeLE64(p + 32);
  sb.sync_size = DecodeLE64(p + 40);
  sb.state = DecodeLE32(p + 48);
  sb.chunksize = DecodeLE32(p + 52);
  sb.daemon_sleep = DecodeLE32(p + 56);
  sb.write_behind = DecodeLE32(p + 60);
  sb.sectors_reserved = DecodeLE32(p + 64);
  sb.nodes = DecodeLE32(p + 68);
  return sb;
}

void EncodeMdBitmapSuper(const MdBitmapSuper& sb, std::span<uint8_t> bytes) {
  std::fill(bytes.begin(), bytes.begin() + kMdBitmapSuperBytes, 0);
  uint8_t* p = bytes.data();
  EncodeLE32(p, kMdBitmapMagic);
  EncodeLE32(p + 4, sb.version);
  std::memcpy(p + 8, sb.uuid, 16);
  EncodeLE64(p + 24, sb.events);
  EncodeLE64(p + 32, sb.events_cleared);
  EncodeLE64(p + 40, sb.sync_size);
  EncodeLE32(p + 48, sb.state);
  EncodeLE32(p + 52, sb.chunksize);
  EncodeLE32(p + 56, sb.daemon_sleep);
  EncodeLE32(p + 60, sb.write_behind);
  EncodeLE32(p + 64, sb.sectors_reserved);
  EncodeLE32(p + 68, sb.nodes);
}

Result<MirrorLogHeader> DecodeMirrorLogHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < 16) return Status::InvalidArgument("mirror log: short buffer");
  if (DecodeLE32(bytes.data()) != kMirrorLogMagic) return Status::NotFound("no mirror log header");
  MirrorLogHeader h;
  h.version = DecodeLE32(bytes.data() + 4);
  h.nr_regions = DecodeLE64(bytes.data() + 8);
  return h;
}

void EncodeMirrorLogHeader(const MirrorLogHeader& h, std::span<uint8_t> bytes) {
  std::fill(bytes.begin(), bytes.begin() + 16, 0);
  EncodeLE32(bytes.data(), kMirrorLogMagic);
  EncodeLE32(bytes.data() + 4, h.version);
  EncodeLE64(bytes.data() + 8, h.nr_regions);
}

}  // namespace volstack::lvm
