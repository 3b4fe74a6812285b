#include "lvm/thin_commit.h"

#include <algorithm>
#include <string>

#include "lvm/thin_space_map.h"
#include "util/coding.h"

namespace volstack::lvm {

namespace {

// Hands out blocks free in both the committed transaction and the one being written.
class Allocator {
 public:
  explicit Allocator(const std::vector<bool>& used) : old_(used), taken_(used.size(), false) {}
  Result<uint64_t> Next() {
    for (; next_ < old_.size(); next_++) {
      if (!old_[next_] && !taken_[next_]) {
        taken_[next_] = true;
        return next_++;
      }
    }
    return Status::NoSpace("thin pool metadata is full");
  }
  const std::vector<bool>& taken() const { return taken_; }

 private:
  const std::vector<bool>& old_;
  std::vector<bool> taken_;
  uint64_t next_ = 1;  // block 0 is the superblock
};

uint32_t MaxEntries(uint32_t value_size) {
  uint32_t m = (kThinBlockBytes - kBtreeHeaderBytes) / (8 + value_size);
  return m - m % 3;
}

using Blocks = std::map<uint64_t, std::vector<uint8_t>>;

// Packs sorted keys[i] -> values[i * value_size] into a tree; returns its root.
Result<uint64_t> BuildTree(const std::vector<uint64_t>& keys, const std::vector<uint8_t>& values,
                           uint32_t value_size, Allocator& alloc, Blocks& out) {
  std::vector<uint64_t> level_keys = keys;
  std::vector<uint8_t> level_values = values;
  uint32_t vsize = value_size;
  bool leaf = true;
  for (;;) {
    const size_t n = level_keys.size();
    const uint32_t max = MaxEntries(vsize);
    const size_t nodes = std::max<size_t>(1, (n + max - 1) / max);
    std::vector<uint64_t> up_keys;
    std::vector<uint8_t> up_values;
    size_t at = 0;
    for (size_t k = 0; k < nodes; k++) {
      const size_t count = n / nodes + (k < n % nodes ? 1 : 0);
      VS_ASSIGN_OR_RETURN(uint64_t b, alloc.Next());
      std::vector<uint8_t> block(kThinBlockBytes);
      EncodeBtreeNode(block, b, !leaf, std::span<const uint64_t>(level_keys).subspan(at, count),
                      std::span<const uint8_t>(level_values).subspan(at * vsize, count * vsize),
                      vsize);
      out[b] = std::move(block);
      up_keys.push_back(count ? level_keys[at] : 0);
      up_values.resize(up_values.size() + 8);
      EncodeLE64(up_values.data() + up_values.size() - 8, b);
      at += count;
    }
    if (nodes == 1) return DecodeLE64(up_values.data());
    level_keys = std::move(up_keys);
    level_values = std::move(up_values);
    vsize = 8;
    leaf = false;
  }
}

// Bitmaps (and the tree of counts above 2) for `counts`; returns the index entries.
Result<std::vector<SmIndexEntry>> BuildBitmaps(const std::vector<uint32_t>& counts,
                                               const std::vector<uint64_t>& blocks, Blocks& out) {
  std::vector<SmIndexEntry> entries;
  for (size_t b = 0; b < blocks.size(); b++) {
    const size_t from = b * kSmEntriesPerBitmap;
    const size_t len = std::min<size_t>(kSmEntriesPerBitmap, counts.size() - from);
    std::vector<uint8_t> block(kThinBlockBytes);
    entries.push_back(
        EncodeSmBitmap(block, blocks[b], std::span<const uint32_t>(counts).subspan(from, len)));
    out[blocks[b]] = std::move(block);
  }
  return entries;
}

Result<uint64_t> BuildOverflowTree(const std::vector<uint32_t>& counts, Allocator& alloc,
                                   Blocks& out) {
  std::vector<uint64_t> keys;
  std::vector<uint8_t> values;
  for (size_t i = 0; i < counts.size(); i++) {
    if (counts[i] < 3) continue;
    keys.push_back(i);
    values.resize(values.size() + 4);
    EncodeLE32(values.data() + values.size() - 4, counts[i]);
  }
  return BuildTree(keys, values, 4, alloc, out);
}

}  // namespace

Status CommitThinMetadata(const bdev::BlockDevicePtr& meta, ThinPoolState& state,
                          std::vector<bool>& used) {
  ThinSuperblock sb = state.sb;
  const uint64_t nr_meta = sb.metadata_sm.nr_blocks;
  if (used.size() != nr_meta) return Status::InvalidArgument("thin commit: used map size");
  Allocator alloc(used);
  Blocks out;
  // The metadata space map's own blocks first: their number depends only on the size.
  const uint64_t meta_bitmaps = (nr_meta + kSmEntriesPerBitmap - 1) / kSmEntriesPerBitmap;
  if (meta_bitmaps > kSmMaxMetadataBitmaps) {
    return Status::NotSupported("thin pool metadata larger than its space map can index");
  }
  VS_ASSIGN_OR_RETURN(uint64_t index_block, alloc.Next());
  std::vector<uint64_t> meta_bitmap_blocks;
  for (uint64_t i = 0; i < meta_bitmaps; i++) {
    VS_ASSIGN_OR_RETURN(uint64_t b, alloc.Next());
    meta_bitmap_blocks.push_back(b);
  }
  // Every metadata block counts 1, so the metadata map's overflow tree is always empty.
  VS_ASSIGN_OR_RETURN(uint64_t meta_overflow, BuildTree({}, {}, 4, alloc, out));
  // The mapping trees.
  std::vector<uint64_t> top_keys, detail_keys;
  std::vector<uint8_t> top_values, detail_values;
  for (const auto& [id, dev] : state.devices) {
    std::vector<uint64_t> keys;
    std::vector<uint8_t> values;
    keys.reserve(dev.map.size());
    values.resize(dev.map.size() * 8);
    size_t i = 0;
    for (const auto& [vblock, v] : dev.map) {
      keys.push_back(vblock);
      EncodeLE64(values.data() + 8 * i++, v);
    }
    VS_ASSIGN_OR_RETURN(uint64_t root, BuildTree(keys, values, 8, alloc, out));
    top_keys.push_back(id);
    top_values.resize(top_values.size() + 8);
    EncodeLE64(top_values.data() + top_values.size() - 8, root);
    detail_keys.push_back(id);
    uint8_t d[kThinDeviceDetailsBytes];
    EncodeLE64(d, dev.mapped_blocks);
    EncodeLE64(d + 8, dev.transaction_id);
    EncodeLE32(d + 16, dev.creation_time);
    EncodeLE32(d + 20, dev.snapshotted_time);
    detail_values.insert(detail_values.end(), d, d + sizeof(d));
  }
  VS_ASSIGN_OR_RETURN(sb.data_mapping_root, BuildTree(top_keys, top_values, 8, alloc, out));
  VS_ASSIGN_OR_RETURN(sb.device_details_root,
                      BuildTree(detail_keys, detail_values, kThinDeviceDetailsBytes, alloc, out));
  // The data space map: bitmaps, their index tree, the tree of counts above 2.
  const std::vector<uint32_t>& refs = state.data_refs;
  const uint64_t data_bitmaps = (refs.size() + kSmEntriesPerBitmap - 1) / kSmEntriesPerBitmap;
  std::vector<uint64_t> data_bitmap_blocks;
  for (uint64_t i = 0; i < data_bitmaps; i++) {
    VS_ASSIGN_OR_RETURN(uint64_t b, alloc.Next());
    data_bitmap_blocks.push_back(b);
  }
  VS_ASSIGN_OR_RETURN(auto data_entries, BuildBitmaps(refs, data_bitmap_blocks, out));
  std::vector<uint64_t> idx_keys;
  std::vector<uint8_t> idx_values(data_entries.size() * kSmIndexEntryBytes);
  for (size_t i = 0; i < data_entries.size(); i++) {
    idx_keys.push_back(i);
    EncodeSmIndexEntry(data_entries[i], idx_values.data() + kSmIndexEntryBytes * i);
  }
  VS_ASSIGN_OR_RETURN(sb.data_sm.bitmap_root,
                      BuildTree(idx_keys, idx_values, kSmIndexEntryBytes, alloc, out));
  VS_ASSIGN_OR_RETURN(sb.data_sm.ref_count_root, BuildOverflowTree(refs, alloc, out));
  sb.data_sm.nr_blocks = refs.size();
  sb.data_sm.nr_allocated =
      static_cast<uint64_t>(std::count_if(refs.begin(), refs.end(), [](uint32_t c) { return c; }));
  // Now every block of the new transaction is known: the metadata space map.
  std::vector<uint32_t> meta_counts(nr_meta, 0);
  meta_counts[0] = 1;
  const std::vector<bool>& taken = alloc.taken();
  for (uint64_t b = 1; b < nr_meta; b++) meta_counts[b] = taken[b] ? 1 : 0;
  VS_ASSIGN_OR_RETURN(auto meta_entries, BuildBitmaps(meta_counts, meta_bitmap_blocks, out));
  {
    std::vector<uint8_t> block(kThinBlockBytes, 0);
    EncodeLE64(block.data() + 8, index_block);
    for (size_t i = 0; i < meta_entries.size(); i++) {
      EncodeSmIndexEntry(meta_entries[i], block.data() + 16 + kSmIndexEntryBytes * i);
    }
    EncodeLE32(block.data(), ThinBlockCsum(block, kIndexCsumXor));
    out[index_block] = std::move(block);
  }
  sb.metadata_sm.bitmap_root = index_block;
  sb.metadata_sm.ref_count_root = meta_overflow;
  sb.metadata_sm.nr_allocated = static_cast<uint64_t>(
      std::count_if(meta_counts.begin(), meta_counts.end(), [](uint32_t c) { return c; }));
  // Everything but the superblock, then the superblock: the switch to the new transaction.
  for (const auto& [b, block] : out) VS_RETURN_IF_ERROR(meta->Write(b * kThinBlockBytes, block));
  VS_RETURN_IF_ERROR(meta->Flush());
  std::vector<uint8_t> super(kThinBlockBytes);
  EncodeThinSuperblock(sb, super);
  VS_RETURN_IF_ERROR(meta->Write(0, super));
  VS_RETURN_IF_ERROR(meta->Flush());
  state.sb = sb;
  used.assign(nr_meta, false);
  used[0] = true;
  for (uint64_t b = 1; b < nr_meta; b++) used[b] = taken[b];
  return Status::Ok();
}

}  // namespace volstack::lvm
