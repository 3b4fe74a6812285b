// THE crash suite: a random workload of writes, discards, write-zeroes and flushes on pool
// volumes over FaultDevices; power is cut at a random request (mid-commit included) with a
// random mode (drop all / keep all / keep a random subset / tear); then the pool is
// imported from the surviving image and verified:
//   - it imports, every time;
//   - all volumes read back exactly the state after some prefix of the operations, the
//     same prefix for all volumes (txgs are atomic), no shorter than the last flush that
//     returned OK;
//   - CheckPool finds every tree and the space map consistent (no leak, no double
//     allocation) and every data checksum good;
//   - the pool keeps working: more writes, a flush, and the check again.
// CI runs kCiCrashPoints crash points across seeds; VOLSTACK_LONG=1 runs 20x more.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "bdev/fault_device.h"
#include "pool/checker.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"

namespace volstack::pool {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kCiCrashPoints = 1100;

struct Op {
  enum Kind { kWrite, kZero } kind;
  int vol;
  uint64_t offset;
  std::vector<uint8_t> data;  // kWrite
  uint64_t length;            // kZero
};

void Apply(const Op& op, std::vector<std::vector<uint8_t>>& images) {
  auto& img = images[op.vol];
  if (op.kind == Op::kWrite) {
    std::copy(op.data.begin(), op.data.end(), img.begin() + op.offset);
  } else {
    std::fill(img.begin() + op.offset, img.begin() + op.offset + op.length, 0);
  }
}

struct Outcome {
  std::string error;  // empty = verified
  uint64_t ops = 0;
};

Outcome RunCrashPoint(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Outcome out;
  auto fail = [&](std::string e) {
    out.error = "seed " + std::to_string(seed) + ": " + e;
    return out;
  };
  const int nvdevs = rng() % 4 == 0 ? 2 : 1;
  std::vector<std::shared_ptr<bdev::FaultDevice>> faults;
  std::vector<bdev::BlockDevicePtr> devs;
  for (int i = 0; i < nvdevs; i++) {
    faults.push_back(bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, seed * 7 + i));
    devs.push_back(faults.back());
  }
  PoolCreateOptions co;
  co.tuning.sync_thread = false;
  co.tuning.dirty_max_bytes = (1 + rng() % 4) * 128 * 1024;  // throttle commits too
  co.tuning.condense_blocks = 2 + rng() % 8;
  co.ashift = rng() % 3 == 0 ? 9 : 12;
  auto created = Pool::Create("trunk", devs, co);
  if (!created.ok()) return fail("create: " + created.status().ToString());
  auto pool = *created;
  const int nvols = 1 + static_cast<int>(rng() % 2);
  std::vector<bdev::BlockDevicePtr> vols;
  std::vector<std::vector<uint8_t>> images;
  for (int v = 0; v < nvols; v++) {
    VolumeOptions vo;
    vo.volsize = (1 + rng() % 3) * kMiB;
    vo.volblocksize = rng() % 2 ? 4096 : 16384;
    vo.sparse = rng() % 2;
    const std::string name = "trunk/v" + std::to_string(v);
    if (auto st = pool->CreateVolume(name, vo); !st.ok()) return fail(st.status().ToString());
    vols.push_back(*pool->OpenVolume(name));
    images.emplace_back(vo.volsize, 0);
  }
  // Arm the cut on vdev 0 at a random mutating request; the others are cut when it fires.
  const auto mode = static_cast<bdev::CrashMode>(rng() % 4);
  faults[0]->CutPowerAfter(rng() % 300, mode);

  std::vector<std::vector<uint8_t>> flushed = images;  // state at the last OK flush
  std::vector<Op> since;                               // ops after it, in order
  const int nops = 20 + static_cast<int>(rng() % 100);
  for (int i = 0; i < nops; i++) {
    const int v = static_cast<int>(rng() % nvols);
    const uint64_t size = images[v].size();
    const uint32_t r = rng() % 100;
    Status st;
    if (r < 12) {
      st = vols[v]->Flush();
      if (st.ok()) {
        for (const auto& op : since) Apply(op, flushed);
        since.clear();
      }
    } else {
      Op op;
      op.vol = v;
      op.offset = (rng() % (size / 512)) * 512;
      const uint64_t maxlen = std::min<uint64_t>(size - op.offset, 96 * 1024);
      const uint64_t len = std::max<uint64_t>(512, (rng() % (maxlen / 512 + 1)) * 512);
      if (r < 80) {
        op.kind = Op::kWrite;
        op.data.resize(len);
        for (size_t j = 0; j < len; j += 8) {
          const uint64_t w = rng();
          for (size_t k = 0; k < 8 && j + k < len; k++)
            op.data[j + k] = static_cast<uint8_t>(w >> (8 * k));
        }
        st = vols[v]->Write(op.offset, op.data);
      } else {
        op.kind = Op::kZero;
        op.length = len;
        st = r < 90 ? vols[v]->Discard(op.offset, len) : vols[v]->WriteZeroes(op.offset, len);
      }
      // A failed op may or may not have taken effect: it stays a candidate prefix.
      since.push_back(std::move(op));
      if (st.ok()) Apply(since.back(), images);
    }
    out.ops++;
    if (!st.ok()) break;
  }
  // Power off everything (if the armed cut did not fire, this is a crash after the run).
  for (auto& f : faults) {
    if (f->powered()) f->CutPower(mode).IgnoreError();
  }
  vols.clear();
  pool.reset();  // its close-time sync fails on the dead devices: nothing reaches the image

  std::vector<bdev::BlockDevicePtr> reopened;
  for (auto& f : faults) {
    auto r = f->Reopen();
    if (!r.ok()) return fail("reopen: " + r.status().ToString());
    reopened.push_back(*r);
  }
  std::shuffle(reopened.begin(), reopened.end(), rng);
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  auto imported = Pool::Import(reopened, io);
  if (!imported.ok()) return fail("import: " + imported.status().ToString());
  pool = *imported;
  std::vector<std::vector<uint8_t>> got;
  for (int v = 0; v < nvols; v++) {
    auto dev = pool->OpenVolume("trunk/v" + std::to_string(v));
    if (!dev.ok()) return fail("open after import: " + dev.status().ToString());
    got.emplace_back(images[v].size());
    if (auto st = (*dev)->Read(0, got.back()); !st.ok()) return fail("read: " + st.ToString());
  }
  // Find a prefix of `since` whose state equals what was read, tracking the number of
  // differing bytes incrementally (O(op length) per step, not O(volume)).
  std::vector<std::vector<uint8_t>> state = flushed;
  uint64_t diff = 0;
  for (int v = 0; v < nvols; v++) {
    for (size_t i = 0; i < got[v].size(); i++) diff += state[v][i] != got[v][i];
  }
  for (size_t k = 0; k < since.size() && diff != 0; k++) {
    const Op& op = since[k];
    auto& s = state[op.vol];
    const auto& g = got[op.vol];
    const uint64_t len = op.kind == Op::kWrite ? op.data.size() : op.length;
    for (uint64_t i = op.offset; i < op.offset + len; i++) {
      diff -= s[i] != g[i];
      s[i] = op.kind == Op::kWrite ? op.data[i - op.offset] : 0;
      diff += s[i] != g[i];
    }
  }
  if (diff != 0) {
    return fail("volumes match no state between the last flush and the crash (" +
                std::to_string(since.size()) + " ops since the flush)");
  }
  auto report = CheckPool(*pool, true);
  if (!report.ok()) return fail("check: " + report.status().ToString());
  if (!report->ok()) return fail("check: " + report->Summary());
  // The pool keeps working after the crash.
  auto dev = *pool->OpenVolume("trunk/v0");
  std::vector<uint8_t> d(8192, 0x5a);
  if (!dev->Write(0, d).ok() || !dev->Flush().ok()) return fail("write after import");
  report = CheckPool(*pool, false);
  if (!report.ok() || !report->ok()) return fail("check after more writes");
  return out;
}

TEST(CrashTest, RandomPowerCutsAlwaysImportToAFlushedOrNewerState) {
  const bool long_mode = std::getenv("VOLSTACK_LONG") != nullptr;
  int points = long_mode ? 20 * kCiCrashPoints : kCiCrashPoints;
  if (const char* n = std::getenv("VOLSTACK_CRASH_POINTS")) points = std::atoi(n);
  int failures = 0;
  uint64_t ops = 0;
  for (int i = 0; i < points; i++) {
    Outcome o = RunCrashPoint(1000 + static_cast<uint64_t>(i));
    ops += o.ops;
    if (!o.error.empty()) {
      ADD_FAILURE() << o.error;
      if (++failures >= 5) break;
    }
  }
  std::printf("crash points: %d, workload ops: %llu\n", points,
              static_cast<unsigned long long>(ops));
}

}  // namespace
}  // namespace volstack::pool
