// The NBD option haggling phase (fixed newstyle): see nbd_server.cc for the theory.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "export/nbd/nbd_connection.h"
#include "export/nbd/nbd_socket.h"
#include "util/coding.h"

namespace volstack::exportfs::nbd {

namespace {
// Option data we read at all; larger options are drained and refused with ERR_TOO_BIG, and
// beyond kMaxOptionDrain the client is dropped.
constexpr uint32_t kMaxOptionData = 64 * 1024;
constexpr uint32_t kMaxOptionDrain = 16u << 20;

// "client 127.0.0.1:PORT" for a TCP peer, "client on a Unix socket" else.
std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  char host[INET6_ADDRSTRLEN] = {};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
      ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
      return "client " + std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
      ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
      return "client [" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
  }
  return "client on a Unix socket";
}
}  // namespace

bdev::BlockDevicePtr Connection::FindExport(const std::string& name) const {
  if (!name.empty()) return exports_.Find(name);
  auto all = exports_.List();
  return all.size() == 1 ? all.front().second : nullptr;
}

bool Connection::ReadOnly(const bdev::BlockDevice& device) const {
  return options_.read_only || device.read_only();
}

uint16_t Connection::TransmissionFlags(const bdev::BlockDevice& device) const {
  // The devices' flush is global (it covers writes from every connection), so clients may
  // spread I/O over several connections.
  uint16_t flags = kTransHasFlags | kTransSendFlush | kTransCanMultiConn;
  if (ReadOnly(device)) {
    flags |= kTransReadOnly;
  } else {
    flags |= kTransSendFua | kTransSendTrim | kTransSendWriteZeroes | kTransSendFastZero;
  }
  if (structured_) flags |= kTransSendDf;
  return flags;
}

Status Connection::SendOptionReply(uint32_t option, uint32_t type, std::span<const uint8_t> data) {
  uint8_t header[kOptionReplyHeaderSize];
  EncodeOptionReplyHeader(std::span<uint8_t, kOptionReplyHeaderSize>(header), option, type,
                          static_cast<uint32_t>(data.size()));
  iovec iov[2] = {{header, sizeof(header)}, {const_cast<uint8_t*>(data.data()), data.size()}};
  return transport_.Send(iov, data.empty() ? 1 : 2);
}

Status Connection::SendOptionError(uint32_t option, uint32_t type, const std::string& message) {
  return SendOptionReply(
      option, type, std::span(reinterpret_cast<const uint8_t*>(message.data()), message.size()));
}

Result<bool> Connection::Handshake() {
  uint8_t hello[18];
  EncodeBE64(hello, kNbdMagic);
  EncodeBE64(hello + 8, kOptMagic);
  EncodeBE16(hello + 16, kFlagFixedNewstyle | kFlagNoZeroes);
  iovec iov{hello, sizeof(hello)};
  VS_RETURN_IF_ERROR(transport_.Send(&iov, 1));
  uint8_t cflags_buf[4];
  VS_RETURN_IF_ERROR(transport_.ReadFully(cflags_buf));
  const uint32_t cflags = DecodeBE32(cflags_buf);
  if (cflags & ~(kClientFixedNewstyle | kClientNoZeroes)) {
    return Status::Corruption("nbd: unknown client flags " + std::to_string(cflags));
  }
  no_zeroes_ = cflags & kClientNoZeroes;

  std::vector<uint8_t> data;
  for (;;) {
    uint8_t hbuf[kOptionHeaderSize];
    VS_RETURN_IF_ERROR(transport_.ReadFully(hbuf));
    const OptionHeader h = DecodeOptionHeader(std::span<const uint8_t, kOptionHeaderSize>(hbuf));
    if (h.magic != kOptMagic) return Status::Corruption("nbd: bad option magic");
    if (h.length > kMaxOptionData) {
      if (h.length > kMaxOptionDrain) return Status::Corruption("nbd: absurd option length");
      VS_RETURN_IF_ERROR(transport_.Discard(h.length));
      VS_RETURN_IF_ERROR(SendOptionError(h.option, kRepErrTooBig, "option data too large"));
      continue;
    }
    data.resize(h.length);
    VS_RETURN_IF_ERROR(transport_.ReadFully(data));
    bool go = false;
    // Until TLS is up under --tls=require only STARTTLS and ABORT are heard; EXPORT_NAME
    // cannot be answered with an error, so it ends the connection.
    if (options_.tls == TlsMode::kRequire && tls_session_ == nullptr && h.option != kOptStartTls &&
        h.option != kOptAbort) {
      if (h.option == kOptExportName) return Status::FromErrno(EACCES, "nbd: TLS required");
      VS_RETURN_IF_ERROR(
          SendOptionError(h.option, kRepErrTlsReqd, "this server requires TLS (STARTTLS)"));
      continue;
    }
    switch (h.option) {
      case kOptStartTls:
        VS_RETURN_IF_ERROR(HandleStartTls(data));
        break;
      case kOptExportName:
        VS_RETURN_IF_ERROR(HandleExportName(data, &go));
        break;
      case kOptAbort:
        // The client may already be gone: a failed ACK does not matter.
        SendOptionReply(h.option, kRepAck).IgnoreError();
        return false;
      case kOptList: {
        if (!data.empty()) {
          VS_RETURN_IF_ERROR(SendOptionError(h.option, kRepErrInvalid, "LIST takes no data"));
          break;
        }
        for (const auto& [name, device] : exports_.List()) {
          std::vector<uint8_t> body(4 + name.size());
          EncodeBE32(body.data(), static_cast<uint32_t>(name.size()));
          std::memcpy(body.data() + 4, name.data(), name.size());
          VS_RETURN_IF_ERROR(SendOptionReply(h.option, kRepServer, body));
        }
        VS_RETURN_IF_ERROR(SendOptionReply(h.option, kRepAck));
        break;
      }
      case kOptStructuredReply:
        if (!data.empty()) {
          VS_RETURN_IF_ERROR(
              SendOptionError(h.option, kRepErrInvalid, "STRUCTURED_REPLY takes no data"));
          break;
        }
        structured_ = true;
        VS_RETURN_IF_ERROR(SendOptionReply(h.option, kRepAck));
        break;
      case kOptInfo:
      case kOptGo:
        VS_RETURN_IF_ERROR(HandleInfo(h.option, data, &go));
        break;
      case kOptListMetaContext:
      case kOptSetMetaContext:
        VS_RETURN_IF_ERROR(HandleMetaContext(h.option, data));
        break;
      default:
        VS_RETURN_IF_ERROR(SendOptionError(h.option, kRepErrUnsup, "option not supported"));
        break;
    }
    if (go) {
      handshaking_ = false;
      return true;
    }
  }
}

Status Connection::HandleStartTls(std::span<const uint8_t> data) {
  if (tls_ == nullptr || options_.tls == TlsMode::kOff) {
    return SendOptionError(kOptStartTls, kRepErrPolicy, "TLS is off on this server");
  }
  if (!data.empty()) return SendOptionError(kOptStartTls, kRepErrInvalid, "STARTTLS takes no data");
  if (tls_session_ != nullptr) {
    return SendOptionError(kOptStartTls, kRepErrInvalid, "TLS is already on");
  }
  VS_RETURN_IF_ERROR(SendOptionReply(kOptStartTls, kRepAck));
  auto session = tls_->Handshake(fd_);
  if (!session.ok()) {
    // The server's log (stderr) is the only place a refused client can be explained.
    std::fprintf(stderr, "volstack: nbd: %s: %s\n", PeerName(fd_).c_str(),
                 session.status().message().c_str());
    return session.status();
  }
  tls_session_ = std::move(*session);
  transport_.StartTls(tls_session_->get());
  // What was negotiated in plaintext does not carry over (the protocol's rule).
  structured_ = false;
  meta_allocation_ = false;
  meta_export_.clear();
  return Status::Ok();
}

Status Connection::HandleExportName(std::span<const uint8_t> data, bool* go) {
  const std::string name(reinterpret_cast<const char*>(data.data()), data.size());
  auto device = FindExport(name);
  // No way to report an error here: the protocol says close.
  if (device == nullptr) return Status::NotFound("nbd: no export '" + name + "'");
  uint8_t reply[10 + 124] = {};
  EncodeBE64(reply, device->size());
  EncodeBE16(reply + 8, TransmissionFlags(*device));
  iovec iov{reply, no_zeroes_ ? size_t{10} : sizeof(reply)};
  VS_RETURN_IF_ERROR(transport_.Send(&iov, 1));
  io_ = std::make_shared<ByteRangeIo>(device);
  read_only_ = ReadOnly(*device);
  meta_allocation_ = false;
  *go = true;
  return Status::Ok();
}

Status Connection::HandleInfo(uint32_t option, std::span<const uint8_t> data, bool* go) {
  auto req = DecodeInfoRequest(data);
  if (!req.ok()) return SendOptionError(option, kRepErrInvalid, req.status().message());
  auto device = FindExport(req->name);
  if (device == nullptr) {
    return SendOptionError(option, kRepErrUnknown, "no export '" + req->name + "'");
  }
  const bdev::Geometry g = device->geometry();
  uint8_t info[12];
  EncodeBE16(info, kInfoExport);
  EncodeBE64(info + 2, g.size_bytes);
  EncodeBE16(info + 10, TransmissionFlags(*device));
  VS_RETURN_IF_ERROR(SendOptionReply(option, kRepInfo, info));
  // Block sizes are sent whether asked or not (the protocol allows it); unaligned requests
  // from clients that did not ask are still served (ByteRangeIo).
  uint8_t bs[14];
  EncodeBE16(bs, kInfoBlockSize);
  const uint32_t min = g.logical_block_size;
  const uint32_t preferred = std::max<uint32_t>({g.physical_block_size, min, 512});
  EncodeBE32(bs + 2, min);
  EncodeBE32(bs + 6, preferred);
  EncodeBE32(bs + 10, std::max(options_.max_payload, preferred));
  VS_RETURN_IF_ERROR(SendOptionReply(option, kRepInfo, bs));
  if (std::find(req->items.begin(), req->items.end(), kInfoName) != req->items.end()) {
    const std::string name = req->name.empty() ? exports_.List().front().first : req->name;
    std::vector<uint8_t> body(2 + name.size());
    EncodeBE16(body.data(), kInfoName);
    std::memcpy(body.data() + 2, name.data(), name.size());
    VS_RETURN_IF_ERROR(SendOptionReply(option, kRepInfo, body));
  }
  VS_RETURN_IF_ERROR(SendOptionReply(option, kRepAck));
  if (option == kOptGo) {
    io_ = std::make_shared<ByteRangeIo>(device);
    read_only_ = ReadOnly(*device);
    // A context negotiated for another export does not carry over.
    if (meta_allocation_ && !meta_export_.empty() && meta_export_ != req->name) {
      meta_allocation_ = false;
    }
    *go = true;
  }
  return Status::Ok();
}

Status Connection::HandleMetaContext(uint32_t option, std::span<const uint8_t> data) {
  if (option == kOptSetMetaContext && !structured_) {
    return SendOptionError(option, kRepErrInvalid, "meta contexts need structured replies");
  }
  auto req = DecodeMetaContextRequest(data);
  if (!req.ok()) return SendOptionError(option, kRepErrInvalid, req.status().message());
  if (FindExport(req->name) == nullptr) {
    return SendOptionError(option, kRepErrUnknown, "no export '" + req->name + "'");
  }
  bool match = false;
  for (const auto& q : req->queries) {
    if (q == "base:allocation" || (option == kOptListMetaContext && q == "base:")) match = true;
  }
  if (option == kOptListMetaContext && req->queries.empty()) match = true;
  if (option == kOptSetMetaContext) {
    meta_allocation_ = match;
    meta_export_ = req->name;
  }
  if (match) {
    const std::string ctx = "base:allocation";
    std::vector<uint8_t> body(4 + ctx.size());
    EncodeBE32(body.data(), option == kOptSetMetaContext ? kAllocationContextId : 0);
    std::memcpy(body.data() + 4, ctx.data(), ctx.size());
    VS_RETURN_IF_ERROR(SendOptionReply(option, kRepMetaContext, body));
  }
  return SendOptionReply(option, kRepAck);
}

}  // namespace volstack::exportfs::nbd
