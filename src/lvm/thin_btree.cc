#include "lvm/thin_btree.h"

#include <string>

#include "util/coding.h"

namespace volstack::lvm {

Status ThinBtreeReader::ReadNode(uint64_t blocknr, uint32_t value_size, std::vector<uint8_t>& block,
                                 BtreeNodeHeader& header) const {
  if (blocknr == 0 || blocknr >= nr_blocks_) {
    return Status::Corruption("thin pool metadata: btree points at block " +
                              std::to_string(blocknr) + ", outside the metadata (" +
                              std::to_string(nr_blocks_) + " blocks)");
  }
  block.resize(kThinBlockBytes);
  VS_RETURN_IF_ERROR(meta_->Read(blocknr * kThinBlockBytes, block));
  VS_ASSIGN_OR_RETURN(header, DecodeBtreeNode(block, blocknr, value_size));
  return Status::Ok();
}

Result<std::optional<std::vector<uint8_t>>> ThinBtreeReader::Lookup(uint64_t root, uint64_t key,
                                                                    uint32_t value_size) const {
  std::vector<uint8_t> block;
  BtreeNodeHeader h;
  uint64_t at = root;
  for (int depth = 0; depth < kMaxDepth; depth++) {
    VS_RETURN_IF_ERROR(ReadNode(at, value_size, block, h));
    // The last entry whose key is <= key.
    uint32_t lo = 0, hi = h.nr_entries;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (BtreeKey(block, mid) <= key) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo == 0) return std::optional<std::vector<uint8_t>>();
    const uint32_t i = lo - 1;
    auto v = BtreeValue(block, h, i);
    if (!h.internal()) {
      if (BtreeKey(block, i) != key) return std::optional<std::vector<uint8_t>>();
      return std::optional<std::vector<uint8_t>>(std::vector<uint8_t>(v.begin(), v.end()));
    }
    at = DecodeLE64(v.data());
  }
  return Status::Corruption("thin pool metadata: btree at block " + std::to_string(root) +
                            " is deeper than " + std::to_string(kMaxDepth) + " levels");
}

Status ThinBtreeReader::Walk(uint64_t root, uint32_t value_size, const Visit& visit) const {
  // One tree reaches each node once, so it has no more nodes than the metadata has blocks;
  // hostile metadata whose nodes all point at one child would otherwise walk 252^depth.
  uint64_t budget = nr_blocks_;
  return WalkNode(root, value_size, 0, budget, visit);
}

Status ThinBtreeReader::WalkNode(uint64_t blocknr, uint32_t value_size, int depth, uint64_t& budget,
                                 const Visit& visit) const {
  if (budget == 0) {
    return Status::Corruption(
        "thin pool metadata: a btree reaches more nodes than the "
        "metadata has blocks (a node is reached twice)");
  }
  budget--;
  if (depth >= kMaxDepth) {
    return Status::Corruption("thin pool metadata: btree deeper than " + std::to_string(kMaxDepth) +
                              " levels (a loop?)");
  }
  std::vector<uint8_t> block;
  BtreeNodeHeader h;
  VS_RETURN_IF_ERROR(ReadNode(blocknr, value_size, block, h));
  for (uint32_t i = 0; i < h.nr_entries; i++) {
    auto v = BtreeValue(block, h, i);
    if (h.internal()) {
      VS_RETURN_IF_ERROR(WalkNode(DecodeLE64(v.data()), value_size, depth + 1, budget, visit));
    } else {
      VS_RETURN_IF_ERROR(visit(BtreeKey(block, i), v));
    }
  }
  return Status::Ok();
}

}  // namespace volstack::lvm
