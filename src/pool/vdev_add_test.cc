// zpool add beside the pool's other users (vdev_add.cc, vdev_table.h):
//   - readers, writers with flushes and status run on while vdevs are added, and see
//     every vdev whole;
//   - a Flush() acknowledged while the add is writing its labels survives a power cut
//     there: the txg the add commits does not count as durable before its labels name
//     the new vdevs, so the intent log holds the write, and the import (of the txg
//     before, the labels still naming the old set) replays it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bdev/fault_device.h"
#include "bdev/forwarding_device.h"
#include "pool/gated_pool.h"
#include "pool/pool_impl.h"
#include "pool/redundancy_test_util.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using bdev::FaultDevice;
using testing::kMiB;
using testing::Pattern;

constexpr uint64_t kDevSize = 64 * kMiB;

// Holds the first write of a label config (label 0's) until Release().
class LabelGate final : public bdev::ForwardingDevice {
 public:
  explicit LabelGate(bdev::BlockDevicePtr t) : ForwardingDevice(std::move(t)) {}
  std::atomic<bool> held{false};
  void Release() {
    {
      std::lock_guard l(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 protected:
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions o) override {
    if (offset == LabelOffset(size(), 0) + kLabelConfigOffset) {
      std::unique_lock l(mu_);
      held = true;
      cv_.notify_all();
      cv_.wait(l, [&] { return released_; });
    }
    return ForwardingDevice::DoWrite(offset, buf, o);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

template <typename Pred>
bool WaitFor(Pred pred) {
  for (int i = 0; i < 5000 && !pred(); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pred();
}

std::shared_ptr<Pool> CreateOn(bdev::BlockDevicePtr dev) {
  PoolCreateOptions o;
  o.tuning = testing::UncachedTuning();
  auto p = Pool::Create("trunk", {VdevSpec{false, {std::move(dev)}, {"dev0"}}}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

TEST(VdevAddTest, ReadersWritersAndStatusRunBesideAdds) {
  auto devs = testing::MakeFaultDevs(4, 300, kDevSize);
  auto p = CreateOn(devs[0]);
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  vo.volblocksize = 4096;
  ASSERT_TRUE(p->CreateVolume("trunk/vol", vo).ok());
  auto dev = *p->OpenVolume("trunk/vol");
  auto data = Pattern(vo.volsize, 301);
  ASSERT_TRUE(dev->Write(0, data).ok());
  ASSERT_TRUE(dev->Flush().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, rounds{0};
  // The first half is only read; the second half is rewritten and flushed.
  std::thread reader([&] {
    std::vector<uint8_t> got(vo.volsize / 2);
    while (!stop) {
      if (!dev->Read(0, got).ok() || std::memcmp(got.data(), data.data(), got.size()) != 0) bad++;
      for (const auto& v : p->Info().vdevs) bad += v.state != "ONLINE";
      rounds++;
    }
  });
  std::thread writer([&] {
    auto more = Pattern(vo.volsize / 2, 302);
    while (!stop) {
      if (!dev->Write(vo.volsize / 2, more).ok() || !dev->Flush().ok()) bad++;
    }
  });
  for (int i = 1; i < 4; i++) {
    Status st = p->Add({VdevSpec{false, {devs[i]}, {"dev" + std::to_string(i)}}});
    EXPECT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(p->Sync().ok());
  }
  WaitFor([&] { return rounds.load() > 3; });
  stop = true;
  reader.join();
  writer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(p->Info().vdevs.size(), 4u);
  dev.reset();
  testing::ExpectConsistent(*p);
  ASSERT_TRUE(p->Close().ok());
}

TEST(VdevAddTest, FlushDuringTheAddsLabelWritesSurvivesAPowerCut) {
  auto devs = testing::MakeFaultDevs(2, 310, kDevSize);
  auto old_gate = std::make_shared<testing::GateDevice>(devs[0]);
  auto new_gate = std::make_shared<LabelGate>(devs[1]);
  auto p = CreateOn(old_gate);
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  vo.volblocksize = 4096;
  ASSERT_TRUE(p->CreateVolume("trunk/vol", vo).ok());
  auto dev = *p->OpenVolume("trunk/vol");
  auto data = Pattern(vo.volsize, 311);
  // The intent log's chain is made durable by the first flush; the second uses it.
  ASSERT_TRUE(dev->Write(0, data).ok());
  ASSERT_TRUE(dev->Flush().ok());
  auto w0 = Pattern(4096, 312);
  ASSERT_TRUE(dev->Write(0, w0).ok());
  ASSERT_TRUE(dev->Flush().ok());
  std::memcpy(data.data(), w0.data(), w0.size());
  // The add's first commit (txg T) is held at its flush: a write made then is in T+1, the
  // txg whose commit writes the labels.
  auto w1 = Pattern(4096, 313);
  ASSERT_TRUE(dev->Write(4096, w1).ok());
  old_gate->hold_next_flush = true;
  Status add_status;
  std::thread add([&] { add_status = p->Add({VdevSpec{false, {new_gate}, {"dev1"}}}); });
  ASSERT_TRUE(WaitFor([&] { return old_gate->flush_held.load(); }));
  auto w2 = Pattern(4096, 314);
  ASSERT_TRUE(dev->Write(8192, w2).ok());
  old_gate->ReleaseFlush();
  ASSERT_TRUE(WaitFor([&] { return new_gate->held.load(); }));
  // T+1's uberblock is flushed; its labels are not written. A flush now must make w2
  // durable without T+1.
  ASSERT_TRUE(dev->Flush().ok());
  std::memcpy(data.data() + 4096, w1.data(), w1.size());
  std::memcpy(data.data() + 8192, w2.data(), w2.size());
  for (auto& d : devs) ASSERT_TRUE(d->CutPower(bdev::CrashMode::kDropAll).ok());
  new_gate->Release();
  add.join();
  EXPECT_FALSE(add_status.ok());
  dev.reset();
  p->Close().IgnoreError();
  p.reset();
  for (auto& d : devs) d = *d->Reopen();
  auto q = testing::ImportUncached({devs[0]});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->Info().vdevs.size(), 1u);
  testing::ExpectReads(**q, "trunk/vol", data);
  testing::ExpectConsistent(**q);
  ASSERT_TRUE((*q)->Close().ok());
}

}  // namespace
}  // namespace volstack::pool
