#include "bench/teardown.h"

#include <gtest/gtest.h>

namespace volstack::bench {
namespace {

TEST(TeardownTest, RunsInReverseAndKeepsGoingAfterFailures) {
  std::vector<int> order;
  Teardown t;
  t.Add("one", [&] {
    order.push_back(1);
    return Status::Ok();
  });
  t.Add("two", [&] {
    order.push_back(2);
    return Status::IoError("umount busy");
  });
  t.Add("three", [&] {
    order.push_back(3);
    return Status::Busy("still open");
  });
  EXPECT_EQ(t.size(), 3u);
  Status s = t.Run();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), EBUSY);  // the first failure, in the order they ran
  EXPECT_NE(s.message().find("teardown: three"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 teardown steps failed"), std::string::npos) << s.message();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(t.Run().ok());  // nothing left: nothing runs twice
  EXPECT_EQ(order.size(), 3u);
}

TEST(TeardownTest, DestructorIsASafetyNet) {
  int ran = 0;
  {
    Teardown t;
    t.Add("x", [&] {
      ++ran;
      return Status::Ok();
    });
  }
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace volstack::bench
