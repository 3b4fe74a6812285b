// The NBD transmission phase: see nbd_server.cc for the theory.
#include "export/nbd/nbd_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "export/nbd/nbd_socket.h"
#include "util/coding.h"

namespace volstack::exportfs::nbd {

namespace {
// Extents per BLOCK_STATUS reply (the protocol allows 2^20; clients ask again for more).
constexpr size_t kMaxExtents = 8192;
// A WRITE larger than the advertised maximum is drained (up to this) and refused; beyond it
// the client is dropped.
constexpr uint64_t kMaxDrain = 64ull << 20;
}  // namespace

Connection::~Connection() { ::close(fd_); }

void Connection::Shutdown() {
  closing_by_server_ = true;
  closing_ = true;
  ::shutdown(fd_, SHUT_RDWR);
}

void Connection::Run() {
  RunPhases();
  if (tls_session_ != nullptr && !closing_by_server_) tls_session_->Bye();
  // The client sees EOF now, not when the server reaps this connection.
  ::shutdown(fd_, SHUT_RDWR);
}

void Connection::RunPhases() {
  auto go = Handshake();
  if (!go.ok() || !*go || closing_) return;
  const unsigned extra = std::max(1u, options_.threads_per_connection) - 1;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < extra; i++) threads.emplace_back([this] { ServeRequests(); });
  ServeRequests();
  for (auto& t : threads) t.join();
}

// Each thread reads one request (holding read_mu_, so requests come off the socket whole and
// in order), then executes it and replies (holding write_mu_ only while sending). No queue,
// no hand-off: up to threads_per_connection requests are in service at once.
void Connection::ServeRequests() {
  std::vector<uint8_t> buf;
  for (;;) {
    Request req;
    {
      std::lock_guard lock(read_mu_);
      if (closing_) return;
      uint8_t h[kRequestSize];
      if (!reader_.ReadFully(h).ok()) {
        closing_ = true;  // the client is gone: in-flight replies will fail harmlessly
        return;
      }
      auto decoded = DecodeRequest(std::span<const uint8_t, kRequestSize>(h));
      if (!decoded.ok()) {  // out of sync: nothing later can be trusted
        closing_ = true;
        ::shutdown(fd_, SHUT_RD);
        return;
      }
      req = *decoded;
      if (req.type == kCmdDisc) {
        // Requests already read finish and reply; then the socket closes.
        closing_ = true;
        ::shutdown(fd_, SHUT_RD);
        return;
      }
      if (req.type == kCmdWrite) {
        if (req.length > options_.max_payload) {
          if (req.length > kMaxDrain || !reader_.Discard(req.length).ok()) {
            closing_ = true;
            ::shutdown(fd_, SHUT_RD);
            return;
          }
          buf.clear();
        } else {
          buf.resize(req.length);
          if (!reader_.ReadFully(buf).ok()) {
            closing_ = true;
            return;
          }
        }
      }
    }
    Execute(req, buf);
    if (buf.capacity() > (4u << 20)) std::vector<uint8_t>().swap(buf);  // no 32 MiB hoards
  }
}

Status Connection::CheckRequest(const Request& req) const {
  static constexpr uint16_t kAllowed[] = {
      /*READ*/ kCmdFlagDf,
      /*WRITE*/ kCmdFlagFua,
      /*DISC*/ 0,
      /*FLUSH*/ 0,
      /*TRIM*/ kCmdFlagFua,
      /*CACHE*/ 0,
      /*WRITE_ZEROES*/ kCmdFlagFua | kCmdFlagNoHole | kCmdFlagFastZero,
      /*BLOCK_STATUS*/ kCmdFlagReqOne,
  };
  if (req.type > kCmdBlockStatus || req.type == kCmdCache) {
    return Status::InvalidArgument("unknown command " + std::to_string(req.type));
  }
  if (req.flags & ~kAllowed[req.type]) {
    return Status::InvalidArgument("bad flags for command " + std::to_string(req.type));
  }
  const bool mutation =
      req.type == kCmdWrite || req.type == kCmdTrim || req.type == kCmdWriteZeroes;
  if (mutation && read_only_) return Status::FromErrno(EPERM, "read-only export");
  if (req.type == kCmdFlush) return Status::Ok();
  if ((req.type == kCmdRead || req.type == kCmdWrite) && req.length > options_.max_payload) {
    return Status::InvalidArgument("request larger than the maximum payload");
  }
  if (req.type == kCmdBlockStatus && !meta_allocation_) {
    return Status::InvalidArgument("BLOCK_STATUS without a negotiated meta context");
  }
  const uint64_t size = io_->size();
  if (req.offset > size || req.length > size - req.offset) {
    if (req.type == kCmdWrite || req.type == kCmdWriteZeroes) {
      return Status::NoSpace("request beyond the end of the export");
    }
    return Status::InvalidArgument("request beyond the end of the export");
  }
  return Status::Ok();
}

void Connection::Execute(const Request& req, std::vector<uint8_t>& buf) {
  Status s = CheckRequest(req);
  if (!s.ok()) {
    ReplyError(req, s);
    return;
  }
  const bool fua = req.flags & kCmdFlagFua;
  switch (req.type) {
    case kCmdRead: {
      buf.resize(req.length);
      auto n = io_->Read(req.offset, buf);
      if (!n.ok()) {
        ReplyError(req, n.status());
        return;
      }
      ReplyRead(req.cookie, req.offset, std::span(buf.data(), *n));
      return;
    }
    case kCmdWrite:
      s = io_->Write(req.offset, buf, fua);
      break;
    case kCmdFlush:
      s = io_->Flush();
      break;
    case kCmdTrim:
      s = io_->Discard(req.offset, req.length);
      if (s.ok() && fua) s = io_->Flush();
      break;
    case kCmdWriteZeroes:
      if ((req.flags & kCmdFlagFastZero) && !io_->device()->geometry().caps.write_zeroes) {
        s = Status::NotSupported("zeroing is not fast on this export");
        break;
      }
      s = io_->WriteZeroes(req.offset, req.length, !(req.flags & kCmdFlagNoHole), fua);
      break;
    case kCmdBlockStatus:
      ReplyBlockStatus(req);
      return;
  }
  if (!s.ok()) {
    ReplyError(req, s);
  } else {
    ReplySimple(req.cookie, 0);
  }
}

void Connection::Send(struct iovec* iov, int count) {
  std::lock_guard lock(write_mu_);
  if (!transport_.Send(iov, count).ok()) {
    closing_ = true;  // the client vanished; the reader sees it too
    ::shutdown(fd_, SHUT_RDWR);
  }
}

void Connection::ReplySimple(uint64_t cookie, uint32_t error, std::span<const uint8_t> data) {
  uint8_t h[kSimpleReplySize];
  EncodeSimpleReply(std::span<uint8_t, kSimpleReplySize>(h), error, cookie);
  iovec iov[2] = {{h, sizeof(h)}, {const_cast<uint8_t*>(data.data()), data.size()}};
  Send(iov, data.empty() ? 1 : 2);
}

void Connection::ReplyRead(uint64_t cookie, uint64_t offset, std::span<const uint8_t> data) {
  if (!structured_) {
    ReplySimple(cookie, 0, data);
    return;
  }
  uint8_t h[kChunkHeaderSize + 8];
  EncodeChunkHeader(std::span<uint8_t, kChunkHeaderSize>(h, kChunkHeaderSize), kChunkFlagDone,
                    kChunkOffsetData, cookie, static_cast<uint32_t>(8 + data.size()));
  EncodeBE64(h + kChunkHeaderSize, offset);
  iovec iov[2] = {{h, sizeof(h)}, {const_cast<uint8_t*>(data.data()), data.size()}};
  Send(iov, 2);
}

void Connection::ReplyError(const Request& req, const Status& status) {
  const uint32_t err = WireError(status);
  if (!structured_ || (req.type != kCmdRead && req.type != kCmdBlockStatus)) {
    ReplySimple(req.cookie, err);
    return;
  }
  const std::string& msg = status.message();
  const uint16_t msg_len = static_cast<uint16_t>(std::min<size_t>(msg.size(), 4096));
  uint8_t h[kChunkHeaderSize + 6];
  EncodeChunkHeader(std::span<uint8_t, kChunkHeaderSize>(h, kChunkHeaderSize), kChunkFlagDone,
                    kChunkError, req.cookie, 6u + msg_len);
  EncodeBE32(h + kChunkHeaderSize, err);
  EncodeBE16(h + kChunkHeaderSize + 4, msg_len);
  iovec iov[2] = {{h, sizeof(h)}, {const_cast<char*>(msg.data()), msg_len}};
  Send(iov, msg_len == 0 ? 1 : 2);
}

void Connection::ReplyBlockStatus(const Request& req) {
  auto map = io_->device()->QueryAllocation(req.offset, req.length);
  // An unaligned request maps the enclosing blocks (the base clips to the device).
  if (!map.ok() && map.status().code() == EINVAL) {
    const uint64_t lbs = io_->device()->logical_block_size();
    const uint64_t start = req.offset - req.offset % lbs;
    const uint64_t end = std::min(io_->size(), (req.offset + req.length + lbs - 1) / lbs * lbs);
    map = io_->device()->QueryAllocation(start, end - start);
  }
  if (!map.ok()) {
    ReplyError(req, map.status());
    return;
  }
  std::vector<uint8_t> body(4);
  EncodeBE32(body.data(), kAllocationContextId);
  const uint64_t end = req.offset + req.length;
  for (const auto& e : *map) {
    const uint64_t s = std::max(e.offset, req.offset);
    const uint64_t t = std::min(e.offset + e.length, end);
    if (t <= s) continue;
    // Extents are u32 lengths: split long runs.
    for (uint64_t pos = s; pos < t;) {
      const uint64_t len = std::min<uint64_t>(t - pos, 0xfffff000u);
      const size_t at = body.size();
      body.resize(at + 8);
      EncodeBE32(body.data() + at, static_cast<uint32_t>(len));
      EncodeBE32(body.data() + at + 4, e.allocated ? 0 : (kStateHole | kStateZero));
      pos += len;
      if ((req.flags & kCmdFlagReqOne) || (body.size() - 4) / 8 >= kMaxExtents) break;
    }
    if ((req.flags & kCmdFlagReqOne) || (body.size() - 4) / 8 >= kMaxExtents) break;
  }
  uint8_t h[kChunkHeaderSize];
  EncodeChunkHeader(std::span<uint8_t, kChunkHeaderSize>(h), kChunkFlagDone, kChunkBlockStatus,
                    req.cookie, static_cast<uint32_t>(body.size()));
  iovec iov[2] = {{h, sizeof(h)}, {body.data(), body.size()}};
  Send(iov, 2);
}

}  // namespace volstack::exportfs::nbd
