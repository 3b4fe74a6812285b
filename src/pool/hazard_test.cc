// Races and damaged input that once lost data or the pool, each found by review and each
// test failing before its fix: a grow or a discard meeting a commit, a log chain used before
// it is durable, a device grown before its size is, scattered writes outrunning the space
// check, directory entries of the wrong shape, oversized properties.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "bdev/fault_device.h"
#include "bdev/file_device.h"
#include "bdev/forwarding_device.h"
#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"
#include "pool/zvol_device.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;

// Forwards to a FaultDevice; runs a one-shot hook before the first Write / WriteV / Flush
// once armed.
class HookDevice final : public bdev::ForwardingDevice {
 public:
  explicit HookDevice(bdev::BlockDevicePtr t) : ForwardingDevice(std::move(t)) {}
  std::function<void(uint64_t offset, uint64_t length)> on_write;
  std::function<void()> on_writev, on_flush;

 protected:
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override {
    if (auto f = std::exchange(on_write, nullptr)) f(offset, buf.size());
    return ForwardingDevice::DoWrite(offset, buf, opts);
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions opts) override {
    if (auto f = std::exchange(on_writev, nullptr)) f();
    return ForwardingDevice::DoWriteV(offset, pieces, opts);
  }
  Status DoFlush() override {
    if (auto f = std::exchange(on_flush, nullptr)) f();
    return ForwardingDevice::DoFlush();
  }
};

std::shared_ptr<Pool> ImportFrom(std::shared_ptr<bdev::FaultDevice>& fault) {
  fault = *fault->Reopen();
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  auto p = Pool::Import({fault}, io);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

std::shared_ptr<Pool> CreateTank(bdev::BlockDevicePtr dev) {
  PoolCreateOptions co;
  co.tuning.sync_thread = false;
  auto p = Pool::Create("tank", {std::move(dev)}, co);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

// tank/v in a pool on a HookDevice over an in-memory FaultDevice, with its log chain made:
// its first Flush committed the txg that creates it.
struct LoggedVolume {
  std::shared_ptr<bdev::FaultDevice> fault;
  std::shared_ptr<HookDevice> hook;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr vol;
};

LoggedVolume MakeLoggedVolume(uint64_t seed, uint64_t volsize = 8 * kMiB, uint32_t vbs = 4096) {
  LoggedVolume t;
  t.fault = bdev::FaultDevice::CreateInMemory(4 * volsize + 96 * kMiB, 512, seed);
  t.hook = std::make_shared<HookDevice>(t.fault);
  t.pool = CreateTank(t.hook);
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = vbs;
  EXPECT_TRUE(t.pool->CreateVolume("tank/v", vo).ok());
  t.vol = *t.pool->OpenVolume("tank/v");
  EXPECT_TRUE(t.vol->Write(0, Pattern(4096, 1)).ok());
  EXPECT_TRUE(t.vol->Flush().ok());
  return t;
}

// A grow (zfs set volsize) between the commit's SyncTree of a volume and its MOS record:
// the MOS once recorded the grown tree's levels with its root not yet written (a hole), and
// an import lost the volume's data. The MOS records the tree SyncTree wrote.
TEST(HazardTest, AGrowDuringACommitKeepsTheVolumeTree) {
  auto fault = bdev::FaultDevice::CreateInMemory(128 * kMiB, 512, 1);
  auto hook = std::make_shared<HookDevice>(fault);
  auto pool = CreateTank(hook);
  VolumeOptions vo;
  vo.volsize = 512 * 1024;  // 128 blocks of 4K: one level
  vo.volblocksize = 4096;
  vo.props["logbias"] = "throughput";
  ASSERT_TRUE(pool->CreateVolume("tank/a", vo).ok());
  ASSERT_TRUE(pool->CreateVolume("tank/b", vo).ok());
  const auto data = Pattern(64 * 1024, 7);
  {
    auto a = *pool->OpenVolume("tank/a");
    ASSERT_TRUE(a->Write(0, data).ok());
    ASSERT_TRUE(pool->Sync().ok());
  }
  auto b = *pool->OpenVolume("tank/b");
  ASSERT_TRUE(b->Write(0, Pattern(4096, 8)).ok());
  std::shared_ptr<Volume> va;
  {
    std::lock_guard l(pool->impl()->mu);
    va = pool->impl()->volumes.at("tank/a");
  }
  // While the commit writes b's data (a's SyncTree is done), another thread grows a,
  // as Pool::SetProperty("volsize") does before it syncs.
  hook->on_writev = [&] { ASSERT_TRUE(va->Grow(1 * kMiB).ok()); };
  ASSERT_TRUE(pool->Sync().ok());
  va.reset();
  b.reset();
  // Power is cut before the next txg (SetProperty's own Sync) is durable.
  ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
  pool.reset();
  auto p = ImportFrom(fault);
  ASSERT_TRUE(p);
  auto a = *p->OpenVolume("tank/a");
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(a->Read(0, back).ok());
  EXPECT_TRUE(back == data) << "volume a's data (committed two txgs ago) is gone";
}

// A log chain is created by a commit; a Flush during that commit once wrote log blocks
// hanging off a header not yet durable, and a power cut lost the acknowledged write. A
// Flush now waits for the chain's txg.
TEST(HazardTest, AFlushNeverUsesALogChainBeforeItIsDurable) {
  auto fault = bdev::FaultDevice::CreateInMemory(128 * kMiB, 512, 2);
  auto hook = std::make_shared<HookDevice>(fault);
  auto pool = CreateTank(hook);
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.volblocksize = 4096;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  auto vol = *pool->OpenVolume("tank/v");
  PoolImpl& impl = *pool->impl();
  // 1. A flush with no chain waits for sync_mu while another commit covers its write.
  ASSERT_TRUE(vol->Write(0, Pattern(4096, 1)).ok());
  {
    std::unique_lock running(impl.sync_mu);
    Status flushed;
    std::thread flusher([&] { flushed = vol->Flush(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(impl.SyncLocked().ok());
    running.unlock();
    flusher.join();
    ASSERT_TRUE(flushed.ok());
  }
  // 2. A write; the next txg (any commit: the timer's) creates the chain; during its
  // first flush (after the MOS write, before the uberblock) the volume is flushed.
  const auto w2 = Pattern(4096, 2);
  ASSERT_TRUE(vol->Write(8192, w2).ok());
  std::future<Status> flush2;
  hook->on_flush = [&] {
    flush2 = std::async(std::launch::async, [&] { return vol->Flush(); });
    // The flush must not be acknowledged while the txg that creates the chain is not
    // durable: it waits for that commit (or commits a txg of its own).
    EXPECT_EQ(flush2.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
    ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());  // power cut
  };
  EXPECT_FALSE(impl.Sync().ok());  // the power is gone
  ASSERT_TRUE(flush2.valid());
  const Status flushed2 = flush2.get();
  vol.reset();
  pool.reset();
  auto p = ImportFrom(fault);
  ASSERT_TRUE(p);
  auto v = *p->OpenVolume("tank/v");
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(v->Read(8192, back).ok());
  if (flushed2.ok()) {
    EXPECT_TRUE(back == w2) << "a write whose Flush() returned OK was lost";
  }
}

// A log block's write can take long (a host under write-back pressure throttles it). The
// txg that holds the block's records once freed the block while that write was still in
// flight, and two txgs later its space could hold another block's data, which the late log
// write then overwrote. A block is freed only once its write has returned.
TEST(HazardTest, ALogBlockIsNotFreedWhileItsWriteIsInFlight) {
  LoggedVolume t = MakeLoggedVolume(3);
  auto& [fault, hook, pool, vol] = t;
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.props["logbias"] = "throughput";
  ASSERT_TRUE(pool->CreateVolume("tank/other", vo).ok());
  auto other = *pool->OpenVolume("tank/other");
  PoolImpl& impl = *pool->impl();
  const auto logged = Pattern(4096, 2);
  ASSERT_TRUE(vol->Write(4096, logged).ok());
  std::promise<std::pair<uint64_t, uint64_t>> entered;
  std::promise<void> release;
  hook->on_write = [&](uint64_t offset, uint64_t length) {
    entered.set_value({offset, length});
    release.get_future().wait();
  };
  auto flushed = std::async(std::launch::async, [&] { return vol->Flush(); });
  const auto [log_offset, log_length] = entered.get_future().get();
  // Three commits: the first holds the log record's txg, the third releases that txg's
  // frees to the allocator.
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(other->Write(uint64_t(i) * 65536, Pattern(65536, 10 + i)).ok());
    ASSERT_TRUE(impl.Sync().ok());
  }
  {
    std::lock_guard l(impl.sync_mu);
    EXPECT_FALSE(impl.free[0].Overlaps(log_offset, log_length))
        << "the log block being written is free space";
  }
  release.set_value();
  ASSERT_TRUE(flushed.get().ok());
  for (int i = 0; i < 3; i++) ASSERT_TRUE(impl.Sync().ok());
  testing::ExpectConsistent(*pool);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(vol->Read(4096, back).ok());
  EXPECT_TRUE(back == logged);
}

// The log of `vol` in `pool`.
std::shared_ptr<Zil> LogOf(PoolImpl& impl, const std::string& name) {
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(impl.mu);
    vol = impl.volumes.at(name);
  }
  return impl.zil->Get(vol);
}

// A log write that failed after a txg had committed during it: that txg kept the header on
// the block being written, and the failed Flush was covered by it, so no txg followed. The
// next Flush then went to the log behind the hole, was acknowledged, and an import lost it
// (the chain ended at the hole). The log is used again only after a txg opened after the
// failure is durable.
TEST(HazardTest, AFailedLogWriteLeavesNoHoleBeforeTheNextFlush) {
  LoggedVolume t = MakeLoggedVolume(4);
  auto& [fault, hook, pool, vol] = t;
  PoolImpl& impl = *pool->impl();
  auto zil = LogOf(impl, "tank/v");
  ASSERT_TRUE(vol->Write(4096, Pattern(4096, 2)).ok());
  std::promise<void> entered, release;
  hook->on_write = [&](uint64_t, uint64_t) {
    entered.set_value();
    release.get_future().wait();
    fault->AddFailRule({.ops = bdev::OpBit(bdev::OpType::kWrite), .max_failures = 1});
  };
  auto flushed = std::async(std::launch::async, [&] { return vol->Flush(); });
  entered.get_future().wait();
  ASSERT_TRUE(impl.Sync().ok());  // a txg (the timer's) commits while the log write is slow
  release.set_value();
  ASSERT_TRUE(flushed.get().ok());  // the log write failed; the txg holds the write
  const auto acked = Pattern(4096, 3);
  ASSERT_TRUE(vol->Write(8192, acked).ok());
  ASSERT_TRUE(vol->Flush().ok());
  const uint64_t commits = zil->log_commits();
  ASSERT_TRUE(vol->Write(12288, acked).ok());
  ASSERT_TRUE(vol->Flush().ok());
  EXPECT_EQ(zil->log_commits(), commits + 1) << "the log is not used again";
  ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
  vol.reset();
  zil.reset();
  pool.reset();
  auto p = ImportFrom(fault);
  ASSERT_TRUE(p);
  auto v = *p->OpenVolume("tank/v");
  std::vector<uint8_t> back(8192);
  ASSERT_TRUE(v->Read(8192, back).ok());
  EXPECT_TRUE(std::equal(acked.begin(), acked.end(), back.begin()) &&
              std::equal(acked.begin(), acked.end(), back.begin() + 4096))
      << "a write whose Flush() returned OK was lost";
}

// A Flush beside a writer of the same volume whose writes the log does not take (more than
// it holds): each txg the Flush committed found a newer unlogged write, and after four the
// Flush failed with EIO although everything it covers was durable. It now waits only for
// changes made before it.
TEST(HazardTest, AFlushBesideUnloggedWritesSucceeds) {
  LoggedVolume t = MakeLoggedVolume(6, 64 * kMiB, 16384);
  auto& [fault, hook, pool, vol] = t;
  const auto stream = Pattern(5 * kMiB, 2);  // more than the log takes: unlogged
  int txgs = 0;
  std::function<void()> during_txg = [&] {
    // Another thread's streaming write lands in the next open txg while this one commits.
    if (++txgs < 10) {
      auto w = std::async(std::launch::async,
                          [&] { return vol->Write(8 * kMiB + (txgs % 8) * 5 * kMiB, stream); });
      EXPECT_TRUE(w.get().ok());
      hook->on_flush = during_txg;
    }
  };
  ASSERT_TRUE(vol->Write(8 * kMiB, stream).ok());
  ASSERT_TRUE(vol->Write(0, Pattern(4096, 3)).ok());
  hook->on_flush = during_txg;
  const Status st = vol->Flush();
  hook->on_flush = nullptr;
  EXPECT_TRUE(st.ok()) << st.ToString() << " after " << txgs << " txgs";
}

// A log block that cannot be read (EIO) once ended the chain like an invalid block: the
// import succeeded without the flushed writes after it, and its replay commit freed the
// chain, so they were gone for good. Import now refuses, having changed nothing, and a
// retry that reads the block replays them.
TEST(HazardTest, AnUnreadableLogBlockStopsTheImport) {
  LoggedVolume t = MakeLoggedVolume(7);
  auto& [fault, hook, pool, vol] = t;
  const auto acked = Pattern(4096, 2);
  ASSERT_TRUE(vol->Write(4096, acked).ok());
  uint64_t log_offset = 0;
  hook->on_write = [&](uint64_t offset, uint64_t) { log_offset = offset; };
  ASSERT_TRUE(vol->Flush().ok());  // in the log
  ASSERT_NE(log_offset, 0u);
  ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
  vol.reset();
  pool.reset();
  fault = *fault->Reopen();
  bdev::FaultRule unreadable;
  unreadable.ops = bdev::OpBit(bdev::OpType::kRead);
  unreadable.offset = log_offset;
  unreadable.length = 512;
  const int rule = fault->AddFailRule(unreadable);
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  auto refused = Pool::Import({fault}, io);
  ASSERT_FALSE(refused.ok()) << "imported without a log block it could not read";
  EXPECT_NE(refused.status().message().find("intent log"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(fault->counters().ops[static_cast<size_t>(bdev::OpType::kWrite)], 0u);
  fault->RemoveFailRule(rule);
  auto p = Pool::Import({fault}, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE((*(*p)->OpenVolume("tank/v"))->Read(4096, back).ok());
  EXPECT_TRUE(back == acked) << "a write whose Flush() returned OK was lost";
}

// Export checked that no device was open, then closed the pool: a device opened in between
// could commit a txg after the last one, beside the exported labels. Opening now fails
// from the check on.
TEST(HazardTest, NoVolumeOpensWhileThePoolExports) {
  auto hook = std::make_shared<HookDevice>(bdev::MemoryDevice::Create(64 * kMiB));
  auto pool = CreateTank(hook);
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  {
    auto vol = *pool->OpenVolume("tank/v");
    ASSERT_TRUE(vol->Write(0, Pattern(4096, 1)).ok());  // so the export's last txg commits
  }
  std::optional<Result<bdev::BlockDevicePtr>> opened;
  hook->on_flush = [&] { opened = pool->OpenVolume("tank/v"); };  // the export's last txg
  ASSERT_TRUE(pool->Export().ok());
  ASSERT_TRUE(opened.has_value());
  EXPECT_FALSE(opened->ok()) << "a volume opened while its pool was exported";
}

// A discard skips the tree's holes; it once clamped a hole to the dirty maps after the
// tree lookup, so a block moving from the syncing map into the tree in between was skipped
// and kept its data.
TEST(HazardTest, ADiscardRacingACommitLeavesNoDataBehind) {
  auto pool = CreateTank(bdev::MemoryDevice::Create(128 * kMiB));
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;  // 2048 blocks: two levels
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  auto dev = *pool->OpenVolume("tank/v");
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(pool->impl()->mu);
    vol = pool->impl()->volumes.at("tank/v");
  }
  ASSERT_TRUE(dev->Write(0, Pattern(4096, 1)).ok());  // L1 #0 exists, L1 #1 is a hole
  ASSERT_TRUE(pool->Sync().ok());
  const auto data = Pattern(4096, 5);
  const uint64_t c = 200 * 4096;  // inside L1 #1
  std::vector<uint8_t> back(4096), zero(4096, 0);
  // It failed within 2 to 7,000 iterations (under a second) before the fix.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int iters = 0;
  for (; std::chrono::steady_clock::now() < deadline; iters++) {
    ASSERT_TRUE(dev->Write(c, data).ok());
    vol->EvictClean();
    std::atomic<bool> go{false};
    std::thread syncer([&] {
      while (!go) {
      }
      ASSERT_TRUE(pool->Sync().ok());
    });
    go = true;
    std::atomic<int> spin{0};
    while (spin.load() < iters % 2000) spin.fetch_add(1);
    ASSERT_TRUE(dev->Discard(128 * 4096, 128 * 4096).ok());  // after the write returned
    syncer.join();
    ASSERT_TRUE(dev->Read(c, back).ok());
    if (back != zero) break;
    ASSERT_TRUE(pool->Sync().ok());
  }
  EXPECT_TRUE(back == zero) << "a discard that returned OK left the block's data in place";
}

// Scattered 4 KiB writes dirty a 16 KiB L1 block each; counted as 1/32 of the data, they
// were all admitted and the commit ran out of space, suspending the pool with all the dirty
// data. The space check counts dirty L1 blocks.
TEST(HazardTest, ScatteredSmallWritesAreRefusedBeforeTheCommitRunsOutOfSpace) {
  PoolCreateOptions co;
  co.tuning.sync_thread = false;
  co.tuning.dirty_max_bytes = uint64_t{1} << 30;
  auto pool = *Pool::Create("tank", {bdev::MemoryDevice::Create(64 * kMiB)}, co);
  VolumeOptions vo;
  vo.volsize = uint64_t{4} << 30;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  auto dev = *pool->OpenVolume("tank/v");
  int written = 0;
  for (int i = 0; i < 3500; i++) {
    Status st = dev->Write(uint64_t(i) * 512 * 1024, Pattern(4096, i));
    if (!st.ok()) {
      break;
    }
    written++;
  }
  EXPECT_LT(written, 3500) << "every write was admitted";
  Status st = pool->Sync();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(pool->Info().health, "ONLINE");
}

// Writes `mos` as txg synced+1 into free space of vdev 0, with an uberblock naming it (a
// crafted or buggy image: every checksum is right).
void WriteCraftedMos(PoolImpl& impl, MosPhys mos) {
  mos.txg = impl.synced_txg + 1;
  mos.space_map = impl.sm_bps;
  auto data = EncodeMos(mos);
  data.resize(impl.asize(data.size()), 0);
  auto off = impl.free[0].FindFit(data.size(), kAllocStart, uint64_t{1} << impl.ashift);
  ASSERT_TRUE(off.has_value());
  BlockPtr bp;
  bp.dva[0].vdev = 0;
  bp.dva[0].asize_sectors = static_cast<uint32_t>(data.size() >> 9);
  bp.dva[0].offset = *off;
  bp.lsize = bp.psize = static_cast<uint32_t>(data.size());
  bp.cksum = ChecksumType::kXxh3_128;
  bp.type = BlockType::kMos;
  bp.fill = 1;
  bp.birth = mos.txg;
  bp.checksum = ComputeChecksum(bp.cksum, data);
  ASSERT_TRUE(impl.vdevs[0]->device()->Write(*off, data).ok());
  Uberblock ub;
  ub.txg = mos.txg;
  ub.guid_sum = impl.guid_sum;
  ub.pool_guid = impl.pool_guid;
  ub.vdev_count = 1;
  ub.rootbp = bp;
  ASSERT_TRUE(impl.vdevs[0]->WriteUberblock(ub).ok());
  ASSERT_TRUE(impl.vdevs[0]->device()->Flush().ok());
}

MosPhys CurrentMos(PoolImpl& impl) {
  MosPhys mos;
  mos.props = impl.props;
  mos.next_id = impl.next_id;
  for (auto& [n, v] : impl.volumes) mos.datasets.push_back(v->phys());
  return mos;
}

// A directory entry whose tree levels do not fit its volsize (crafted: every checksum
// right) read other blocks' bytes and aborted on write. Import refuses that txg, and falls
// back to the one before only when told to rewind.
TEST(HazardTest, ATreeOfTheWrongShapeIsRefusedAtImport) {
  auto mem = bdev::MemoryDevice::Create(128 * kMiB);
  auto pool = CreateTank(mem);
  VolumeOptions vo;
  vo.volsize = 512 * 1024;
  vo.volblocksize = 4096;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  const auto p0 = Pattern(4096, 3);
  {
    auto v = *pool->OpenVolume("tank/v");
    ASSERT_TRUE(v->Write(0, p0).ok());
  }
  ASSERT_TRUE(pool->Export().ok());
  MosPhys mos = CurrentMos(*pool->impl());
  mos.datasets[0].volsize = 8 * kMiB;  // levels stays 1
  WriteCraftedMos(*pool->impl(), mos);
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  // The crafted txg is refused, and so is falling back past it without a rewind.
  EXPECT_TRUE(Pool::Import({mem}, io).status().IsCorruption());
  io.rewind = true;
  auto q = Pool::Import({mem}, io);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->GetDataset("tank/v")->volsize, vo.volsize) << "the bad entry was imported";
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE((*(*q)->OpenVolume("tank/v"))->Read(0, back).ok());
  EXPECT_TRUE(back == p0);
}

// A refreservation that is not a number (crafted: every checksum right) threw out of the
// import and ended the process. Import refuses that txg (falling back only with a rewind);
// a damaged memory bound in the same MOS is never reached.
TEST(HazardTest, AReservationThatIsNotANumberIsRefusedAtImport) {
  auto mem = bdev::MemoryDevice::Create(128 * kMiB);
  auto pool = CreateTank(mem);
  VolumeOptions vo;
  vo.volsize = 1 * kMiB;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  const uint64_t reserved = pool->GetDataset("tank/v")->refreservation;
  ASSERT_GT(reserved, 0u);
  ASSERT_TRUE(pool->Export().ok());
  MosPhys mos = CurrentMos(*pool->impl());
  mos.datasets[0].props["refreservation"] = "lots";
  mos.props["cachemax"] = "99999999999999999999999";
  WriteCraftedMos(*pool->impl(), mos);
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  EXPECT_TRUE(Pool::Import({mem}, io).status().IsCorruption());
  io.rewind = true;
  auto q = Pool::Import({mem}, io);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->GetDataset("tank/v")->refreservation, reserved);
  EXPECT_EQ((*q)->import_report().imported_txg, pool->impl()->synced_txg);
}

// A memory bound that is not a number (crafted) is no reason to refuse a pool: the
// importer's own bound stands.
TEST(HazardTest, AMemoryBoundThatIsNotANumberLeavesTheImportersOwn) {
  auto mem = bdev::MemoryDevice::Create(128 * kMiB);
  auto pool = CreateTank(mem);
  ASSERT_TRUE(pool->Export().ok());
  MosPhys mos = CurrentMos(*pool->impl());
  mos.props["cachemax"] = "-1";
  mos.props["dirtymax"] = "99999999999999999999999";
  WriteCraftedMos(*pool->impl(), mos);
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  io.tuning.cache_max_bytes = 48 * kMiB;
  auto q = Pool::Import({mem}, io);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->impl()->synced_txg, pool->impl()->synced_txg + 1);
  EXPECT_EQ((*q)->impl()->tuning.cache_max_bytes, 48 * kMiB);
  EXPECT_EQ((*q)->impl()->tuning.dirty_max_bytes, io.tuning.dirty_max_bytes);
}

// Two directory entries of one name, the first with a log header, aborted the import in
// the log replay. Import refuses that txg (falling back only with a rewind).
TEST(HazardTest, ADatasetListedTwiceIsRefusedAtImport) {
  auto mem = bdev::MemoryDevice::Create(128 * kMiB);
  auto pool = CreateTank(mem);
  VolumeOptions vo;
  vo.volsize = 1 * kMiB;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  ASSERT_TRUE(pool->Export().ok());
  MosPhys mos = CurrentMos(*pool->impl());
  DatasetPhys twin = mos.datasets[0];
  twin.id = 77;
  mos.datasets[0].zil.guid = 1234;
  mos.datasets[0].zil.seq = 1;
  mos.datasets[0].zil.head.vdev = 0;
  mos.datasets[0].zil.head.asize_sectors = 8;
  mos.datasets[0].zil.head.offset = 32 * kMiB;
  mos.datasets.push_back(twin);
  WriteCraftedMos(*pool->impl(), mos);
  EXPECT_EXIT(
      {
        PoolImportOptions io;
        io.tuning.sync_thread = false;
        // The crafted txg is refused; with a rewind import falls back to the txg before.
        if (!Pool::Import({mem}, io).status().IsCorruption()) std::_Exit(2);
        io.rewind = true;
        auto q = Pool::Import({mem}, io);
        std::_Exit(q.ok() && (*q)->ListDatasets().size() == 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << "a dataset listed twice was imported, or its import aborted the process";
}

// A device that grew before its new size was durable took a logged write past the old end;
// after a power cut the log did not replay onto the old size and the pool did not import.
TEST(HazardTest, ADeviceGrowsOnlyOnceItsNewSizeIsDurable) {
  auto fault = bdev::FaultDevice::CreateInMemory(128 * kMiB, 512, 3);
  auto pool = CreateTank(fault);
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  vo.volblocksize = 4096;
  vo.sparse = true;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  auto vol = *pool->OpenVolume("tank/v");
  ASSERT_TRUE(vol->Write(0, Pattern(4096, 1)).ok());
  ASSERT_TRUE(vol->Flush().ok());  // creates the log chain (a txg)
  ASSERT_TRUE(vol->Write(4096, Pattern(4096, 2)).ok());
  ASSERT_TRUE(vol->Flush().ok());  // through the log
  PoolImpl& impl = *pool->impl();
  Status set;
  {
    std::unique_lock running(impl.sync_mu);  // a commit in flight (the timer's)
    std::thread setter([&] { set = pool->SetProperty("tank/v", "volsize", "8M"); });
    // Until the new size is durable the device keeps the old one: no write can land past
    // the old end, in the log or anywhere.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(vol->size(), 4 * kMiB) << "the device grew before its txg was durable";
    EXPECT_FALSE(vol->Write(6 * kMiB, Pattern(4096, 3)).ok());
    running.unlock();
    setter.join();
  }
  ASSERT_TRUE(set.ok()) << set.ToString();
  EXPECT_EQ(vol->size(), 8 * kMiB);
  ASSERT_TRUE(vol->Write(6 * kMiB, Pattern(4096, 3)).ok());
  ASSERT_TRUE(vol->Flush().ok());
  ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
  vol.reset();
  pool.reset();
  auto p = ImportFrom(fault);
  ASSERT_TRUE(p);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE((*p->OpenVolume("tank/v"))->Read(6 * kMiB, back).ok());
  EXPECT_TRUE(back == Pattern(4096, 3)) << "a flushed write past the old end was lost";
}

// A device opened across the destroy of its volume once asked that volume's (gone) log for
// a chain, and every idle sync after committed a txg.
TEST(HazardTest, ADeviceOfADestroyedVolumeLeavesIdleSyncsIdle) {
  auto pool = CreateTank(bdev::MemoryDevice::Create(128 * kMiB));
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(pool->impl()->mu);
    vol = pool->impl()->volumes.at("tank/v");  // OpenVolume, step 1
  }
  ASSERT_TRUE(pool->DestroyVolume("tank/v").ok());
  auto dev = std::make_shared<ZvolDevice>(pool, vol, false, 512);  // OpenVolume, step 2
  EXPECT_FALSE(dev->Write(0, Pattern(4096, 1)).ok());
  (void)dev->Flush();
  const uint64_t txg = pool->impl()->synced_txg;
  for (int i = 0; i < 5; i++) ASSERT_TRUE(pool->Sync().ok());
  EXPECT_EQ(pool->impl()->synced_txg.load(), txg) << "idle syncs keep committing txgs";
}

// A refreservation larger than the pool left no volume able to write.
TEST(HazardTest, ARefreservationMustFitTheSpaceAvailable) {
  auto pool = CreateTank(bdev::MemoryDevice::Create(128 * kMiB));
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE(pool->CreateVolume("tank/a", vo).ok());
  ASSERT_TRUE(pool->CreateVolume("tank/b", vo).ok());
  Status st = pool->SetProperty("tank/a", "refreservation", "100G");
  EXPECT_FALSE(st.ok()) << "a 100G reservation on a 128M pool was accepted";
  auto b = *pool->OpenVolume("tank/b");
  Status w = b->Write(0, Pattern(4096, 1));
  EXPECT_TRUE(w.ok()) << w.ToString();
}

// A sparse volume of 2^62 bytes: a hole span of 2^56 blocks times the block size overflowed
// in Zero (and QueryAllocation), and a 1 MiB discard never returned.
TEST(HazardTest, ADiscardOnAHugeSparseVolumeReturns) {
  auto pool = CreateTank(bdev::MemoryDevice::Create(128 * kMiB));
  VolumeOptions vo;
  vo.volsize = uint64_t{1} << 62;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  auto created = pool->CreateVolume("tank/huge", vo);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto dev = *pool->OpenVolume("tank/huge");
  EXPECT_EXIT(
      {
        alarm(10);
        Status st = dev->Discard(0, kMiB);
        std::fprintf(stderr, "discard: %s\n", st.ToString().c_str());
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "")
      << "Discard(0, 1 MiB) did not return within 10 s";
}

// A comment larger than a MOS block made the commit fail and suspended the pool, with
// every volume's dirty data. Comments are limited as zpool limits them.
TEST(HazardTest, AnOversizedPoolPropertyIsRefused) {
  auto pool = CreateTank(bdev::MemoryDevice::Create(128 * kMiB));
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  auto v = *pool->OpenVolume("tank/v");
  ASSERT_TRUE(v->Write(0, Pattern(4096, 1)).ok());  // dirty, not yet committed
  EXPECT_FALSE(pool->SetPoolProperty("comment", std::string(17 * kMiB, 'x')).ok());
  EXPECT_EQ(pool->Info().health, "ONLINE");
  EXPECT_TRUE(v->Flush().ok());
}
// Destroying a volume whose tree holds a damaged indirect block once failed the commit,
// and every commit after (the destroy stayed pending): the pool was suspended for good.
// The unreadable subtree's space leaks instead.
TEST(HazardTest, DestroyingAVolumeWithADamagedIndirectBlockKeepsThePool) {
  auto mem = bdev::MemoryDevice::Create(128 * kMiB);
  auto pool = CreateTank(mem);
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.volblocksize = 4096;  // 2048 blocks: two levels
  ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
  {
    auto v = *pool->OpenVolume("tank/v");
    ASSERT_TRUE(v->Write(0, Pattern(2 * kMiB, 1)).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(pool->impl()->mu);
    vol = pool->impl()->volumes.at("tank/v");
  }
  BlockPtr l1;
  ASSERT_TRUE(vol->Walk([&](const BlockPtr& bp) {
                   if (bp.level == 1 && l1.IsHole()) l1 = bp;
                   return Status::Ok();
                 })
                  .ok());
  ASSERT_FALSE(l1.IsHole());
  vol->EvictClean();
  vol.reset();
  ASSERT_TRUE(mem->Write(l1.dva[0].offset, std::vector<uint8_t>(4096, 0xEE)).ok());
  ASSERT_TRUE(pool->DestroyVolume("tank/v").ok());
  EXPECT_EQ(pool->Info().health, "ONLINE");
  EXPECT_TRUE(pool->Sync().ok());
  VolumeOptions again;
  again.volsize = 4 * kMiB;
  EXPECT_TRUE(pool->CreateVolume("tank/w", again).ok());
}

// A vdev file cut shorter after export (a truncate by mistake): import once aborted on the
// space map's extents past the new end. It refuses the pool, and writes nothing.
TEST(HazardTest, AVdevCutShorterIsRefusedAtImport) {
  char path[] = "/tmp/volstack_hazard_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    auto dev = bdev::FileDevice::Create(path, 128 * kMiB);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    PoolCreateOptions co;
    co.tuning.sync_thread = false;
    auto pool = *Pool::Create("tank", {*dev}, co);
    VolumeOptions vo;
    vo.volsize = 96 * kMiB;
    ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
    auto v = *pool->OpenVolume("tank/v");
    for (uint64_t off = 0; off < vo.volsize; off += kMiB) {
      ASSERT_TRUE(v->Write(off, Pattern(kMiB, off)).ok());
    }
    v.reset();
    ASSERT_TRUE(pool->Export().ok());
  }
  ASSERT_EQ(::truncate(path, 70 * kMiB), 0);
  std::vector<uint8_t> before(70 * kMiB), after(70 * kMiB);
  {
    auto dev = *bdev::FileDevice::Open(path, {});
    ASSERT_TRUE(dev->Read(0, before).ok());
    PoolImportOptions io;
    io.tuning.sync_thread = false;
    auto p = Pool::Import({dev}, io);
    EXPECT_FALSE(p.ok()) << "a pool that lost blocks imported";
    ASSERT_TRUE(dev->Read(0, after).ok());
  }
  ::unlink(path);
  EXPECT_TRUE(before == after) << "the refused import wrote to the vdev";
}

}  // namespace
}  // namespace volstack::pool
