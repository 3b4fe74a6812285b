#include "util/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "util/check.h"

namespace volstack {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  VS_ASSIGN_OR_RETURN(int h, Half(x));
  VS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(ResultTest, ValueOrStatus) {
  Result<int> r = Half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, 4);
  EXPECT_EQ(r.value(), 4);
  Result<int> e = Half(3);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EINVAL);
  EXPECT_EQ(e.status().message(), "3 is odd");
}

TEST(ResultTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(Quarter(5).status().message(), "5 is odd");
}

TEST(ResultTest, MoveOnlyValuesAndArrow) {
  Result<std::unique_ptr<std::string>> r = std::make_unique<std::string>("vdev");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->size(), 4u);
  std::unique_ptr<std::string> taken = std::move(r).value();
  EXPECT_EQ(*taken, "vdev");
  Result<std::string> s = std::string("abc");
  EXPECT_EQ(s->size(), 3u);
  Result<std::string> moved_status = Status::Busy("in use");
  Status st = std::move(moved_status).status();
  EXPECT_EQ(st.code(), EBUSY);
}

TEST(ResultDeathTest, MisuseIsAnInvariantFailure) {
  EXPECT_DEATH({ Result<int> r(Status::Ok()); }, "check failed");
  EXPECT_DEATH(
      {
        Result<int> r(Status::IoError("x"));
        (void)r.value();
      },
      "check failed");
  EXPECT_DEATH(
      {
        Result<int> r(5);
        (void)r.status();
      },
      "check failed");
}

TEST(CheckDeathTest, CheckOpPrintsBothOperands) {
  const uint64_t a = 7, b = 9;
  EXPECT_DEATH(VS_CHECK_OP(a, ==, b), "a == b \\(7 vs 9\\)");
  EXPECT_DEATH(VS_CHECK(a > b), "check failed: a > b");
  VS_CHECK_OP(a, <, b);  // passes silently
}

}  // namespace
}  // namespace volstack
