// zfs promote (promote.cc) on memory devices: the snapshots up to the clone's origin move
// to the clone with their data, the old origin becomes a clone of it, other clones follow
// their origin's new name, the space moves and the checker agrees after each step; the old
// origin can then be destroyed; the result survives export/import; the promote is one txg
// (the txg before it imports as the pool was); bad input changes nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "pool/checker.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

constexpr uint64_t kVolSize = 4 * kMiB;

std::vector<uint8_t> ReadAll(Pool& pool, const std::string& name) {
  auto d = pool.OpenVolume(name);
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
  if (!d.ok()) return {};
  std::vector<uint8_t> out((*d)->size());
  EXPECT_TRUE((*d)->Read(0, out).ok());
  return out;
}

DatasetInfo Get(Pool& pool, const std::string& name) {
  auto d = pool.GetDataset(name);
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
  return d.ok() ? *d : DatasetInfo{};
}

std::vector<std::string> Names(Pool& pool) {
  std::vector<std::string> out;
  for (const auto& d : pool.ListDatasets()) out.push_back(d.name + " <" + d.origin + ">");
  for (const auto& d : pool.ListSnapshots()) out.push_back(d.name);
  return out;
}

void Write(Pool& pool, const std::string& vol, uint64_t off, uint64_t len, uint64_t seed,
           std::vector<uint8_t>* model) {
  auto d = pool.OpenVolume(vol);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const auto data = Pattern(len, seed);
  ASSERT_TRUE((*d)->Write(off, data).ok());
  std::memcpy(model->data() + off, data.data(), len);
}

// trunk/vol: @a, @s, @c; trunk/clone from @s with @x; trunk/other from @a. `models` holds
// every dataset's expected bytes by its name before the promote.
struct Lineage {
  std::vector<bdev::BlockDevicePtr> devs;
  std::shared_ptr<Pool> pool;
  std::map<std::string, std::vector<uint8_t>> models;
};

Lineage MakeLineage(bdev::BlockDevicePtr dev = bdev::MemoryDevice::Create(128 * kMiB)) {
  Lineage f;
  f.devs.push_back(std::move(dev));
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = Pool::Create("trunk", f.devs, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  f.pool = *p;
  VolumeOptions vo;
  vo.volsize = kVolSize;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  EXPECT_TRUE(f.pool->CreateVolume("trunk/vol", vo).ok());
  std::vector<uint8_t> vol(kVolSize, 0);
  Write(*f.pool, "trunk/vol", 0, kVolSize, 1, &vol);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@a"}).ok());
  f.models["trunk/vol@a"] = vol;
  Write(*f.pool, "trunk/vol", 0, kMiB, 2, &vol);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@s"}).ok());
  f.models["trunk/vol@s"] = vol;
  Write(*f.pool, "trunk/vol", kMiB, kMiB, 3, &vol);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@c"}).ok());
  f.models["trunk/vol@c"] = vol;
  Write(*f.pool, "trunk/vol", 2 * kMiB, kMiB, 4, &vol);
  f.models["trunk/vol"] = vol;
  EXPECT_TRUE(f.pool->Clone("trunk/vol@s", "trunk/clone").ok());
  auto clone = f.models["trunk/vol@s"];
  Write(*f.pool, "trunk/clone", 3 * kMiB, kMiB / 2, 5, &clone);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/clone@x"}).ok());
  f.models["trunk/clone@x"] = clone;
  Write(*f.pool, "trunk/clone", 0, kMiB / 2, 6, &clone);
  f.models["trunk/clone"] = clone;
  EXPECT_TRUE(f.pool->Clone("trunk/vol@a", "trunk/other").ok());
  f.models["trunk/other"] = f.models["trunk/vol@a"];
  EXPECT_TRUE(f.pool->Sync().ok());
  return f;
}

// Every dataset reads back its model, under the names promote gave them.
void ExpectData(Pool& pool, const std::map<std::string, std::vector<uint8_t>>& models,
                const std::map<std::string, std::string>& renamed = {}) {
  for (const auto& [name, model] : models) {
    auto r = renamed.find(name);
    const std::string now = r == renamed.end() ? name : r->second;
    EXPECT_TRUE(ReadAll(pool, now) == model) << now << " (was " << name << ")";
  }
}

const std::map<std::string, std::string> kRenamed = {{"trunk/vol@a", "trunk/clone@a"},
                                                     {"trunk/vol@s", "trunk/clone@s"}};

TEST(PromoteTest, SnapshotsMoveOriginsFlipAndSpaceFollows) {
  auto f = MakeLineage();
  Pool& pool = *f.pool;
  ExpectConsistent(pool);
  const DatasetInfo vol0 = Get(pool, "trunk/vol"), clone0 = Get(pool, "trunk/clone");
  const uint64_t allocated0 = pool.Info().allocated;
  const uint64_t txg0 = pool.Info().txg;

  ASSERT_TRUE(pool.Promote("trunk/clone").ok());
  EXPECT_EQ(pool.Info().txg, txg0 + 1);  // one txg
  EXPECT_FALSE(pool.GetDataset("trunk/vol@a").ok());
  EXPECT_FALSE(pool.GetDataset("trunk/vol@s").ok());
  EXPECT_TRUE(pool.GetDataset("trunk/vol@c").ok());  // younger than the origin: stays
  const DatasetInfo vol = Get(pool, "trunk/vol"), clone = Get(pool, "trunk/clone");
  EXPECT_EQ(vol.origin, "trunk/clone@s");
  EXPECT_EQ(clone.origin, "");
  EXPECT_EQ(Get(pool, "trunk/other").origin, "trunk/clone@a");
  EXPECT_EQ(Get(pool, "trunk/clone@s").clones, std::vector<std::string>{"trunk/vol"});
  EXPECT_EQ(Get(pool, "trunk/clone@a").clones, std::vector<std::string>{"trunk/other"});
  std::vector<std::string> snaps;
  for (const auto& d : pool.ListSnapshots("trunk/clone")) snaps.push_back(d.name);
  EXPECT_EQ(snaps, (std::vector<std::string>{"trunk/clone@a", "trunk/clone@s", "trunk/clone@x"}));
  ExpectData(pool, f.models, kRenamed);
  // Space moves with the snapshots: the pool holds the same blocks, the two volumes' `used`
  // add up to the same, and the moved snapshots' space is now the clone's.
  EXPECT_EQ(pool.Info().allocated, allocated0);
  EXPECT_EQ(vol.used + clone.used, vol0.used + clone0.used);
  EXPECT_LT(clone0.used, clone0.referenced);  // a clone's used leaves out its origin's
  EXPECT_EQ(clone.used, clone.referenced + clone.usedbysnapshots);
  EXPECT_LT(vol.used, vol.referenced);
  EXPECT_GT(clone.usedbysnapshots, clone0.usedbysnapshots);
  EXPECT_LT(vol.usedbysnapshots, vol0.usedbysnapshots);
  EXPECT_EQ(vol.usedbysnapshots, Get(pool, "trunk/vol@c").used);
  ExpectConsistent(pool);

  // The born-after rule still holds for both heads: overwriting frees nothing a snapshot
  // holds.
  auto models = f.models;
  Write(pool, "trunk/clone", 0, kVolSize, 7, &models["trunk/clone"]);
  Write(pool, "trunk/vol", 0, kVolSize, 8, &models["trunk/vol"]);
  ASSERT_TRUE(pool.Sync().ok());
  ExpectData(pool, models, kRenamed);
  ExpectConsistent(pool);
}

TEST(PromoteTest, OldOriginCanBeDestroyedAndTheRestSurvivesImport) {
  auto f = MakeLineage();
  ASSERT_TRUE(f.pool->Promote("trunk/clone").ok());
  // The old origin is an ordinary clone now: its snapshot, then itself.
  EXPECT_EQ(f.pool->DestroySnapshot("trunk/clone@s").code(), EEXIST);  // vol is its clone
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@c").ok());
  ExpectConsistent(*f.pool);
  const uint64_t allocated = f.pool->Info().allocated;
  const uint64_t own = Get(*f.pool, "trunk/vol").used;  // a clone's: born after its origin
  EXPECT_GE(own, kMiB);
  ASSERT_TRUE(f.pool->DestroyVolume("trunk/vol").ok());
  {
    // Frees come back kTxgDefer txgs later.
    std::lock_guard l(f.pool->impl()->sync_mu);
    for (int i = 0; i < 3; i++) ASSERT_TRUE(f.pool->impl()->SyncLocked(true).ok());
  }
  ExpectConsistent(*f.pool);
  // What it freed is what its `used` said, give or take the MOS and space-map blocks.
  EXPECT_NEAR(static_cast<double>(allocated - f.pool->Info().allocated), static_cast<double>(own),
              64 * 1024);
  // Nothing holds @s any more: destroyable, and what it frees is what it said.
  auto models = f.models;
  models.erase("trunk/vol");
  models.erase("trunk/vol@c");
  ExpectData(*f.pool, models, kRenamed);

  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto p = Pool::Import(f.devs, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ExpectData(**p, models, kRenamed);
  EXPECT_EQ(Get(**p, "trunk/other").origin, "trunk/clone@a");
  EXPECT_EQ(Get(**p, "trunk/clone").origin, "");
  ExpectConsistent(**p);
  uint64_t would = 0;
  ASSERT_TRUE((*p)->DestroySnapshot("trunk/clone@s", true, &would).ok());
  uint64_t freed = 0;
  ASSERT_TRUE((*p)->DestroySnapshot("trunk/clone@s", false, &freed).ok());
  EXPECT_EQ(freed, would);
  ExpectConsistent(**p);
  // And back to one lineage: the other clone and the rest go, nothing leaks.
  ASSERT_TRUE((*p)->DestroyVolume("trunk/other").ok());
  ASSERT_TRUE((*p)->DestroySnapshot("trunk/clone@a").ok());
  ASSERT_TRUE((*p)->DestroySnapshot("trunk/clone@x").ok());
  EXPECT_TRUE(ReadAll(**p, "trunk/clone") == f.models["trunk/clone"]);
  ExpectConsistent(**p);
}

TEST(PromoteTest, PromotingBackRestoresTheLineage) {
  auto f = MakeLineage();
  const auto before = Names(*f.pool);
  ASSERT_TRUE(f.pool->Promote("trunk/clone").ok());
  ExpectConsistent(*f.pool);
  // The old origin is a clone now: promoting it takes @a and @s back (not @x, younger).
  ASSERT_TRUE(f.pool->Promote("trunk/vol").ok());
  EXPECT_EQ(Names(*f.pool), before);
  ExpectData(*f.pool, f.models);
  ExpectConsistent(*f.pool);
}

TEST(PromoteTest, IsOneTxgTheTxgBeforeImportsAsThePoolWas) {
  auto f = MakeLineage();
  const auto before = Names(*f.pool);
  const uint64_t txg_before = f.pool->Info().txg;
  ASSERT_TRUE(f.pool->Promote("trunk/clone").ok());
  const auto after = Names(*f.pool);
  ASSERT_TRUE(f.pool->Close().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  {
    io.read_only = true;
    auto p = Pool::Import(f.devs, io);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(Names(**p), after);
    ExpectData(**p, f.models, kRenamed);
    ASSERT_TRUE((*p)->Close().ok());
  }
  // As if the pool crashed just before the promote's uberblock: the txg before it holds
  // the pool as it was, whole.
  io.read_only = false;
  io.max_txg = txg_before;
  io.rewind = true;
  auto p = Pool::Import(f.devs, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Names(**p), before);
  ExpectData(**p, f.models);
  ExpectConsistent(**p);
}

// Power is cut at every request of the promote's commit, with every way a cut can treat
// the unflushed writes: after import the promote happened entirely or not at all, every
// dataset reads back its data under its names, and the checker finds no leak.
TEST(PromoteTest, APowerCutLeavesItDoneOrNotDone) {
  auto fault = bdev::FaultDevice::CreateInMemory(128 * kMiB, 512, 1);
  auto f = MakeLineage(fault);
  const auto before = Names(*f.pool);
  ASSERT_TRUE(f.pool->Sync().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  std::vector<std::string> after;
  {
    auto fork = *fault->Fork(0);
    auto p = *Pool::Import({fork}, io);
    ASSERT_TRUE(p->Promote("trunk/clone").ok());
    after = Names(*p);
    ASSERT_TRUE(p->Close().ok());
  }
  ASSERT_NE(after, before);
  int done = 0, undone = 0;
  bool finished = false;
  for (uint64_t n = 0; !finished && n < 64; n++) {
    for (bdev::CrashMode mode : {bdev::CrashMode::kDropAll, bdev::CrashMode::kTear}) {
      SCOPED_TRACE("cut at request " + std::to_string(n) + ", " + bdev::CrashModeName(mode));
      auto fork = *fault->Fork(n * 4 + static_cast<uint64_t>(mode));
      {
        auto p = Pool::Import({fork}, io);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        fork->CutPowerAfter(n, mode);
        Status st = (*p)->Promote("trunk/clone");
        if (fork->powered()) {
          // The commit ended before the cut: nothing left to visit.
          ASSERT_TRUE(st.ok()) << st.ToString();
          finished = true;
          (*p)->Close().IgnoreError();
          break;
        }
      }
      auto survivor = fork->Reopen();
      ASSERT_TRUE(survivor.ok()) << survivor.status().ToString();
      auto p = Pool::Import({*survivor}, io);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      const auto names = Names(**p);
      if (names == before) {
        undone++;
        ExpectData(**p, f.models);
      } else {
        done++;
        ASSERT_EQ(names, after);
        ExpectData(**p, f.models, kRenamed);
      }
      ExpectConsistent(**p, /*verify_data=*/false);  // ExpectData read every block
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_GT(undone, 0);
  EXPECT_GT(done, 0);  // a cut after the uberblock's write, before the last flush
}

TEST(PromoteTest, BadInputChangesNothing) {
  auto f = MakeLineage();
  Pool& pool = *f.pool;
  const auto before = Names(pool);
  const uint64_t txg = pool.Info().txg;
  EXPECT_EQ(pool.Promote("trunk/vol").code(), EINVAL);  // not a clone
  EXPECT_EQ(pool.Promote("trunk/clone@x").code(), EINVAL);
  EXPECT_EQ(pool.Promote("trunk/nope").code(), ENOENT);
  EXPECT_EQ(pool.Promote("trunk/bad name").code(), EINVAL);
  // The clone has a snapshot named like one that would move.
  ASSERT_TRUE(pool.Snapshot({"trunk/clone@a"}).ok());
  const auto with_a = Names(pool);
  const uint64_t txg_a = pool.Info().txg;
  Status st = pool.Promote("trunk/clone");
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_NE(st.message().find("conflicting snapshot 'a' from parent 'trunk/vol'"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(Names(pool), with_a);
  EXPECT_EQ(pool.Info().txg, txg_a);
  ASSERT_TRUE(pool.DestroySnapshot("trunk/clone@a").ok());
  // A moving snapshot that is open.
  {
    auto open = pool.OpenVolume("trunk/vol@a");
    ASSERT_TRUE(open.ok());
    EXPECT_EQ(pool.Promote("trunk/clone").code(), EBUSY);
  }
  EXPECT_EQ(Names(pool), before);
  EXPECT_GT(pool.Info().txg, txg);
  ExpectConsistent(pool);
  EXPECT_TRUE(pool.Promote("trunk/clone").ok());
  ExpectConsistent(pool);
}

}  // namespace
}  // namespace volstack::pool
