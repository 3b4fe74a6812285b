// RbdDevice. Name parsing and the build without librbd run everywhere. What needs a cluster
// (the BlockDevice conformance suite on fresh images, many requests in flight, errors at
// open, sharing one connection) runs when VOLSTACK_TEST_CEPH_CONF names a running cluster's
// ceph.conf with a pool `rbd`: tests/integration/rbd_device_test.sh starts one with
// scripts/ceph-test-cluster.sh and runs these tests against it. Without it they are skipped.
#include "remote/rbd_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bdev/block_device_conformance.h"
#include "remote/remote_device.h"

namespace volstack::remote {
namespace {

const char* CephConf() { return std::getenv("VOLSTACK_TEST_CEPH_CONF"); }

// A fresh image rbd/NAME of `mib` MiB on the test cluster, made with the cluster's own tool.
std::string NewImage(const std::string& name, unsigned mib) {
  static std::atomic<int> seq{0};
  const std::string image = name + "-" + std::to_string(::getpid()) + "-" + std::to_string(seq++);
  const std::string cmd = "timeout 30 rbd -c '" + std::string(CephConf()) + "' create --size " +
                          std::to_string(mib) + "M rbd/" + image;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd << " failed";
    return "";
  }
  return "rbd:rbd/" + image + ":conf=" + CephConf();
}

struct RbdFactory {
  static bdev::BlockDevicePtr Open(bool read_only) {
    if (CephConf() == nullptr) {
      [] { GTEST_SKIP() << "VOLSTACK_TEST_CEPH_CONF not set (rbd_device_test.sh sets it)"; }();
      return nullptr;
    }
    const std::string name = NewImage("conformance", 16);
    if (name.empty()) return nullptr;
    RbdOptions o;
    o.read_only = read_only;
    auto d = RbdDevice::Open(name, o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? bdev::BlockDevicePtr(*d) : nullptr;
  }
  static bdev::BlockDevicePtr Make() { return Open(false); }
  static bdev::BlockDevicePtr MakeReadOnly() { return Open(true); }
};

using RbdTypes = ::testing::Types<RbdFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Rbd, BlockDeviceConformance, RbdTypes);

TEST(RbdNameTest, ParsesQemuConvention) {
  auto n = ParseRbdName("rbd:vols/disk0");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->pool, "vols");
  EXPECT_EQ(n->image, "disk0");
  EXPECT_EQ(n->snap, "");
  EXPECT_EQ(n->conf, "");
  EXPECT_EQ(n->id, "");
  n = ParseRbdName("rbd:vols/disk0@s1:conf=/etc/c\\:d/ceph.conf:id=vs:rados_osd_op_timeout=5");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->pool, "vols");
  EXPECT_EQ(n->image, "disk0");
  EXPECT_EQ(n->snap, "s1");
  EXPECT_EQ(n->conf, "/etc/c:d/ceph.conf");
  EXPECT_EQ(n->id, "vs");
  ASSERT_EQ(n->options.size(), 1u);
  EXPECT_EQ(n->options.at("rados_osd_op_timeout"), "5");
  n = ParseRbdName("rbd:p/a\\@b");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->image, "a@b");
  EXPECT_EQ(n->snap, "");
}

TEST(RbdNameTest, RejectsBadNamesWithOneError) {
  for (const char* bad : {"rbd:", "rbd:pool", "rbd:/img", "rbd:pool/", "rbd:p/i:conf", "rbd:p/i:=x",
                          "/dev/rbd0", "nbd://h/x"}) {
    auto n = ParseRbdName(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.status().code(), EINVAL) << bad;
    auto d = RbdDevice::Open(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), EINVAL) << bad << ": " << d.status().ToString();
  }
  EXPECT_TRUE(IsRemoteDeviceName("rbd:p/i"));
  EXPECT_TRUE(IsRemoteDeviceName("nbd://h/x"));
  EXPECT_FALSE(IsRemoteDeviceName("rbdpool/img"));
  EXPECT_FALSE(IsRemoteDeviceName("./rbd:p/i"));
}

TEST(RbdNameTest, PeRangesAfterRemoteNames) {
  EXPECT_EQ(RemoteNameEnd("rbd:p/i:conf=/c"), std::string::npos);
  EXPECT_EQ(RemoteNameEnd("rbd:p/i:conf=/c:0-9"), 15u);
  EXPECT_EQ(RemoteNameEnd("rbd:p/i:0-9:12+3:20"), 7u);
  EXPECT_EQ(RemoteNameEnd("nbd://h:10809/x"), std::string::npos);
  EXPECT_EQ(RemoteNameEnd("nbd://h:10809/x:5"), 15u);
  EXPECT_EQ(RemoteNameEnd("rbd:p/i:x=1:5-"), std::string::npos);
}

TEST(RbdDeviceTest, WithoutLibrbdOneClearError) {
  if (RbdSupported()) GTEST_SKIP() << "this build has librbd";
  auto d = OpenRemoteDevice("rbd:p/i", false);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), EOPNOTSUPP);
  EXPECT_NE(d.status().message().find("without librbd"), std::string::npos)
      << d.status().ToString();
}

class RbdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RbdSupported()) GTEST_SKIP() << "built without librbd";
    if (CephConf() == nullptr) GTEST_SKIP() << "VOLSTACK_TEST_CEPH_CONF not set";
  }
};

TEST_F(RbdClusterTest, OpenErrorsNameTheDevice) {
  const std::string conf = CephConf();
  auto missing = RbdDevice::Open("rbd:rbd/no-such-image:conf=" + conf);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ENOENT);
  EXPECT_NE(missing.status().message().find("no-such-image"), std::string::npos)
      << missing.status().ToString();
  auto nopool = RbdDevice::Open("rbd:nopool/x:conf=" + conf);
  ASSERT_FALSE(nopool.ok());
  EXPECT_NE(nopool.status().message().find("nopool"), std::string::npos);
  auto noconf = RbdDevice::Open("rbd:rbd/x:conf=/nonexistent/ceph.conf");
  ASSERT_FALSE(noconf.ok());
  EXPECT_NE(noconf.status().message().find("/nonexistent/ceph.conf"), std::string::npos)
      << noconf.status().ToString();
  // A cluster nobody answers for: the connect gives up after client_mount_timeout.
  auto down =
      RbdDevice::Open("rbd:rbd/x:mon_host=127.0.0.1\\:9:client_mount_timeout=1:conf=" + conf);
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.status().message().find("cannot connect"), std::string::npos)
      << down.status().ToString();
}

TEST_F(RbdClusterTest, ImagesShareOneConnectionAndSeeEachOthersData) {
  const std::string a_name = NewImage("share", 4);
  auto a = OpenRemoteDevice(a_name, false);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto again = OpenRemoteDevice(a_name, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a->get(), again->get()) << "one handle per image per process";
  std::vector<uint8_t> data = bdev::testing::RandomBytes(256 << 10, 7);
  ASSERT_TRUE((*a)->Write(1 << 20, data).ok());
  ASSERT_TRUE((*a)->Flush().ok());
  // A separate handle (another client of the same image) reads what was flushed.
  auto b = RbdDevice::Open(a_name, RbdOptions{.read_only = true});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE((*b)->Read(1 << 20, back).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ((*b)->size(), 4u << 20);
  EXPECT_TRUE((*b)->read_only());
  EXPECT_EQ((*b)->Write(0, std::span<const uint8_t>(data.data(), 4096)).code(), EROFS);
}

TEST_F(RbdClusterTest, ManyRequestsInFlightFromManyThreads) {
  auto d = RbdDevice::Open(NewImage("qd", 32));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  constexpr int kThreads = 32, kWrites = 16, kBlock = 64 << 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWrites; i++) {
        const uint64_t off = (uint64_t{1} * t * kWrites + i) * kBlock / 2;  // half of 64 KiB
        auto data = bdev::testing::RandomBytes(kBlock / 2, t * 1000 + i);
        if (!(*d)->Write(off, data).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE((*d)->Flush().ok());
  for (int t = 0; t < kThreads; t++) {
    for (int i = 0; i < kWrites; i++) {
      const uint64_t off = (uint64_t{1} * t * kWrites + i) * kBlock / 2;
      std::vector<uint8_t> back(kBlock / 2);
      ASSERT_TRUE((*d)->Read(off, back).ok());
      ASSERT_EQ(back, bdev::testing::RandomBytes(kBlock / 2, t * 1000 + i)) << t << "/" << i;
    }
  }
}

}  // namespace
}  // namespace volstack::remote
