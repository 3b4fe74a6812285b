#include "export/nbd/nbd_protocol.h"

#include <gtest/gtest.h>

#include <array>

namespace volstack::exportfs::nbd {
namespace {

TEST(NbdProtocol, RequestRoundTripAndWireBytes) {
  Request r{kCmdFlagFua, kCmdWrite, 0x0102030405060708ull, 0x1122334455667788ull, 0x9abcdef0};
  std::array<uint8_t, kRequestSize> buf{};
  EncodeRequest(buf, r);
  const std::array<uint8_t, kRequestSize> want = {
      0x25, 0x60, 0x95, 0x13, 0x00, 0x01, 0x00, 0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
      0x07, 0x08, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x9a, 0xbc, 0xde, 0xf0};
  EXPECT_EQ(buf, want);
  auto d = DecodeRequest(buf);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->flags, r.flags);
  EXPECT_EQ(d->type, r.type);
  EXPECT_EQ(d->cookie, r.cookie);
  EXPECT_EQ(d->offset, r.offset);
  EXPECT_EQ(d->length, r.length);
}

TEST(NbdProtocol, BadRequestMagicIsCorruption) {
  std::array<uint8_t, kRequestSize> buf{};
  EncodeRequest(buf, Request{});
  buf[0] ^= 1;
  EXPECT_TRUE(DecodeRequest(buf).status().IsCorruption());
}

TEST(NbdProtocol, RepliesAndOptionHeaders) {
  std::array<uint8_t, kSimpleReplySize> simple{};
  EncodeSimpleReply(simple, kEinval, 42);
  EXPECT_EQ(simple, (std::array<uint8_t, kSimpleReplySize>{0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22, 0,
                                                           0, 0, 0, 0, 0, 0, 42}));
  std::array<uint8_t, kChunkHeaderSize> chunk{};
  EncodeChunkHeader(chunk, kChunkFlagDone, kChunkOffsetData, 7, 4104);
  EXPECT_EQ(chunk[0], 0x66);
  EXPECT_EQ(chunk[5], 1);  // DONE
  EXPECT_EQ(chunk[7], 1);  // OFFSET_DATA
  EXPECT_EQ(chunk[15], 7);
  EXPECT_EQ(chunk[18], 0x10);
  EXPECT_EQ(chunk[19], 0x08);
  std::array<uint8_t, kOptionReplyHeaderSize> rep{};
  EncodeOptionReplyHeader(rep, kOptGo, kRepErrUnsup, 3);
  EXPECT_EQ(rep[7], 0xa9);  // low byte of 0x3e889045565a9
  EXPECT_EQ(rep[11], kOptGo);
  EXPECT_EQ(rep[12], 0x80);
  EXPECT_EQ(rep[19], 3);
  const std::array<uint8_t, kOptionHeaderSize> opt = {'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T',
                                                      0,   0,   0,   7,   0,   0,   1,   2};
  const OptionHeader h = DecodeOptionHeader(opt);
  EXPECT_EQ(h.magic, kOptMagic);
  EXPECT_EQ(h.option, kOptGo);
  EXPECT_EQ(h.length, 258u);
}

TEST(NbdProtocol, InfoRequestDecoding) {
  const std::vector<uint8_t> ok = {0, 0, 0, 3, 'a', '/', 'b', 0, 2, 0, 3, 0, 1};
  auto r = DecodeInfoRequest(ok);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "a/b");
  EXPECT_EQ(r->items, (std::vector<uint16_t>{kInfoBlockSize, kInfoName}));
  // Truncated name, truncated list, trailing byte, absurd name length.
  EXPECT_TRUE(DecodeInfoRequest(std::vector<uint8_t>{0, 0, 0, 9, 'a'}).status().IsCorruption());
  EXPECT_TRUE(
      DecodeInfoRequest(std::vector<uint8_t>{0, 0, 0, 0, 0, 2, 0, 3}).status().IsCorruption());
  EXPECT_TRUE(DecodeInfoRequest(std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 9}).status().IsCorruption());
  EXPECT_TRUE(DecodeInfoRequest(std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0, 0})
                  .status()
                  .IsCorruption());
  EXPECT_TRUE(DecodeInfoRequest({}).status().IsCorruption());
}

TEST(NbdProtocol, MetaContextRequestDecoding) {
  std::vector<uint8_t> d = {0, 0, 0, 1, 'x', 0, 0, 0, 1, 0, 0, 0, 15};
  const std::string q = "base:allocation";
  d.insert(d.end(), q.begin(), q.end());
  auto r = DecodeMetaContextRequest(d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "x");
  EXPECT_EQ(r->queries, std::vector<std::string>{q});
  d.pop_back();
  EXPECT_TRUE(DecodeMetaContextRequest(d).status().IsCorruption());
}

TEST(NbdProtocol, WireErrorsFollowTheSpec) {
  EXPECT_EQ(WireError(Status::Ok()), 0u);
  EXPECT_EQ(WireError(Status::ReadOnly("x")), kEperm);
  EXPECT_EQ(WireError(Status::NoSpace("x")), kEnospc);
  EXPECT_EQ(WireError(Status::FromErrno(EFBIG, "x")), kEnospc);
  EXPECT_EQ(WireError(Status::InvalidArgument("x")), kEinval);
  EXPECT_EQ(WireError(Status::NotSupported("x")), kEnotsup);
  EXPECT_EQ(WireError(Status::Corruption("x")), kEio);
  EXPECT_EQ(WireError(Status::FromErrno(ENOENT, "x")), kEio);
}

}  // namespace
}  // namespace volstack::exportfs::nbd
