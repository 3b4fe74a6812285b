// Snapshot devices in the live stack (snapshot_devices.h): with snapdev=hidden a snapshot is
// no device (not registered, not resolved); with snapdev=visible Reconcile registers each
// snapshot read-only with its txg's data, and drops it when it is destroyed or hidden again.
#include "stack/snapshot_devices.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "bdev/memory_device.h"
#include "stack/pool_cache.h"
#include "stack/stack.h"
#include "stack/test_kernel.h"

namespace volstack::stack {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(SnapshotDevicesTest, VisibleSnapshotsAreReadOnlyDevicesHiddenOnesAreNone) {
  char tmpl[] = "/tmp/volstack-snapdev-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  StateDir state;
  state.root = tmpl;
  auto kernel = std::make_shared<TestKernel>();
  auto device = bdev::MemoryDevice::Create(128 * kMiB);
  {
    auto p = pool::Pool::Create("tank", {device}, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pool::VolumeOptions v;
    v.volsize = 16 * kMiB;
    v.sparse = true;
    ASSERT_TRUE((*p)->CreateVolume("tank/vol", v).ok());
    const uint64_t guid = (*p)->guid();
    ASSERT_TRUE((*p)->Close().ok());
    ASSERT_TRUE(AddToPoolCache(state.root, {"tank", guid, {"/mem/tank0"}}).ok());
  }
  Stack::Options o;
  o.kernel = kernel;
  o.open_path = [device](const std::string& path, bool) -> Result<bdev::BlockDevicePtr> {
    if (path != "/mem/tank0") return Status::NotFound(path);
    return bdev::BlockDevicePtr(device);
  };
  auto stack = Stack::Open(state, Mode::kDaemon, o);
  ASSERT_TRUE(stack->Up().ok());
  auto p = stack->FindLivePool("tank");
  ASSERT_NE(p, nullptr);
  const std::vector<uint8_t> old_data(4096, 0x11), new_data(4096, 0x22);
  auto vol = stack->registry().Find("tank/vol");
  ASSERT_NE(vol, nullptr);
  ASSERT_TRUE(vol->Write(0, old_data).ok());
  ASSERT_TRUE(p->Snapshot({"tank/vol@s"}).ok());
  ASSERT_TRUE(vol->Write(0, new_data).ok());
  stack->Reconcile();

  // Hidden (the default): neither registered nor resolved.
  EXPECT_EQ(stack->registry().Find("tank/vol@s"), nullptr);
  EXPECT_TRUE(VisibleSnapshotNames(*p).empty());
  auto hidden = stack->OpenDevice("tank/vol@s", Access::kReadOnly);
  ASSERT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.status().code(), ENODEV);
  EXPECT_NE(hidden.status().message().find("snapdev=visible"), std::string::npos);

  // Visible: a read-only device with the snapshot's data.
  ASSERT_TRUE(p->SetProperty("tank/vol", "snapdev", "visible").ok());
  stack->Reconcile();
  EXPECT_EQ(VisibleSnapshotNames(*p), std::vector<std::string>{"tank/vol@s"});
  auto snap = stack->registry().Find("tank/vol@s");
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(snap->read_only());
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(snap->Read(0, back).ok());
  EXPECT_EQ(back, old_data);
  EXPECT_EQ(snap->Write(0, new_data).code(), EROFS);
  auto resolved = stack->OpenDevice("tank/vol@s", Access::kReadWrite);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(*resolved, snap);
  snap.reset();
  resolved = Status::NotFound("dropped");

  // Registered, it is busy; released, it can be destroyed and stays gone.
  EXPECT_EQ(p->DestroySnapshot("tank/vol@s").code(), EBUSY);
  stack->Release({"tank/vol@s"});
  ASSERT_TRUE(p->DestroySnapshot("tank/vol@s").ok());
  stack->Reconcile();
  EXPECT_EQ(stack->registry().Find("tank/vol@s"), nullptr);

  // Hidden again: a new snapshot is registered only while visible.
  ASSERT_TRUE(p->Snapshot({"tank/vol@t"}).ok());
  stack->Reconcile();
  EXPECT_NE(stack->registry().Find("tank/vol@t"), nullptr);
  ASSERT_TRUE(p->SetProperty("tank/vol", "snapdev", "hidden").ok());
  stack->Reconcile();
  EXPECT_EQ(stack->registry().Find("tank/vol@t"), nullptr);
  EXPECT_EQ(p->SetProperty("tank/vol", "snapdev", "maybe").code(), EINVAL);
  vol.reset();
  p.reset();
  ASSERT_TRUE(stack->Down(false).ok());
  std::filesystem::remove_all(state.root);
}

}  // namespace
}  // namespace volstack::stack
