#include "export/nbd/nbd_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <numeric>
#include <thread>
#include <vector>

namespace volstack::exportfs::nbd {
namespace {

class SocketReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void Send(const std::vector<uint8_t>& data) {
    iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    ASSERT_TRUE(WriteFully(fds_[1], &iov, 1).ok());
  }
  void CloseWriter() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

std::vector<uint8_t> Bytes(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Messages sent back to back come out whole and in order, whatever the buffer size, including
// pieces larger than the buffer (read around it) and pieces split across refills.
TEST_F(SocketReaderTest, ReadsMessagesWholeAcrossRefills) {
  Transport transport(fds_[0]);
  SocketReader reader(transport, 64);
  const std::vector<size_t> sizes = {28, 4096, 28, 28, 5, 100, 31, 64, 28};
  std::vector<uint8_t> all;
  for (size_t i = 0; i < sizes.size(); i++) {
    auto m = Bytes(sizes[i], static_cast<uint8_t>(i * 17));
    all.insert(all.end(), m.begin(), m.end());
  }
  std::thread writer([&] { Send(all); });
  size_t at = 0;
  for (size_t n : sizes) {
    std::vector<uint8_t> got(n);
    ASSERT_TRUE(reader.ReadFully(got).ok());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + static_cast<long>(at))) << n;
    at += n;
  }
  writer.join();
}

TEST_F(SocketReaderTest, DiscardSkipsBufferedAndUnbufferedBytes) {
  Transport transport(fds_[0]);
  SocketReader reader(transport, 64);
  Send(Bytes(10, 0));
  Send(Bytes(300, 10));
  Send(Bytes(4, 200));
  std::vector<uint8_t> got(4);
  ASSERT_TRUE(reader.ReadFully(got).ok());  // buffers more than it returns
  EXPECT_EQ(got, Bytes(4, 0));
  ASSERT_TRUE(reader.Discard(6 + 300).ok());
  ASSERT_TRUE(reader.ReadFully(got).ok());
  EXPECT_EQ(got, Bytes(4, 200));
}

TEST_F(SocketReaderTest, EndOfStreamBetweenAndInsideMessages) {
  Transport transport(fds_[0]);
  SocketReader reader(transport, 64);
  Send(Bytes(28, 0));
  Send(Bytes(10, 0));
  CloseWriter();
  std::vector<uint8_t> got(28);
  ASSERT_TRUE(reader.ReadFully(got).ok());
  Status mid = reader.ReadFully(got);  // 10 of 28 bytes, then EOF
  EXPECT_EQ(mid.code(), ECONNRESET);
  EXPECT_NE(mid.message().find("mid-message"), std::string::npos) << mid.ToString();
  Status clean = reader.ReadFully(got);
  EXPECT_EQ(clean.code(), ECONNRESET);
  EXPECT_NE(clean.message().find("closed"), std::string::npos) << clean.ToString();
}

}  // namespace
}  // namespace volstack::exportfs::nbd
