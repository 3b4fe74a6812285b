// NBD wire constants and the encoding/decoding of its fixed-size messages (the fixed-newstyle
// protocol, NetworkBlockDevice/nbd doc/proto.md). All integers are big-endian.
//
//   option request   (16 B + data)  u64 IHAVEOPT | u32 option | u32 length | data
//   option reply     (20 B + data)  u64 0x3e889045565a9 | u32 option | u32 type | u32 length
//   request          (28 B [+data]) u32 0x25609513 | u16 flags | u16 type | u64 cookie
//                                   | u64 offset | u32 length
//   simple reply     (16 B [+data]) u32 0x67446698 | u32 error | u64 cookie
//   structured chunk (20 B + data)  u32 0x668e33ef | u16 flags | u16 type | u64 cookie
//                                   | u32 length
//
// Decoders take exactly the header's bytes and never fail on content: a bad magic is a
// protocol violation the caller answers (by disconnecting), reported as Corruption.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::exportfs::nbd {

inline constexpr uint64_t kNbdMagic = 0x4e42444d41474943ull;  // "NBDMAGIC"
inline constexpr uint64_t kOptMagic = 0x49484156454F5054ull;  // "IHAVEOPT"
inline constexpr uint64_t kOptReplyMagic = 0x3e889045565a9ull;
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;

// Handshake flags (server) and client flags.
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientNoZeroes = 1 << 1;

// Options.
inline constexpr uint32_t kOptExportName = 1;
inline constexpr uint32_t kOptAbort = 2;
inline constexpr uint32_t kOptList = 3;
inline constexpr uint32_t kOptStartTls = 5;
inline constexpr uint32_t kOptInfo = 6;
inline constexpr uint32_t kOptGo = 7;
inline constexpr uint32_t kOptStructuredReply = 8;
inline constexpr uint32_t kOptListMetaContext = 9;
inline constexpr uint32_t kOptSetMetaContext = 10;

// Option reply types.
inline constexpr uint32_t kRepAck = 1;
inline constexpr uint32_t kRepServer = 2;
inline constexpr uint32_t kRepInfo = 3;
inline constexpr uint32_t kRepMetaContext = 4;
inline constexpr uint32_t kRepErrUnsup = 0x80000001;
inline constexpr uint32_t kRepErrPolicy = 0x80000002;
inline constexpr uint32_t kRepErrInvalid = 0x80000003;
inline constexpr uint32_t kRepErrTlsReqd = 0x80000005;
inline constexpr uint32_t kRepErrUnknown = 0x80000006;
inline constexpr uint32_t kRepErrShutdown = 0x80000007;
inline constexpr uint32_t kRepErrTooBig = 0x80000009;

// NBD_INFO_* items.
inline constexpr uint16_t kInfoExport = 0;
inline constexpr uint16_t kInfoName = 1;
inline constexpr uint16_t kInfoDescription = 2;
inline constexpr uint16_t kInfoBlockSize = 3;

// Transmission flags.
inline constexpr uint16_t kTransHasFlags = 1 << 0;
inline constexpr uint16_t kTransReadOnly = 1 << 1;
inline constexpr uint16_t kTransSendFlush = 1 << 2;
inline constexpr uint16_t kTransSendFua = 1 << 3;
inline constexpr uint16_t kTransSendTrim = 1 << 5;
inline constexpr uint16_t kTransSendWriteZeroes = 1 << 6;
inline constexpr uint16_t kTransSendDf = 1 << 7;
inline constexpr uint16_t kTransCanMultiConn = 1 << 8;
inline constexpr uint16_t kTransSendFastZero = 1 << 11;

// Commands and command flags.
inline constexpr uint16_t kCmdRead = 0;
inline constexpr uint16_t kCmdWrite = 1;
inline constexpr uint16_t kCmdDisc = 2;
inline constexpr uint16_t kCmdFlush = 3;
inline constexpr uint16_t kCmdTrim = 4;
inline constexpr uint16_t kCmdCache = 5;
inline constexpr uint16_t kCmdWriteZeroes = 6;
inline constexpr uint16_t kCmdBlockStatus = 7;
inline constexpr uint16_t kCmdFlagFua = 1 << 0;
inline constexpr uint16_t kCmdFlagNoHole = 1 << 1;
inline constexpr uint16_t kCmdFlagDf = 1 << 2;
inline constexpr uint16_t kCmdFlagReqOne = 1 << 3;
inline constexpr uint16_t kCmdFlagFastZero = 1 << 4;

// Structured reply chunks.
inline constexpr uint16_t kChunkFlagDone = 1 << 0;
inline constexpr uint16_t kChunkNone = 0;
inline constexpr uint16_t kChunkOffsetData = 1;
inline constexpr uint16_t kChunkOffsetHole = 2;
inline constexpr uint16_t kChunkBlockStatus = 5;
inline constexpr uint16_t kChunkError = 0x8001;

// base:allocation states.
inline constexpr uint32_t kStateHole = 1 << 0;
inline constexpr uint32_t kStateZero = 1 << 1;

// Wire error values (errno-like, but fixed by the protocol).
inline constexpr uint32_t kEperm = 1;
inline constexpr uint32_t kEio = 5;
inline constexpr uint32_t kEnomem = 12;
inline constexpr uint32_t kEinval = 22;
inline constexpr uint32_t kEnospc = 28;
inline constexpr uint32_t kEoverflow = 75;
inline constexpr uint32_t kEnotsup = 95;
inline constexpr uint32_t kEshutdown = 108;

inline constexpr size_t kOptionHeaderSize = 16;
inline constexpr size_t kOptionReplyHeaderSize = 20;
inline constexpr size_t kRequestSize = 28;
inline constexpr size_t kSimpleReplySize = 16;
inline constexpr size_t kChunkHeaderSize = 20;

struct OptionHeader {
  uint64_t magic = 0;
  uint32_t option = 0;
  uint32_t length = 0;
};

struct Request {
  uint16_t flags = 0;
  uint16_t type = 0;
  uint64_t cookie = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
};

// Requires header.size() == kOptionHeaderSize. Does not check the magic.
OptionHeader DecodeOptionHeader(std::span<const uint8_t, kOptionHeaderSize> header);
// Requires out.size() == kOptionReplyHeaderSize.
void EncodeOptionReplyHeader(std::span<uint8_t, kOptionReplyHeaderSize> out, uint32_t option,
                             uint32_t type, uint32_t length);
// Corruption on a bad magic.
Result<Request> DecodeRequest(std::span<const uint8_t, kRequestSize> header);
void EncodeRequest(std::span<uint8_t, kRequestSize> out, const Request& request);  // tests
void EncodeSimpleReply(std::span<uint8_t, kSimpleReplySize> out, uint32_t error, uint64_t cookie);
void EncodeChunkHeader(std::span<uint8_t, kChunkHeaderSize> out, uint16_t flags, uint16_t type,
                       uint64_t cookie, uint32_t length);

// The wire error for a Status: EPERM/EROFS -> EPERM, ENOSPC/EDQUOT/EFBIG -> ENOSPC,
// EINVAL -> EINVAL, EOVERFLOW, ENOTSUP/EOPNOTSUPP -> ENOTSUP, ENOMEM, ESHUTDOWN; anything
// else EIO. OK -> 0.
uint32_t WireError(const Status& status);

// The body of an NBD_OPT_INFO / NBD_OPT_GO request: u32 namelen, name, u16 n, u16 info[n].
struct InfoRequest {
  std::string name;
  std::vector<uint16_t> items;
};
// Corruption if the lengths do not add up exactly.
Result<InfoRequest> DecodeInfoRequest(std::span<const uint8_t> data);

// The body of NBD_OPT_{LIST,SET}_META_CONTEXT: u32 namelen, name, u32 n, {u32 len, query}[n].
struct MetaContextRequest {
  std::string name;
  std::vector<std::string> queries;
};
Result<MetaContextRequest> DecodeMetaContextRequest(std::span<const uint8_t> data);

}  // namespace volstack::exportfs::nbd
