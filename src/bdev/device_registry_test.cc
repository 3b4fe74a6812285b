#include "bdev/device_registry.h"

#include <gtest/gtest.h>

#include "bdev/memory_device.h"

namespace volstack::bdev {
namespace {

TEST(DeviceRegistryTest, ValidNames) {
  for (const char* ok : {"trunk", "trunk/funk", "vg0/lv_0", "a.b+c:d-e", "pool/vol@x"}) {
    EXPECT_TRUE(DeviceRegistry::IsValidName(ok)) << ok;
  }
  for (const char* bad :
       {"", "/abs", "trail/", "a//b", "a/../b", ".", "-opt", "a/-b", "sp ace", "@x", "a/@b"}) {
    EXPECT_FALSE(DeviceRegistry::IsValidName(bad)) << bad;
  }
  EXPECT_FALSE(DeviceRegistry::IsValidName(std::string(256, 'a')));
}

TEST(DeviceRegistryTest, AddFindRemoveAndNotify) {
  DeviceRegistry reg;
  std::vector<std::pair<DeviceRegistry::Change, std::string>> seen;
  const int id =
      reg.Subscribe([&](DeviceRegistry::Change c, const std::string& n, const BlockDevicePtr& d) {
        EXPECT_NE(d, nullptr);
        seen.emplace_back(c, n);
      });
  auto dev = MemoryDevice::Create(1 << 20);
  ASSERT_TRUE(reg.Add("trunk/funk", dev).ok());
  EXPECT_EQ(reg.Add("trunk/funk", dev).code(), EEXIST);
  EXPECT_EQ(reg.Add("bad name", dev).code(), EINVAL);
  EXPECT_EQ(reg.Find("trunk/funk"), dev);
  EXPECT_EQ(reg.Find("nope"), nullptr);
  ASSERT_EQ(reg.List().size(), 1u);
  auto removed = reg.Remove("trunk/funk");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, dev);
  EXPECT_EQ(reg.Remove("trunk/funk").status().code(), ENOENT);
  reg.Unsubscribe(id);
  ASSERT_TRUE(reg.Add("vg0/lv0", dev).ok());
  using C = DeviceRegistry::Change;
  EXPECT_EQ(seen, (std::vector<std::pair<C, std::string>>{{C::kAdded, "trunk/funk"},
                                                          {C::kRemoved, "trunk/funk"}}));
}

}  // namespace
}  // namespace volstack::bdev
