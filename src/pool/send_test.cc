// zfs send/receive (send.cc, receive.cc, send_stream.cc) between two pools on memory
// devices: full and incremental streams reproduce each snapshot byte for byte (and after
// an import), holes travel as holes, an incremental send reads only what changed, -I
// carries every snapshot, and every kind of bad stream (cut anywhere, a byte flipped
// anywhere, the wrong origin, fed twice, empty, a newer version) is one error that leaves
// the target as it was, with no partial dataset behind. The pools' checker runs after
// each scenario.
#include "pool/send.h"

#include <gtest/gtest.h>

#include <cstring>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "pool/compress.h"
#include "pool/pool_impl.h"
#include "pool/send_stream_fuzz.h"
#include "pool/test_util.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

struct TestPool {
  std::vector<bdev::BlockDevicePtr> devs;
  std::shared_ptr<Pool> pool;
};

TestPool MakePool(const std::string& name) {
  TestPool t;
  t.devs.push_back(bdev::MemoryDevice::Create(256 * kMiB));
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = Pool::Create(name, t.devs, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  t.pool = *p;
  return t;
}

std::vector<uint8_t> ReadAll(Pool& pool, const std::string& name) {
  auto d = pool.OpenVolume(name, {.read_only = true});
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
  if (!d.ok()) return {};
  std::vector<uint8_t> out((*d)->size());
  EXPECT_TRUE((*d)->Read(0, out).ok());
  return out;
}

Result<std::vector<uint8_t>> SendToBuffer(Pool& pool, const SendOptions& o,
                                          SendStats* stats = nullptr) {
  std::vector<uint8_t> out;
  auto r = Send(pool, o, [&](std::span<const uint8_t> rec) {
    out.insert(out.end(), rec.begin(), rec.end());
    return Status::Ok();
  });
  if (!r.ok()) return r.status();
  if (stats) *stats = *r;
  return out;
}

Result<ReceiveStats> ReceiveBuffer(Pool& pool, const std::vector<uint8_t>& stream,
                                   ReceiveOptions o) {
  size_t pos = 0;
  StreamReader reader([&](uint8_t* dst, size_t n) -> Result<size_t> {
    const size_t k = std::min(n, stream.size() - pos);
    std::memcpy(dst, stream.data() + pos, k);
    pos += k;
    return k;
  });
  return Receive(pool, o, reader);
}

std::vector<std::string> SnapshotNames(Pool& pool) {
  std::vector<std::string> out;
  for (const auto& d : pool.ListSnapshots()) out.push_back(d.name + ":" + std::to_string(d.guid));
  return out;
}

bool HasHidden(Pool& pool) {
  std::lock_guard l(pool.impl()->mu);
  for (const auto& [n, v] : pool.impl()->volumes) {
    if (n.find('%') != std::string::npos) return true;
  }
  return false;
}

struct Scenario {
  TestPool a = MakePool("src"), b = MakePool("dst");
  std::vector<uint8_t> at1, at2;
  std::vector<uint8_t> full, incr;

  // src/vol (64 MiB, thin, 16K blocks) with 4 MiB written at 1 MiB and 2 blocks near the
  // end: @1; then 2 blocks changed, 1 MiB discarded: @2.
  Scenario() {
    VolumeOptions vo;
    vo.volsize = 64 * kMiB;
    vo.volblocksize = 16384;
    vo.sparse = true;
    vo.props["user:role"] = "db";
    EXPECT_TRUE(a.pool->CreateVolume("src/vol", vo).ok());
    {
      auto d = *a.pool->OpenVolume("src/vol");
      EXPECT_TRUE(d->Write(1 * kMiB, Pattern(4 * kMiB, 1)).ok());
      EXPECT_TRUE(d->Write(60 * kMiB, Pattern(32768, 2)).ok());
    }
    EXPECT_TRUE(a.pool->Snapshot({"src/vol@1"}).ok());
    {
      auto d = *a.pool->OpenVolume("src/vol");
      EXPECT_TRUE(d->Write(2 * kMiB, Pattern(32768, 3)).ok());
      EXPECT_TRUE(d->Discard(4 * kMiB, 1 * kMiB).ok());
    }
    EXPECT_TRUE(a.pool->Snapshot({"src/vol@2"}).ok());
    at1 = ReadAll(*a.pool, "src/vol@1");
    at2 = ReadAll(*a.pool, "src/vol@2");
    auto f = SendToBuffer(*a.pool, {.snapshot = "src/vol@1"});
    auto i = SendToBuffer(*a.pool, {.snapshot = "src/vol@2", .from = "@1"});
    EXPECT_TRUE(f.ok() && i.ok()) << f.status().ToString() << i.status().ToString();
    if (f.ok()) full = *f;
    if (i.ok()) incr = *i;
  }
};

TEST(SendTest, FullThenIncrementalReproducesEverySnapshot) {
  Scenario s;
  // Holes travel as holes: 4 MiB + 32 KiB written of 64 MiB.
  EXPECT_LT(s.full.size(), 4 * kMiB + 256 * 1024);
  auto r = ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->snapshots, std::vector<std::string>{"dst/copy@1"});
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@1"), s.at1);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), s.at1);
  auto info = *s.b.pool->GetDataset("dst/copy");
  EXPECT_EQ(info.volsize, 64 * kMiB);
  EXPECT_EQ(info.volblocksize, 16384u);
  EXPECT_EQ(info.props["user:role"], "db");
  EXPECT_LT(info.referenced, 5 * kMiB);  // holes stayed holes
  EXPECT_EQ(s.b.pool->GetDataset("dst/copy@1")->guid, s.a.pool->GetDataset("src/vol@1")->guid);

  r = ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@2"), s.at2);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), s.at2);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@1"), s.at1);
  EXPECT_FALSE(HasHidden(*s.b.pool));
  ExpectConsistent(*s.a.pool);
  ExpectConsistent(*s.b.pool);

  // Durable: the same after an import.
  ASSERT_TRUE(s.b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(s.b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadAll(**again, "dst/copy@1"), s.at1);
  EXPECT_EQ(ReadAll(**again, "dst/copy@2"), s.at2);
  EXPECT_EQ(ReadAll(**again, "dst/copy"), s.at2);
  ExpectConsistent(**again);
}

TEST(SendTest, IncrementalReadsOnlyWhatChanged) {
  Scenario s;
  SendStats full, incr, dry;
  ASSERT_TRUE(SendToBuffer(*s.a.pool, {.snapshot = "src/vol@2"}, &full).ok());
  ASSERT_TRUE(SendToBuffer(*s.a.pool, {.snapshot = "src/vol@2", .from = "@1"}, &incr).ok());
  // 2 changed data blocks and their parents, not the 3 MiB + 32 KiB still written.
  EXPECT_GE(full.bytes_read, 3 * kMiB);
  EXPECT_LE(incr.bytes_read, 2 * 16384 + 4 * kIndirectBlockSize);
  EXPECT_EQ(incr.write_records, 2u);
  EXPECT_GE(incr.free_records, 1u);
  // -n: the exact size, no data read.
  auto d = Send(*s.a.pool, {.snapshot = "src/vol@2", .from = "@1", .dry_run = true},
                [](std::span<const uint8_t>) { return Status::IoError("dry run wrote"); });
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->stream_bytes, s.incr.size());
  EXPECT_LE(d->bytes_read, 4 * kIndirectBlockSize);
}

TEST(SendTest, IntermediatesCarryEverySnapshot) {
  Scenario s;
  {
    auto d = *s.a.pool->OpenVolume("src/vol");
    ASSERT_TRUE(d->Write(0, Pattern(16384, 9)).ok());
  }
  ASSERT_TRUE(s.a.pool->Snapshot({"src/vol@3"}).ok());
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  auto stream =
      *SendToBuffer(*s.a.pool, {.snapshot = "src/vol@3", .from = "@1", .intermediates = true});
  auto r = ReceiveBuffer(*s.b.pool, stream, {.target = "dst/copy"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->snapshots, (std::vector<std::string>{"dst/copy@2", "dst/copy@3"}));
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@2"), s.at2);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@3"), ReadAll(*s.a.pool, "src/vol@3"));
  ExpectConsistent(*s.b.pool);
}

// Every bad stream: one error, and the target pool's datasets, snapshots and data as they
// were, with no hidden dataset left.
void ExpectRefusedUnchanged(Scenario& s, const std::vector<uint8_t>& stream, ReceiveOptions o,
                            const std::string& what) {
  const auto snaps = SnapshotNames(*s.b.pool);
  const auto data = ReadAll(*s.b.pool, "dst/copy");
  auto r = ReceiveBuffer(*s.b.pool, stream, o);
  EXPECT_FALSE(r.ok()) << what;
  EXPECT_EQ(SnapshotNames(*s.b.pool), snaps) << what;
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), data) << what;
  EXPECT_FALSE(HasHidden(*s.b.pool)) << what;
}

TEST(SendTest, BadStreamsChangeNothing) {
  Scenario s;
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  std::mt19937_64 rng(34);
  // Cut at many points, a byte flipped at many places, of the incremental stream.
  for (int i = 0; i < 4; i++) {
    const size_t cut = 1 + rng() % (s.incr.size() - 1);
    std::vector<uint8_t> t(s.incr.begin(), s.incr.begin() + cut);
    ExpectRefusedUnchanged(s, t, {.target = "dst/copy"}, "cut at " + std::to_string(cut));
    std::vector<uint8_t> f = s.incr;
    const size_t at = rng() % f.size();
    f[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    ExpectRefusedUnchanged(s, f, {.target = "dst/copy"}, "flipped at " + std::to_string(at));
  }
  // The full stream fed twice; a full stream cut short into a new name leaves nothing.
  ExpectRefusedUnchanged(s, s.full, {.target = "dst/copy"}, "full stream twice");
  auto cut = s.full;
  cut.resize(cut.size() - 70);
  auto r = ReceiveBuffer(*s.b.pool, cut, {.target = "dst/other"});
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(s.b.pool->GetDataset("dst/other").ok());
  EXPECT_FALSE(HasHidden(*s.b.pool));
  // Empty input.
  r = ReceiveBuffer(*s.b.pool, {}, {.target = "dst/copy"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no send stream"), std::string::npos);
  // A newer version: named as such.
  auto newer = s.incr;
  EncodeLE64(&newer[16], kStreamVersion + 1);
  r = ReceiveBuffer(*s.b.pool, newer, {.target = "dst/copy"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("newer"), std::string::npos) << r.status().ToString();
  // The incremental stream applied, then fed again.
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy"}).ok());
  ExpectRefusedUnchanged(s, s.incr, {.target = "dst/copy"}, "incremental twice");
  ExpectConsistent(*s.b.pool);
}

TEST(SendTest, WrongOriginAndModifiedTarget) {
  Scenario s;
  // Another volume's snapshot as the target's newest: the origin guid is not there.
  VolumeOptions vo;
  vo.volsize = 64 * kMiB;
  vo.volblocksize = 16384;
  vo.sparse = true;
  ASSERT_TRUE(s.b.pool->CreateVolume("dst/copy", vo).ok());
  ASSERT_TRUE(s.b.pool->Snapshot({"dst/copy@1"}).ok());
  ExpectRefusedUnchanged(s, s.incr, {.target = "dst/copy"}, "wrong origin");
  ASSERT_TRUE(s.b.pool->DestroySnapshot("dst/copy@1").ok());
  ASSERT_TRUE(s.b.pool->DestroyVolume("dst/copy").ok());

  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  {
    auto d = *s.b.pool->OpenVolume("dst/copy");
    ASSERT_TRUE(d->Write(0, Pattern(16384, 7)).ok());
    // In use: refused even with -F.
    auto r = ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy", .force = true});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EBUSY) << r.status().ToString();
  }
  ExpectRefusedUnchanged(s, s.incr, {.target = "dst/copy"}, "modified since @1");
  // -F rolls the change back in the receive's own txg.
  auto r = ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy", .force = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), s.at2);
  ExpectConsistent(*s.b.pool);
}

TEST(SendTest, FailedForcedReceiveKeepsTheChange) {
  Scenario s;
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  {
    auto d = *s.b.pool->OpenVolume("dst/copy");
    ASSERT_TRUE(d->Write(0, Pattern(16384, 7)).ok());
  }
  auto cut = s.incr;
  cut.resize(cut.size() / 2);
  // -F's rollback belongs to the receive's commit: a stream that fails undoes nothing.
  ExpectRefusedUnchanged(s, cut, {.target = "dst/copy", .force = true}, "-F, cut");
  ExpectConsistent(*s.b.pool);
}

// recv -s: a stream cut at random points, resumed each time from the token (send -t),
// ends as an unbroken receive does; the pool is format version 4 only while a partial
// receive is kept, -A discards one, and a plain receive meanwhile is refused.
TEST(SendTest, ResumableReceiveAfterCuts) {
  Scenario s;
  std::mt19937_64 rng(3434);
  auto resume_until_done = [&](const std::string& target, std::vector<uint8_t> stream) {
    for (int cuts = 0;; cuts++) {
      ASSERT_LT(cuts, 20);
      // Past BEGIN (a stream cut inside BEGIN is refused before anything is kept).
      const bool cut = cuts < 5 && stream.size() > 400;
      if (cut) stream.resize(300 + rng() % (stream.size() - 300));
      auto r = ReceiveBuffer(*s.b.pool, stream, {.target = target, .resumable = true});
      if (!cut) {
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        return;
      }
      ASSERT_FALSE(r.ok());
      auto token = ReceiveResumeToken(*s.b.pool, target);
      ASSERT_TRUE(token.ok()) << r.status().ToString();
      EXPECT_NE(r.status().message().find(*token), std::string::npos);
      auto o = SendOptionsFromToken(*token);
      ASSERT_TRUE(o.ok());
      auto next = SendToBuffer(*s.a.pool, *o);
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      stream = *next;
    }
  };
  resume_until_done("dst/copy", s.full);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@1"), s.at1);
  EXPECT_FALSE(HasHidden(*s.b.pool));

  // Incremental: a partial state on disk is format version 4 and survives an import.
  auto cut = s.incr;
  cut.resize(cut.size() * 2 / 3);
  ASSERT_FALSE(ReceiveBuffer(*s.b.pool, cut, {.target = "dst/copy", .resumable = true}).ok());
  ASSERT_TRUE(s.b.pool->Sync().ok());
  {
    std::lock_guard l(s.b.pool->impl()->sync_mu);
    std::vector<uint8_t> mos(s.b.pool->impl()->mos_bp.lsize);
    ASSERT_TRUE(s.b.pool->impl()->ReadBlock(s.b.pool->impl()->mos_bp, mos.data()).ok());
    // Version 6 (the deferred frees, defer_map.h, outrank 4) with the resume state.
    EXPECT_EQ(DecodeLE64(mos.data()), kMosMagicV6);
  }
  EXPECT_TRUE(s.b.pool->GetDataset("dst/copy")->props.count("receive_resume_token"));
  // A plain receive meanwhile is refused; -A discards the state.
  auto r = ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("partially-complete"), std::string::npos);
  ASSERT_TRUE(AbortReceive(*s.b.pool, "dst/copy").ok());
  EXPECT_FALSE(HasHidden(*s.b.pool));
  EXPECT_FALSE(AbortReceive(*s.b.pool, "dst/copy").ok());
  ASSERT_FALSE(ReceiveBuffer(*s.b.pool, cut, {.target = "dst/copy", .resumable = true}).ok());
  ASSERT_TRUE(s.b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(s.b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  s.b.pool = *again;
  auto token = ReceiveResumeToken(*s.b.pool, "dst/copy");
  ASSERT_TRUE(token.ok());
  auto rest = SendToBuffer(*s.a.pool, *SendOptionsFromToken(*token));
  ASSERT_TRUE(rest.ok());
  resume_until_done("dst/copy", *rest);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@2"), s.at2);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), s.at2);
  EXPECT_FALSE(HasHidden(*s.b.pool));
  ASSERT_TRUE(s.b.pool->Sync().ok());
  {
    std::lock_guard l(s.b.pool->impl()->sync_mu);
    std::vector<uint8_t> mos(s.b.pool->impl()->mos_bp.lsize);
    ASSERT_TRUE(s.b.pool->impl()->ReadBlock(s.b.pool->impl()->mos_bp, mos.data()).ok());
    // The resume state is gone (version 6 stays: the deferred frees, defer_map.h).
    auto decoded = DecodeMos(mos);
    ASSERT_TRUE(decoded.ok());
    for (const auto& d : decoded->datasets) EXPECT_FALSE(d.props.count("resume:toguid")) << d.name;
  }
  ExpectConsistent(*s.b.pool);
}

// What a crash in the middle of a plain receive leaves (a hidden dataset, no resume state)
// survives an import unseen and is destroyed by the next receive into that target.
TEST(SendTest, CrashLeftoverIsReplaced) {
  Scenario s;
  auto cut = s.full;
  cut.resize(cut.size() / 2);
  ASSERT_FALSE(ReceiveBuffer(*s.b.pool, cut, {.target = "dst/copy", .resumable = true}).ok());
  {
    // As if the receive had not been -s: the same hidden dataset without its resume state.
    std::lock_guard l(s.b.pool->impl()->mu);
    auto& v = s.b.pool->impl()->volumes.at("dst/copy%recv");
    auto props = v->phys().props;
    std::erase_if(props, [](const auto& kv) { return kv.first.rfind("resume:", 0) == 0; });
    v->SetProps(props);
    s.b.pool->impl()->mos_dirty = true;
  }
  ASSERT_TRUE(s.b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(s.b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  s.b.pool = *again;
  EXPECT_TRUE(HasHidden(*s.b.pool));
  EXPECT_FALSE(s.b.pool->GetDataset("dst/copy").ok());
  EXPECT_EQ(s.b.pool->ListDatasets().size(), 1u);  // the root only
  auto r = ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@1"), s.at1);
  EXPECT_FALSE(HasHidden(*s.b.pool));
  ExpectConsistent(*s.b.pool);
}

// send -c: a compressed volume's stream carries its blocks as stored, so it is smaller by
// about the compressratio; the receive stores them as they came (the target's compressratio
// is the source's even with compression off there), reads back identical, and a resumed
// -c stream stays compressed. Without -c the blocks travel decoded.
TEST(SendTest, CompressedStreamKeepsBlocksCompressed) {
  TestPool a = MakePool("src"), b = MakePool("dst");
  VolumeOptions vo;
  vo.volsize = 32 * kMiB;
  vo.volblocksize = 16384;
  vo.sparse = true;
  vo.props["compression"] = "lz4";
  ASSERT_TRUE(a.pool->CreateVolume("src/z", vo).ok());
  {
    auto d = *a.pool->OpenVolume("src/z");
    ASSERT_TRUE(d->Write(0, testing::Text(6 * kMiB, 1)).ok());
    ASSERT_TRUE(d->Write(8 * kMiB, testing::Random(kMiB, 2)).ok());
  }
  ASSERT_TRUE(a.pool->Snapshot({"src/z@1"}).ok());
  const auto at1 = ReadAll(*a.pool, "src/z@1");
  SendStats cstats;
  auto plain = SendToBuffer(*a.pool, {.snapshot = "src/z@1"});
  auto comp = SendToBuffer(*a.pool, {.snapshot = "src/z@1", .compressed = true}, &cstats);
  ASSERT_TRUE(plain.ok() && comp.ok());
  // The stream shrinks as the data did: plain/compressed ~ logicalused/used.
  const auto src = *a.pool->GetDataset("src/z@1");
  const double ratio = double(src.logical_referenced) / double(src.referenced);
  const double stream_ratio = double(plain->size()) / double(comp->size());
  EXPECT_GT(ratio, 1.5);
  EXPECT_NEAR(stream_ratio, ratio, ratio * 0.1) << plain->size() << " " << comp->size();
  EXPECT_EQ(cstats.comp_mask, 1u << static_cast<uint8_t>(Compression::kLz4));
  // Dry run: the exact size.
  auto dry = Send(*a.pool, {.snapshot = "src/z@1", .dry_run = true, .compressed = true},
                  [](std::span<const uint8_t>) { return Status::IoError("dry run wrote"); });
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->stream_bytes, comp->size());

  // Received as stored, even where compression is off.
  ASSERT_TRUE(ReceiveBuffer(*b.pool, *comp, {.target = "dst/z"}).ok());
  ASSERT_TRUE(
      ReceiveBuffer(*b.pool, *comp, {.target = "dst/off", .props = {{"compression", "off"}}}).ok());
  ASSERT_TRUE(
      ReceiveBuffer(*b.pool, *plain, {.target = "dst/plain", .props = {{"compression", "off"}}})
          .ok());
  for (const char* n : {"dst/z@1", "dst/off@1", "dst/plain@1"}) EXPECT_EQ(ReadAll(*b.pool, n), at1);
  const std::string want = src.props.at("refcompressratio");
  EXPECT_EQ(b.pool->GetDataset("dst/z")->props["compressratio"], want);
  EXPECT_EQ(b.pool->GetDataset("dst/off")->props["compressratio"], want);
  EXPECT_EQ(b.pool->GetDataset("dst/off")->referenced, src.referenced);
  EXPECT_EQ(b.pool->GetDataset("dst/plain")->props["compressratio"], "1.00x");
  // Without -c the blocks travel decoded and the target compresses them itself.
  ASSERT_TRUE(ReceiveBuffer(*b.pool, *plain, {.target = "dst/again"}).ok());
  EXPECT_EQ(b.pool->GetDataset("dst/again")->props["compressratio"], want);

  // An incremental -c after a switch to zstd names only zstd; resumed, it stays -c.
  ASSERT_TRUE(a.pool->SetProperty("src/z", "compression", "zstd").ok());
  {
    auto d = *a.pool->OpenVolume("src/z");
    ASSERT_TRUE(d->Write(16 * kMiB, testing::Text(2 * kMiB, 3)).ok());
  }
  ASSERT_TRUE(a.pool->Snapshot({"src/z@2"}).ok());
  SendStats istats;
  auto incr =
      SendToBuffer(*a.pool, {.snapshot = "src/z@2", .from = "@1", .compressed = true}, &istats);
  ASSERT_TRUE(incr.ok());
  EXPECT_EQ(istats.comp_mask, 1u << static_cast<uint8_t>(Compression::kZstd));
  auto cut = *incr;
  cut.resize(cut.size() / 2);
  ASSERT_FALSE(ReceiveBuffer(*b.pool, cut, {.target = "dst/z", .resumable = true}).ok());
  auto token = ReceiveResumeToken(*b.pool, "dst/z");
  ASSERT_TRUE(token.ok());
  auto o = SendOptionsFromToken(*token);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->compressed);
  auto rest = SendToBuffer(*a.pool, *o);
  ASSERT_TRUE(rest.ok());
  auto r = ReceiveBuffer(*b.pool, *rest, {.target = "dst/z", .resumable = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*b.pool, "dst/z@2"), ReadAll(*a.pool, "src/z@2"));
  EXPECT_EQ(b.pool->GetDataset("dst/z@2")->referenced, a.pool->GetDataset("src/z@2")->referenced);
  ExpectConsistent(*a.pool);
  ExpectConsistent(*b.pool);

  // Durable: the received compressed blocks read back after an import.
  ASSERT_TRUE(b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadAll(**again, "dst/off@1"), at1);
  EXPECT_EQ(ReadAll(**again, "dst/z"), ReadAll(*a.pool, "src/z@2"));
  ExpectConsistent(**again);
}

// A stream built by hand: one BEGIN (`compress` names) and one WRITE of `payload`.
std::vector<uint8_t> HandStream(const std::vector<std::string>& compress, Compression comp,
                                const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  StreamWriter w([&](std::span<const uint8_t> rec) {
    out.insert(out.end(), rec.begin(), rec.end());
    return Status::Ok();
  });
  StreamBegin b;
  b.features = kFeatureCompressed;
  b.toguid = 77;
  b.volsize = kMiB;
  b.volblocksize = 16384;
  b.toname = "x/v@1";
  b.compress = compress;
  EXPECT_TRUE(w.Begin(b).ok());
  EXPECT_TRUE(w.Write(0, 16384, payload, comp).ok());
  EXPECT_TRUE(w.End().ok());
  return out;
}

// A -c stream this volstack cannot decode is refused by the algorithm's name before
// anything is written; one whose payload does not decode (checksums intact) as a bad
// stream; a WRITE whose algorithm its BEGIN does not list, too.
TEST(SendTest, CompressedStreamRefusals) {
  TestPool b = MakePool("dst");
  std::vector<uint8_t> lz4(16384);
  const auto text = testing::Text(16384, 5);
  const uint32_t n = CompressBlock({Compression::kLz4, 0}, text, 512, lz4);
  ASSERT_GT(n, 0u);
  lz4.resize(n);
  auto ok =
      ReceiveBuffer(*b.pool, HandStream({"lz4"}, Compression::kLz4, lz4), {.target = "dst/ok"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const auto got = ReadAll(*b.pool, "dst/ok");
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 16384), text);

  auto r = ReceiveBuffer(*b.pool, HandStream({"lz4", "gzip-9"}, Compression::kLz4, lz4),
                         {.target = "dst/a"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EOPNOTSUPP);
  EXPECT_NE(r.status().message().find("'gzip-9'"), std::string::npos) << r.status().ToString();
  auto garbage = lz4;
  for (size_t i = 0; i < garbage.size(); i += 7) garbage[i] ^= 0x5a;
  r = ReceiveBuffer(*b.pool, HandStream({"lz4"}, Compression::kLz4, garbage), {.target = "dst/b"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not decode"), std::string::npos)
      << r.status().ToString();
  r = ReceiveBuffer(*b.pool, HandStream({}, Compression::kLz4, lz4), {.target = "dst/c"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not list"), std::string::npos) << r.status().ToString();
  for (const char* n : {"dst/a", "dst/b", "dst/c"}) EXPECT_FALSE(b.pool->GetDataset(n).ok());
  EXPECT_FALSE(HasHidden(*b.pool));
  ExpectConsistent(*b.pool);
}

// recv -s into a name no volume has: the partial state shows as that volume (its token),
// holds the name against zfs create, resumes, and -A discards it.
TEST(SendTest, PartialReceiveIntoNewName) {
  Scenario s;
  auto cut = s.full;
  cut.resize(cut.size() / 2);
  ASSERT_FALSE(ReceiveBuffer(*s.b.pool, cut, {.target = "dst/new", .resumable = true}).ok());
  EXPECT_FALSE(s.b.pool->GetDataset("dst/new").ok());  // not a volume yet
  auto partial = GetPartialReceive(*s.b.pool, "dst/new");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->type, "volume");
  EXPECT_EQ(partial->volsize, 64 * kMiB);
  EXPECT_EQ(partial->props["receive_resume_token"], *ReceiveResumeToken(*s.b.pool, "dst/new"));
  EXPECT_EQ(ListPartialReceives(*s.b.pool).size(), 1u);
  VolumeOptions vo;
  vo.volsize = 64 * kMiB;
  vo.sparse = true;
  auto created = s.b.pool->CreateVolume("dst/new", vo);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), EEXIST);
  auto rest =
      SendToBuffer(*s.a.pool, *SendOptionsFromToken(partial->props["receive_resume_token"]));
  ASSERT_TRUE(rest.ok());
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, *rest, {.target = "dst/new", .resumable = true}).ok());
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/new@1"), s.at1);
  EXPECT_TRUE(ListPartialReceives(*s.b.pool).empty());

  ASSERT_FALSE(ReceiveBuffer(*s.b.pool, cut, {.target = "dst/new2", .resumable = true}).ok());
  ASSERT_TRUE(GetPartialReceive(*s.b.pool, "dst/new2").ok());
  ASSERT_TRUE(AbortReceive(*s.b.pool, "dst/new2").ok());
  EXPECT_TRUE(ListPartialReceives(*s.b.pool).empty());
  EXPECT_FALSE(HasHidden(*s.b.pool));
  EXPECT_TRUE(s.b.pool->CreateVolume("dst/new2", vo).ok());
  ExpectConsistent(*s.b.pool);
}

// recv -F of a full stream into an existing volume: its snapshots go and its contents are
// replaced in one txg; refused, changing nothing, while a clone depends on it, it is open
// or it is a clone itself.
TEST(SendTest, ForcedFullReceiveReplacesTarget) {
  Scenario s;
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy"}).ok());
  {
    auto d = *s.b.pool->OpenVolume("dst/copy");
    ASSERT_TRUE(d->Write(0, Pattern(16384, 7)).ok());
  }
  ASSERT_TRUE(s.b.pool->Snapshot({"dst/copy@x"}).ok());
  // Another volume's full stream (other guids, other data).
  VolumeOptions vo;
  vo.volsize = 32 * kMiB;
  vo.volblocksize = 16384;
  vo.sparse = true;
  ASSERT_TRUE(s.a.pool->CreateVolume("src/other", vo).ok());
  {
    auto d = *s.a.pool->OpenVolume("src/other");
    ASSERT_TRUE(d->Write(3 * kMiB, Pattern(2 * kMiB, 11)).ok());
  }
  ASSERT_TRUE(s.a.pool->Snapshot({"src/other@9"}).ok());
  const auto other = ReadAll(*s.a.pool, "src/other@9");
  auto stream = *SendToBuffer(*s.a.pool, {.snapshot = "src/other@9"});

  ExpectRefusedUnchanged(s, stream, {.target = "dst/copy"}, "full, no -F");
  ASSERT_TRUE(s.b.pool->Clone("dst/copy@2", "dst/kid").ok());
  ExpectRefusedUnchanged(s, stream, {.target = "dst/copy", .force = true}, "-F, a clone of @2");
  auto r = ReceiveBuffer(*s.b.pool, stream, {.target = "dst/kid", .force = true});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a clone"), std::string::npos) << r.status().ToString();
  ASSERT_TRUE(s.b.pool->DestroyVolume("dst/kid").ok());
  {
    auto d = *s.b.pool->OpenVolume("dst/copy");
    r = ReceiveBuffer(*s.b.pool, stream, {.target = "dst/copy", .force = true});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EBUSY);
  }
  auto cut = stream;
  cut.resize(cut.size() / 2);
  ExpectRefusedUnchanged(s, cut, {.target = "dst/copy", .force = true}, "-F, cut");

  r = ReceiveBuffer(*s.b.pool, stream, {.target = "dst/copy", .force = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), other);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@9"), other);
  std::vector<std::string> snaps;
  for (const auto& d : s.b.pool->ListSnapshots("dst/copy")) snaps.push_back(d.name);
  EXPECT_EQ(snaps, std::vector<std::string>{"dst/copy@9"});
  auto info = *s.b.pool->GetDataset("dst/copy");
  EXPECT_EQ(info.volsize, 32 * kMiB);
  EXPECT_LT(info.referenced, 3 * kMiB);
  EXPECT_FALSE(HasHidden(*s.b.pool));
  ExpectConsistent(*s.b.pool);  // the old blocks freed once each: no leak, no double free
  ASSERT_TRUE(s.b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(s.b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadAll(**again, "dst/copy@9"), other);
  ExpectConsistent(**again);
}

// A volume of 8K blocks, `bytes` written at 1 MiB, snapshotted as `snap`; its full stream.
std::vector<uint8_t> SmallBlockStream(Pool& pool, const std::string& snap, uint64_t bytes,
                                      std::vector<uint8_t>* data) {
  const std::string vol = snap.substr(0, snap.find('@'));
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.volblocksize = 8192;
  vo.sparse = true;
  EXPECT_TRUE(pool.CreateVolume(vol, vo).ok());
  {
    auto d = *pool.OpenVolume(vol);
    EXPECT_TRUE(d->Write(1 * kMiB, Pattern(bytes, 21)).ok());
  }
  EXPECT_TRUE(pool.Snapshot({snap}).ok());
  *data = ReadAll(pool, snap);
  auto stream = SendToBuffer(pool, {.snapshot = snap});
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  return stream.ok() ? *stream : std::vector<uint8_t>{};
}

// recv -F of a full stream whose volblocksize is not the target's: the received volume
// takes the stream's (as zfs), its old snapshots go, in one txg; refusals change nothing;
// it takes incremental streams and writes afterwards, and survives an import.
TEST(SendTest, ForcedFullReceiveTakesTheStreamsVolblocksize) {
  Scenario s;
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.full, {.target = "dst/copy"}).ok());
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, s.incr, {.target = "dst/copy"}).ok());
  ASSERT_TRUE(s.b.pool->Snapshot({"dst/copy@x"}).ok());
  std::vector<uint8_t> small;
  const auto stream = SmallBlockStream(*s.a.pool, "src/small@9", 2 * kMiB, &small);

  ASSERT_TRUE(s.b.pool->Clone("dst/copy@2", "dst/kid").ok());
  ExpectRefusedUnchanged(s, stream, {.target = "dst/copy", .force = true}, "-F, a clone of @2");
  ASSERT_TRUE(s.b.pool->DestroyVolume("dst/kid").ok());
  auto cut = stream;
  cut.resize(cut.size() - 100);
  ExpectRefusedUnchanged(s, cut, {.target = "dst/copy", .force = true}, "-F, cut");
  EXPECT_EQ(s.b.pool->GetDataset("dst/copy")->volblocksize, 16384u);

  const uint64_t txg = s.b.pool->Info().txg;
  auto r = ReceiveBuffer(*s.b.pool, stream, {.target = "dst/copy", .force = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LE(s.b.pool->Info().txg, txg + 4);  // hidden volume, its data, then the one swap
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), small);
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@9"), small);
  std::vector<std::string> snaps;
  for (const auto& d : s.b.pool->ListSnapshots("dst/copy")) snaps.push_back(d.name);
  EXPECT_EQ(snaps, std::vector<std::string>{"dst/copy@9"});
  auto info = *s.b.pool->GetDataset("dst/copy");
  EXPECT_EQ(info.volblocksize, 8192u);
  EXPECT_EQ(info.volsize, 16 * kMiB);
  EXPECT_FALSE(HasHidden(*s.b.pool));
  ExpectConsistent(*s.b.pool);  // the old volume's blocks freed once each

  // It is a volume like any other: an incremental stream applies, writes go in 8K blocks.
  {
    auto d = *s.a.pool->OpenVolume("src/small");
    ASSERT_TRUE(d->Write(8192 * 3, Pattern(8192, 22)).ok());
  }
  ASSERT_TRUE(s.a.pool->Snapshot({"src/small@10"}).ok());
  auto incr = *SendToBuffer(*s.a.pool, {.snapshot = "src/small@10", .from = "@9"});
  ASSERT_TRUE(ReceiveBuffer(*s.b.pool, incr, {.target = "dst/copy"}).ok());
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy@10"), ReadAll(*s.a.pool, "src/small@10"));
  auto head = ReadAll(*s.a.pool, "src/small@10");
  {
    auto d = *s.b.pool->OpenVolume("dst/copy");
    ASSERT_TRUE(d->Write(4096, Pattern(4096, 23)).ok());
    const auto p = Pattern(4096, 23);
    std::copy(p.begin(), p.end(), head.begin() + 4096);
  }
  EXPECT_EQ(ReadAll(*s.b.pool, "dst/copy"), head);
  ASSERT_TRUE(s.b.pool->Close().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto again = Pool::Import(s.b.devs, io);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->GetDataset("dst/copy")->volblocksize, 8192u);
  EXPECT_EQ(ReadAll(**again, "dst/copy"), head);
  EXPECT_EQ(ReadAll(**again, "dst/copy@9"), small);
  ExpectConsistent(**again);
}

// Power is cut at every request of such a receive: after import the target is the old
// volume (16K blocks, its snapshots, its data) or the received one (8K, @9), never a mix,
// and the checker finds every block accounted for.
TEST(SendTest, ForcedReceiveAcrossVolblocksizesSurvivesPowerCuts) {
  TestPool a = MakePool("src");
  std::vector<uint8_t> small;
  const auto stream = SmallBlockStream(*a.pool, "src/small@9", 256 * 1024, &small);
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 1);
  PoolCreateOptions co;
  co.tuning = TestTuning();
  std::vector<uint8_t> old_head, old_snap;
  {
    auto p = *Pool::Create("dst", {fault}, co);
    VolumeOptions vo;
    vo.volsize = 4 * kMiB;
    vo.volblocksize = 16384;
    vo.sparse = true;
    ASSERT_TRUE(p->CreateVolume("dst/copy", vo).ok());
    {
      auto d = *p->OpenVolume("dst/copy");
      ASSERT_TRUE(d->Write(0, Pattern(512 * 1024, 24)).ok());
    }
    ASSERT_TRUE(p->Snapshot({"dst/copy@x"}).ok());
    {
      auto d = *p->OpenVolume("dst/copy");
      ASSERT_TRUE(d->Write(64 * 1024, Pattern(64 * 1024, 25)).ok());
    }
    old_head = ReadAll(*p, "dst/copy");
    old_snap = ReadAll(*p, "dst/copy@x");
    ASSERT_TRUE(p->Close().ok());
  }
  PoolImportOptions io;
  io.tuning = TestTuning();
  int done = 0, undone = 0;
  bool finished = false;
  for (uint64_t n = 0; !finished && n < 400; n++) {
    for (bdev::CrashMode mode : {bdev::CrashMode::kDropAll, bdev::CrashMode::kTear}) {
      SCOPED_TRACE("cut at request " + std::to_string(n) + ", " + bdev::CrashModeName(mode));
      auto fork = *fault->Fork(n * 4 + static_cast<uint64_t>(mode));
      {
        auto p = Pool::Import({fork}, io);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        fork->CutPowerAfter(n, mode);
        auto r = ReceiveBuffer(**p, stream, {.target = "dst/copy", .force = true});
        if (fork->powered()) {
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          finished = true;
          (*p)->Close().IgnoreError();
          break;
        }
      }
      auto survivor = fork->Reopen();
      ASSERT_TRUE(survivor.ok()) << survivor.status().ToString();
      auto p = Pool::Import({*survivor}, io);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      std::vector<std::string> snaps;
      for (const auto& d : (*p)->ListSnapshots("dst/copy")) snaps.push_back(d.name);
      auto info = (*p)->GetDataset("dst/copy");
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      if (info->volblocksize == 16384) {
        undone++;
        EXPECT_EQ(snaps, std::vector<std::string>{"dst/copy@x"});
        EXPECT_EQ(ReadAll(**p, "dst/copy"), old_head);
        EXPECT_EQ(ReadAll(**p, "dst/copy@x"), old_snap);
      } else {
        done++;
        EXPECT_EQ(info->volblocksize, 8192u);
        EXPECT_EQ(snaps, std::vector<std::string>{"dst/copy@9"});
        EXPECT_EQ(ReadAll(**p, "dst/copy"), small);
      }
      ExpectConsistent(**p);
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_GT(undone, 0);
  EXPECT_GT(done, 0);
}

TEST(SendTest, ParserFuzzSmoke) {
  Scenario s;
  EXPECT_EQ(FuzzSendStream(s.incr.data(), s.incr.size()), 0);
  std::mt19937_64 rng(3434);
  // A -c stream: a compressed WRITE whose payload is damaged past its checksum decodes to
  // an error, never out of bounds.
  std::vector<uint8_t> lz4(16384);
  const auto text = testing::Text(16384, 6);
  lz4.resize(CompressBlock({Compression::kLz4, 0}, text, 512, lz4));
  for (int i = 0; i < 200; i++) {
    auto bad = lz4;
    for (int k = 0; k < 1 + i % 8; k++) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    auto in = HandStream({"lz4"}, Compression::kLz4, bad);
    FuzzSendStream(in.data(), in.size());
  }
  for (int i = 0; i < 2000; i++) {
    std::vector<uint8_t> in = i % 2 ? s.incr : s.full;
    in.resize(std::min<size_t>(in.size(), 1 + rng() % 70000));
    for (int k = 0; k < 1 + i % 4; k++) in[rng() % in.size()] ^= static_cast<uint8_t>(rng());
    FuzzSendStream(in.data(), in.size());
  }
  for (int i = 0; i < 500; i++) {
    std::vector<uint8_t> in(rng() % 300);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    FuzzSendStream(in.data(), in.size());
  }
}

}  // namespace
}  // namespace volstack::pool
