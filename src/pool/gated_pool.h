// What the pool's tests of writes in flight share: GateDevice, a vdev that can hold a
// commit or an early write in the middle of its data writes, and a small pool on one.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "bdev/forwarding_device.h"
#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"

namespace volstack::pool::testing {

// A test vdev over any device. It counts the bytes written and the flushes that reach it,
// can fail its next flush, can hold its next flush (after counting it) until
// ReleaseFlush(), and with Hold(true) keeps every vectored write waiting (after counting)
// until Hold(false).
class GateDevice final : public bdev::ForwardingDevice {
 public:
  explicit GateDevice(bdev::BlockDevicePtr t) : ForwardingDevice(std::move(t)) {}
  std::atomic<uint64_t> written{0};
  std::atomic<int> flushes{0};
  std::atomic<bool> fail_next_flush{false};
  std::atomic<bool> waiting{false};  // a vectored write is held
  std::atomic<bool> hold_next_flush{false};
  std::atomic<bool> flush_held{false};
  void Hold(bool on) {
    {
      std::lock_guard l(mu_);
      hold_ = on;
    }
    cv_.notify_all();
  }
  void ReleaseFlush() {
    {
      std::lock_guard l(mu_);
      flush_released_ = true;
    }
    cv_.notify_all();
  }

 protected:
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override {
    written += buf.size();
    return ForwardingDevice::DoWrite(offset, buf, opts);
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions opts) override {
    written += bdev::TotalLength(pieces);
    std::unique_lock l(mu_);
    waiting = hold_;
    cv_.wait(l, [&] { return !hold_; });
    waiting = false;
    l.unlock();
    return ForwardingDevice::DoWriteV(offset, pieces, opts);
  }
  Status DoFlush() override {
    flushes++;
    const bool fail = fail_next_flush.exchange(false);
    if (hold_next_flush.exchange(false)) {
      std::unique_lock l(mu_);
      flush_held = true;
      cv_.wait(l, [&] { return flush_released_; });
      flush_held = false;
    }
    if (fail) return Status::IoError("injected flush failure");
    return ForwardingDevice::DoFlush();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  bool flush_released_ = false;
};

// A pool on a GateDevice over 128 MiB of memory, with one 16 MiB sparse volume trunk/v
// (volblocksize 16K) and no intent log: a flush commits a txg.
struct GatedPool {
  std::shared_ptr<GateDevice> gate;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr vol;
  PoolImpl& impl() { return *pool->impl(); }
};

inline GatedPool MakeGatedPool(const PoolTuning& tuning) {
  GatedPool g;
  g.gate = std::make_shared<GateDevice>(bdev::MemoryDevice::Create(128 << 20));
  PoolCreateOptions o;
  o.tuning = tuning;
  auto p = Pool::Create("trunk", {g.gate}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  g.pool = *p;
  VolumeOptions vo;
  vo.volsize = 16 << 20;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  EXPECT_TRUE(g.pool->CreateVolume("trunk/v", vo).ok());
  g.vol = *g.pool->OpenVolume("trunk/v");
  return g;
}

}  // namespace volstack::pool::testing
