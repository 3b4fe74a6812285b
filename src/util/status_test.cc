#include "util/status.h"

#include <gtest/gtest.h>

#include <cstring>

namespace volstack {
namespace {

TEST(StatusTest, OkAndCodes) {
  EXPECT_TRUE(Status().ok());
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().code(), 0);
  EXPECT_EQ(Status::InvalidArgument("x").code(), EINVAL);
  EXPECT_EQ(Status::NoSpace("x").code(), ENOSPC);
  EXPECT_EQ(Status::IoError("x").code(), EIO);
  EXPECT_EQ(Status::NotFound("x").code(), ENOENT);
  EXPECT_EQ(Status::Exists("x").code(), EEXIST);
  EXPECT_EQ(Status::Busy("x").code(), EBUSY);
  EXPECT_EQ(Status::ReadOnly("x").code(), EROFS);
  EXPECT_EQ(Status::NotSupported("x").code(), EOPNOTSUPP);
  EXPECT_EQ(Status::Corruption("x").code(), EUCLEAN);
  EXPECT_EQ(Status::FromErrno(EAGAIN, "x").code(), EAGAIN);
  EXPECT_FALSE(Status::IoError("x").ok());
  EXPECT_TRUE(Status::Corruption("bad label").IsCorruption());
  EXPECT_FALSE(Status::IoError("x").IsCorruption());
  EXPECT_TRUE(Status::NotFound("x").IsNotFound());
  EXPECT_FALSE(Status::Ok().IsNotFound());
}

TEST(StatusTest, ToStringNamesTheObjectAndTheReason) {
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  EXPECT_EQ(Status::IoError("vdev /tmp/a: read at 4096").ToString(),
            std::string("vdev /tmp/a: read at 4096: ") + std::strerror(EIO));
  EXPECT_EQ(Status::FromErrno(ENOSPC, "").ToString(), std::strerror(ENOSPC));
  EXPECT_EQ(Status::IoError("m").message(), "m");
}

TEST(StatusTest, WithContextPrefixesAndKeepsTheCode) {
  const Status s = Status::NotFound("no such volume").WithContext("zfs destroy trunk/funk");
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_EQ(s.message(), "zfs destroy trunk/funk: no such volume");
  EXPECT_EQ(Status::IoError("").WithContext("ctx").message(), "ctx");
  EXPECT_TRUE(Status::Ok().WithContext("ctx").ok());
  EXPECT_EQ(Status::Ok().WithContext("ctx").message(), "");
}

TEST(StatusTest, ErrnoStatus) {
  EXPECT_EQ(ErrnoStatus("open /x", ENOENT).code(), ENOENT);
  EXPECT_EQ(ErrnoStatus("open /x", ENOENT).message(), "open /x");
  EXPECT_EQ(ErrnoStatus("weird", 0).code(), EIO) << "errno 0 must not make an OK status";
  errno = EACCES;
  EXPECT_EQ(ErrnoStatus("from errno").code(), EACCES);
}

Status Step(int fail_at, int i, int* reached) {
  *reached = i;
  return i == fail_at ? Status::IoError("step " + std::to_string(i)) : Status::Ok();
}

Status Steps(int fail_at, int* reached) {
  for (int i = 0; i < 5; i++) VS_RETURN_IF_ERROR(Step(fail_at, i, reached));
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstFailure) {
  int reached = -1;
  EXPECT_TRUE(Steps(-1, &reached).ok());
  EXPECT_EQ(reached, 4);
  const Status s = Steps(2, &reached);
  EXPECT_EQ(reached, 2);
  EXPECT_EQ(s.message(), "step 2");
}

}  // namespace
}  // namespace volstack
