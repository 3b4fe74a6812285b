// dm-thin pool metadata as volstack reads it: the superblock thin_restore writes decodes
// (checksum included), btrees are looked up and walked with every node checked, and a
// ThinDevice reads mapped blocks from the data device and zeroes elsewhere, refusing
// metadata that disagrees with the VG or points outside the pool.
#include "lvm/thin_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>

#include "bdev/memory_device.h"
#include "lvm/thin_btree.h"
#include "lvm/thin_format.h"
#include "lvm/thin_space_map.h"
#include "util/coding.h"

namespace volstack::lvm {
namespace {

constexpr uint64_t kMetaBlocks = 64;
constexpr uint32_t kChunkSectors = 128;  // 64 KiB data blocks
constexpr uint64_t kChunk = kChunkSectors * 512;
constexpr uint64_t kDataBlocks = 32;

// Block 0 of a metadata file thin_restore 0.9.0 wrote (trans 1, 64 KiB blocks, 100 data
// blocks, 1024 metadata blocks): its non-zero bytes.
TEST(ThinFormatTest, DecodesTheSuperblockThinRestoreWrites) {
  std::vector<uint8_t> b(kThinBlockBytes, 0);
  const std::pair<int, uint8_t> bytes[] = {
      {0, 0x89},   {1, 0xc0},   {2, 0x8a},   {3, 0x60},   {32, 0xba},  {33, 0x52},
      {34, 0x9c},  {35, 0x01},  {40, 0x02},  {44, 0x01},  {48, 0x01},  {64, 0x64},
      {72, 0x03},  {80, 0x04},  {88, 0x05},  {193, 0x04}, {200, 0x0c}, {208, 0x01},
      {216, 0x02}, {320, 0x07}, {328, 0x06}, {336, 0x80}, {340, 0x08}, {345, 0x04}};
  for (auto [i, v] : bytes) b[i] = v;
  auto sb = DecodeThinSuperblock(b);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_EQ(sb->trans_id, 1u);
  EXPECT_EQ(sb->time, 1u);
  EXPECT_EQ(sb->data_block_size, 128u);
  EXPECT_EQ(sb->metadata_nr_blocks, 1024u);
  EXPECT_EQ(sb->data_sm.nr_blocks, 100u);
  EXPECT_EQ(sb->data_sm.nr_allocated, 3u);
  EXPECT_EQ(sb->metadata_sm.bitmap_root, 1u);
  EXPECT_EQ(sb->data_mapping_root, 7u);
  EXPECT_EQ(sb->device_details_root, 6u);
  // Encoding gives back the same bytes, checksum included.
  std::vector<uint8_t> again(kThinBlockBytes);
  EncodeThinSuperblock(*sb, again);
  EXPECT_EQ(again, b);
  b[48] = 2;  // another transaction id under the old checksum
  EXPECT_TRUE(DecodeThinSuperblock(b).status().IsCorruption());
  EXPECT_TRUE(DecodeThinSuperblock(std::vector<uint8_t>(kThinBlockBytes, 0)).status().IsNotFound());
}

std::vector<uint8_t> U64s(const std::vector<uint64_t>& v) {
  std::vector<uint8_t> out(v.size() * 8);
  size_t i = 0;
  for (uint64_t x : v) EncodeLE64(out.data() + 8 * i++, x);
  return out;
}

void PutNode(bdev::BlockDevice& meta, uint64_t at, bool internal, std::vector<uint64_t> keys,
             std::vector<uint8_t> values, uint32_t value_size) {
  std::vector<uint8_t> b(kThinBlockBytes);
  EncodeBtreeNode(b, at, internal, keys, values, value_size);
  ASSERT_TRUE(meta.Write(at * kThinBlockBytes, b).ok());
}

uint64_t Map(uint64_t data, uint32_t time = 0) { return data << kThinTimeBits | time; }

// A pool with thin device 7: virtual blocks 0, 1 and 5 -> data 3, 4 and 9, in a two-level
// tree (an internal node over two leaves); device 8 maps nothing.
struct Pool {
  std::shared_ptr<bdev::MemoryDevice> meta =
      bdev::MemoryDevice::Create(kMetaBlocks * kThinBlockBytes);
  std::shared_ptr<bdev::MemoryDevice> data = bdev::MemoryDevice::Create(kDataBlocks * kChunk);
  ThinSuperblock sb;

  Pool() {
    PutNode(*meta, 10, false, {0, 1}, U64s({Map(3), Map(4, 2)}), 8);
    PutNode(*meta, 11, false, {5}, U64s({Map(9)}), 8);
    PutNode(*meta, 12, true, {0, 5}, U64s({10, 11}), 8);
    PutNode(*meta, 13, false, {}, {}, 8);
    PutNode(*meta, 14, false, {0}, U64s({Map(3)}), 8);            // device 9 shares data block 3
    PutNode(*meta, 20, false, {7, 8, 9}, U64s({12, 13, 14}), 8);  // the top tree
    std::vector<uint8_t> details(3 * kThinDeviceDetailsBytes, 0);
    EncodeLE64(details.data(), 3);
    EncodeLE64(details.data() + 2 * kThinDeviceDetailsBytes, 1);
    PutNode(*meta, 21, false, {7, 8, 9}, details, kThinDeviceDetailsBytes);
    // The metadata space map: the blocks above, its bitmap (40) and index (41).
    std::vector<uint32_t> counts(kMetaBlocks, 0);
    for (uint64_t b : {0, 10, 11, 12, 13, 14, 20, 21, 40, 41}) counts[b] = 1;
    std::vector<uint8_t> bm(kThinBlockBytes), index(kThinBlockBytes, 0);
    const SmIndexEntry e = EncodeSmBitmap(bm, 40, counts);
    EXPECT_TRUE(meta->Write(40 * kThinBlockBytes, bm).ok());
    EncodeLE64(index.data() + 8, 41);
    EncodeSmIndexEntry(e, index.data() + 16);
    EncodeLE32(index.data(), ThinBlockCsum(index, kIndexCsumXor));
    EXPECT_TRUE(meta->Write(41 * kThinBlockBytes, index).ok());
    sb.metadata_sm.nr_blocks = kMetaBlocks;
    sb.metadata_sm.bitmap_root = 41;
    sb.trans_id = 5;
    sb.data_block_size = kChunkSectors;
    sb.metadata_nr_blocks = kMetaBlocks;
    sb.data_sm.nr_blocks = kDataBlocks;
    sb.data_mapping_root = 20;
    sb.device_details_root = 21;
    WriteSb();
    for (uint64_t b = 0; b < kDataBlocks; b++) {
      // Each block's halves differ, so a read at the wrong offset inside a block shows.
      std::vector<uint8_t> v(kChunk, uint8_t(0x40 + b));
      std::fill(v.begin() + kChunk / 2, v.end(), uint8_t(0x80 + b));
      EXPECT_TRUE(data->Write(b * kChunk, v).ok());
    }
  }
  void WriteSb() {
    std::vector<uint8_t> b(kThinBlockBytes);
    EncodeThinSuperblock(sb, b);
    ASSERT_TRUE(meta->Write(0, b).ok());
  }
  ThinDevice::Config Config(uint64_t id = 7, bool read_only = false) {
    ThinDevice::Config c;
    c.name = "vg/thin";
    c.size = 16 * kChunk;
    c.meta = meta;
    c.data = data;
    c.device_id = id;
    c.chunk_sectors = kChunkSectors;
    c.transaction_id = 5;
    c.read_only = read_only;
    return c;
  }
};

TEST(ThinBtreeTest, LookupAndWalkThroughAnInternalNode) {
  Pool p;
  ThinBtreeReader t(p.meta, kMetaBlocks);
  auto v = t.Lookup(12, 5, 8);
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ(DecodeLE64((*v)->data()) >> kThinTimeBits, 9u);
  auto v1 = t.Lookup(12, 1, 8);
  ASSERT_TRUE(v1.ok() && v1->has_value());
  EXPECT_EQ(DecodeLE64((*v1)->data()), Map(4, 2));
  for (uint64_t absent : {2, 4, 6, 1000}) {
    auto a = t.Lookup(12, absent, 8);
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a->has_value()) << absent;
  }
  std::vector<uint64_t> keys;
  ASSERT_TRUE(t.Walk(12, 8, [&](uint64_t k, std::span<const uint8_t>) {
                 keys.push_back(k);
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 1, 5}));
}

TEST(ThinBtreeTest, BadNodesAreCorruptionNamingTheBlock) {
  Pool p;
  ThinBtreeReader t(p.meta, kMetaBlocks);
  // A flipped byte: the checksum catches it.
  std::vector<uint8_t> b(kThinBlockBytes);
  ASSERT_TRUE(p.meta->Read(11 * kThinBlockBytes, b).ok());
  b[40] ^= 1;
  ASSERT_TRUE(p.meta->Write(11 * kThinBlockBytes, b).ok());
  auto r = t.Lookup(12, 5, 8);
  EXPECT_TRUE(r.status().IsCorruption());
  EXPECT_NE(r.status().message().find("block 11"), std::string::npos) << r.status().ToString();
  // A node pointing at itself: the depth limit ends the walk.
  PutNode(*p.meta, 30, true, {0}, U64s({30}), 8);
  EXPECT_TRUE(t.Walk(30, 8, [](uint64_t, auto) { return Status::Ok(); }).IsCorruption());
  EXPECT_TRUE(t.Lookup(30, 0, 8).status().IsCorruption());
  // Nodes whose entries all point at one child, level under level: no cycle, but a walk
  // that followed every entry would read 200^4 nodes. It stops at the metadata's size.
  std::vector<uint64_t> many(200), to33(200, 33), to34(200, 34), to35(200, 35);
  for (size_t i = 0; i < many.size(); i++) many[i] = i;
  PutNode(*p.meta, 32, true, many, U64s(to33), 8);
  PutNode(*p.meta, 33, true, many, U64s(to34), 8);
  PutNode(*p.meta, 34, true, many, U64s(to35), 8);
  PutNode(*p.meta, 35, false, {0}, U64s({Map(1)}), 8);
  uint64_t visits = 0;
  EXPECT_TRUE(t.Walk(32, 8, [&](uint64_t, auto) {
                 visits++;
                 return Status::Ok();
               }).IsCorruption());
  EXPECT_LE(visits, kMetaBlocks);
  // Outside the metadata, or a leaf of the wrong value size.
  EXPECT_TRUE(t.Lookup(kMetaBlocks, 0, 8).status().IsCorruption());
  EXPECT_TRUE(t.Lookup(10, 0, 24).status().IsCorruption());
  // A node stored at another block than it says.
  std::vector<uint8_t> moved(kThinBlockBytes);
  EncodeBtreeNode(moved, 10, false, std::vector<uint64_t>{0}, U64s({Map(1)}), 8);
  ASSERT_TRUE(p.meta->Write(31 * kThinBlockBytes, moved).ok());
  EXPECT_TRUE(t.Lookup(31, 0, 8).status().IsCorruption());
}

TEST(ThinDeviceTest, MappedBlocksReadFromTheDataDeviceAndTheRestAsZeroes) {
  Pool p;
  auto dev = ThinDevice::Open(p.Config(7, true));
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_TRUE((*dev)->read_only());
  EXPECT_EQ((*dev)->mapping().size(), 3u);
  std::vector<uint8_t> buf(6 * kChunk);
  ASSERT_TRUE((*dev)->Read(0, buf).ok());
  auto expect = [&](uint64_t vblock, int value) {  // the first half's value
    for (uint64_t i = 0; i < kChunk; i += 4096) {
      const int want = value && i >= kChunk / 2 ? value + 0x40 : value;
      ASSERT_EQ(buf[vblock * kChunk + i], want) << "virtual block " << vblock << " +" << i;
    }
  };
  expect(0, 0x43);
  expect(1, 0x44);
  expect(2, 0);
  expect(4, 0);
  expect(5, 0x49);
  // A read across a block edge, not block-aligned.
  std::vector<uint8_t> edge(1024);
  ASSERT_TRUE((*dev)->Read(kChunk - 512, edge).ok());
  EXPECT_EQ(edge[0], 0x83);
  EXPECT_EQ(edge[600], 0x44);
  auto alloc = (*dev)->QueryAllocation(0, 8 * kChunk);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(*alloc, (std::vector<bdev::AllocationExtent>{{0, 2 * kChunk, true},
                                                         {2 * kChunk, 3 * kChunk, false},
                                                         {5 * kChunk, kChunk, true},
                                                         {6 * kChunk, 2 * kChunk, false}}));
  EXPECT_FALSE((*dev)->Write(0, std::vector<uint8_t>(4096, 1)).ok());
  // Device 8 exists and maps nothing: all zeroes.
  auto empty = ThinDevice::Open(p.Config(8));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  ASSERT_TRUE((*empty)->Read(0, buf).ok());
  EXPECT_EQ(buf, std::vector<uint8_t>(buf.size(), 0));
}

TEST(ThinDeviceTest, RefusesMetadataThatDisagreesWithTheVgOrThePool) {
  {
    Pool p;
    auto c = p.Config();
    c.transaction_id = 4;
    auto r = ThinDevice::Open(c);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_NE(r.status().message().find("transaction_id is 5"), std::string::npos);
  }
  {
    Pool p;
    auto c = p.Config();
    c.chunk_sectors = 256;
    EXPECT_TRUE(ThinDevice::Open(c).status().IsCorruption());
  }
  {
    Pool p;
    EXPECT_TRUE(ThinDevice::Open(p.Config(10)).status().IsCorruption());  // no such device
  }
  {
    Pool p;
    p.sb.flags = 1;  // needs_check
    p.WriteSb();
    EXPECT_TRUE(ThinDevice::Open(p.Config()).status().IsCorruption());
  }
  {
    Pool p;
    p.sb.held_root = 7;  // a metadata snapshot the commits would not count as used
    p.WriteSb();
    auto r = ThinDevice::Open(p.Config());
    EXPECT_EQ(r.status().code(), EOPNOTSUPP);
    EXPECT_NE(r.status().message().find("metadata snapshot"), std::string::npos);
  }
  {
    Pool p;
    p.sb.data_sm.nr_blocks = kDataBlocks + 1;  // more than the data LV holds
    p.WriteSb();
    EXPECT_TRUE(ThinDevice::Open(p.Config()).status().IsCorruption());
  }
  {
    Pool p;
    PutNode(*p.meta, 11, false, {5}, U64s({Map(kDataBlocks)}), 8);  // outside the pool
    auto r = ThinDevice::Open(p.Config());
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_NE(r.status().message().find("outside the pool"), std::string::npos);
  }
  {
    Pool p;
    ASSERT_TRUE(p.meta->Write(0, std::vector<uint8_t>(kThinBlockBytes, 0)).ok());
    EXPECT_EQ(ThinDevice::Open(p.Config()).status().code(), EOPNOTSUPP);
  }
}

std::vector<uint8_t> Block(bdev::BlockDevice& d, uint64_t b) {
  std::vector<uint8_t> v(kThinBlockBytes);
  EXPECT_TRUE(d.Read(b * kThinBlockBytes, v).ok());
  return v;
}

// A write to an unmapped block gets a free data block, zeroes around the request; Flush
// commits into blocks the old transaction does not use, superblock last, and a new open
// sees the new mapping.
TEST(ThinPoolTest, WritesAllocateAndFlushCommitsANewTransaction) {
  Pool p;
  std::vector<std::vector<uint8_t>> old_nodes;
  for (uint64_t b : {10, 11, 12, 13, 14, 20, 21, 40, 41}) old_nodes.push_back(Block(*p.meta, b));
  auto dev = ThinDevice::Open(p.Config());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  ASSERT_FALSE((*dev)->read_only());
  const std::vector<uint8_t> data(4096, 0xab);
  ASSERT_TRUE((*dev)->Write(3 * kChunk + 8192, data).ok());  // virtual block 3: unmapped
  ASSERT_TRUE((*dev)->Write(1 * kChunk, data).ok());         // block 1: owned, in place
  const auto m = (*dev)->mapping();
  ASSERT_EQ(m.size(), 4u);
  const uint64_t fresh = m.at(3);
  EXPECT_TRUE(fresh != 3 && fresh != 4 && fresh != 9) << fresh;
  EXPECT_EQ(m.at(1), 4u);
  std::vector<uint8_t> got(kChunk);
  ASSERT_TRUE((*dev)->Read(3 * kChunk, got).ok());
  for (uint64_t i = 0; i < kChunk; i++) {
    ASSERT_EQ(got[i], i >= 8192 && i < 8192 + 4096 ? 0xab : 0) << i;
  }
  const auto sb_before = Block(*p.meta, 0);
  ASSERT_TRUE((*dev)->Flush().ok());
  EXPECT_NE(Block(*p.meta, 0), sb_before);
  // The committed transaction's blocks were not touched.
  size_t k = 0;
  for (uint64_t b : {10, 11, 12, 13, 14, 20, 21, 40, 41}) {
    EXPECT_EQ(Block(*p.meta, b), old_nodes[k++]) << "block " << b;
  }
  dev->reset();
  auto again = ThinDevice::Open(p.Config());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->mapping(), m);
  ASSERT_TRUE((*again)->Read(3 * kChunk, got).ok());
  EXPECT_EQ(got[8192], 0xab);
  EXPECT_EQ(got[0], 0);
  // And the new transaction can be written over in turn.
  ASSERT_TRUE((*again)->Write(6 * kChunk, data).ok());
  ASSERT_TRUE((*again)->Flush().ok());
  again->reset();
  auto third = ThinDevice::Open(p.Config());
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ((*third)->mapping().size(), 5u);
}

// Everything of a commit but the superblock reached the disk: the previous transaction is
// what opens, whole.
TEST(ThinPoolTest, ACrashBeforeTheSuperblockLeavesThePreviousTransaction) {
  Pool p;
  auto dev = ThinDevice::Open(p.Config());
  ASSERT_TRUE(dev.ok());
  const auto before = (*dev)->mapping();
  ASSERT_TRUE((*dev)->Write(7 * kChunk, std::vector<uint8_t>(kChunk, 0x11)).ok());
  const auto old_sb = Block(*p.meta, 0);
  ASSERT_TRUE((*dev)->Flush().ok());
  dev->reset();
  ASSERT_TRUE(p.meta->Write(0, old_sb).ok());  // the superblock write was lost
  auto reopened = ThinDevice::Open(p.Config());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->mapping(), before);
  std::vector<uint8_t> got(kChunk);
  ASSERT_TRUE((*reopened)->Read(0, got).ok());
  EXPECT_EQ(got[0], 0x43);
}

// A block shared with another device (a snapshot) is copied before it is written; the other
// device keeps the old data.
TEST(ThinPoolTest, SharedBlocksAreCopiedBeforeAWrite) {
  Pool p;
  ThinPool::Config pc;
  pc.name = "vg/pool";
  pc.meta = p.meta;
  pc.data = p.data;
  pc.chunk_sectors = kChunkSectors;
  pc.transaction_id = 5;
  auto pool = ThinPool::Open(pc);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto a = ThinDevice::Open(*pool, 7, "vg/a", 16 * kChunk, false);
  auto b = ThinDevice::Open(*pool, 9, "vg/b", 16 * kChunk, false);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Write(512, std::vector<uint8_t>(512, 0x77)).ok());
  EXPECT_NE((*a)->mapping().at(0), 3u);
  EXPECT_EQ((*b)->mapping().at(0), 3u);
  std::vector<uint8_t> ga(kChunk), gb(kChunk);
  ASSERT_TRUE((*a)->Read(0, ga).ok());
  ASSERT_TRUE((*b)->Read(0, gb).ok());
  EXPECT_EQ(ga[0], 0x43);  // copied around the write
  EXPECT_EQ(ga[512], 0x77);
  EXPECT_EQ(ga[kChunk - 1], 0x83);
  EXPECT_EQ(gb[512], 0x43);
  // Block 3 is b's alone now, but the committed transaction still maps it for a too: an
  // in-place write would show through a's mapping after a crash, so b copies it as well.
  ASSERT_TRUE((*b)->Write(0, std::vector<uint8_t>(512, 0x55)).ok());
  const uint64_t b0 = (*b)->mapping().at(0);
  EXPECT_NE(b0, 3u);
  // After a commit, b's block is its own: written in place.
  ASSERT_TRUE((*b)->Flush().ok());
  ASSERT_TRUE((*b)->Write(0, std::vector<uint8_t>(512, 0x66)).ok());
  EXPECT_EQ((*b)->mapping().at(0), b0);
}

TEST(ThinPoolTest, OutOfDataSpaceIsNoSpaceAndLosesNothingWritten) {
  Pool p;
  auto dev = ThinDevice::Open(p.Config());
  ASSERT_TRUE(dev.ok());
  // 32 data blocks, 3 used (3, 4, 9). Filling device 7's 16 blocks takes 14 more (block 0
  // is copied away from device 9, 1 and 5 are written in place): 15 are left for device 8.
  const std::vector<uint8_t> one(kChunk, 0x21);
  for (uint64_t v = 0; v < 16; v++) ASSERT_TRUE((*dev)->Write(v * kChunk, one).ok()) << v;
  auto other = ThinDevice::Open((*dev)->pool(), 8, "vg/other", 16 * kChunk, false);
  ASSERT_TRUE(other.ok());
  Status s;
  uint64_t v = 0;
  for (; v < 16 && s.ok(); v++) s = (*other)->Write(v * kChunk, one);
  EXPECT_EQ(s.code(), ENOSPC) << s.ToString();
  EXPECT_EQ(v, 16u);  // the 16th write found no space
  ASSERT_TRUE((*dev)->Flush().ok());
  std::vector<uint8_t> got(kChunk);
  ASSERT_TRUE((*dev)->Read(15 * kChunk, got).ok());
  EXPECT_EQ(got, one);
}

// Discard unmaps whole blocks (they read as zeroes); their data blocks return to the pool,
// but only after the commit that stops the committed transaction naming them.
TEST(ThinPoolTest, DiscardReturnsBlocksToThePoolAfterACommit) {
  Pool p;
  auto dev = ThinDevice::Open(p.Config());
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE((*dev)->Discard(0, 2 * kChunk + 4096).ok());  // blocks 0 and 1, part of 2
  EXPECT_EQ((*dev)->mapping(), (std::map<uint64_t, uint64_t>{{5, 9}}));
  std::vector<uint8_t> got(kChunk);
  ASSERT_TRUE((*dev)->Read(kChunk, got).ok());
  EXPECT_EQ(got, std::vector<uint8_t>(kChunk, 0));
  // Block 4 (device 7's alone) is free in memory, not yet on disk: 32 - 3 blocks are usable.
  auto other = ThinDevice::Open((*dev)->pool(), 8, "vg/other", 64 * kChunk, false);
  ASSERT_TRUE(other.ok());
  const std::vector<uint8_t> one(kChunk, 0x31);
  uint64_t written = 0;
  while ((*other)->Write(written * kChunk, one).ok()) written++;
  EXPECT_EQ(written, kDataBlocks - 3);
  for (const auto& [v, d] : (*other)->mapping()) EXPECT_NE(d, 4u) << "virtual block " << v;
  ASSERT_TRUE((*dev)->Flush().ok());
  EXPECT_EQ((*dev)->pool()->superblock().data_sm.nr_allocated, kDataBlocks - 1);
  // Committed: block 4 is free now.
  ASSERT_TRUE((*other)->Write(written * kChunk, one).ok());
  EXPECT_EQ((*other)->mapping().at(written), 4u);
  EXPECT_FALSE((*other)->Write((written + 1) * kChunk, one).ok());
}

}  // namespace
}  // namespace volstack::lvm
