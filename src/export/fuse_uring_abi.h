// The parts of the FUSE kernel ABI that Debian 12's <linux/fuse.h> (protocol 7.38) is too old
// to declare: FUSE over io_uring (protocol 7.42, Linux 6.14) and the INIT bit that asks for
// it. Values and layouts are those of the kernel's include/uapi/linux/fuse.h (7.42+); the
// ring protocol they serve is fs/fuse/dev_uring.c. Everything else comes from <linux/fuse.h>.
#pragma once

#include <linux/fuse.h>

#include <cstdint>

namespace volstack::exportfs::abi {

// INIT flag (bits 32..63 travel in flags2): the server takes requests through io_uring.
inline constexpr uint64_t kFuseOverIoUring = 1ull << 41;
// FOPEN flag (7.37): direct writes to one inode may run in parallel (no inode lock).
inline constexpr uint32_t kFopenParallelDirectWrites = 1u << 6;

// IORING_OP_URING_CMD sub-commands on a /dev/fuse fd, from a ring set up with 128-byte SQEs.
// REGISTER hands the kernel one ring entry (two iovecs: its headers and its payload buffer)
// for a queue; the command completes when a request is in the entry. COMMIT_AND_FETCH
// carries the reply to that request and hands the entry back for the next one.
inline constexpr uint32_t kFuseIoUringCmdRegister = 1;
inline constexpr uint32_t kFuseIoUringCmdCommitAndFetch = 2;

inline constexpr size_t kFuseUringInOutHeaderSize = 128;
inline constexpr size_t kFuseUringOpInOutSize = 128;

// struct fuse_uring_ent_in_out
struct FuseUringEntInOut {
  uint64_t flags;
  // The request's unique id: the COMMIT_AND_FETCH of its reply names it.
  uint64_t commit_id;
  // Bytes of payload in the payload buffer: the request's (kernel to server) or the
  // reply's (server to kernel).
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
static_assert(sizeof(FuseUringEntInOut) == 32);

// struct fuse_uring_req_header: the first iovec of a ring entry.
struct FuseUringReqHeader {
  // fuse_in_header on the way in, fuse_out_header on the way out.
  uint8_t in_out[kFuseUringInOutHeaderSize];
  // The opcode's fixed argument (fuse_write_in, ...); everything after it is in the payload.
  uint8_t op_in[kFuseUringOpInOutSize];
  FuseUringEntInOut ring_ent_in_out;
};
static_assert(sizeof(FuseUringReqHeader) == 288);

// struct fuse_uring_cmd_req: in the SQE's command area (the second 64 bytes of a 128-byte
// SQE).
struct FuseUringCmdReq {
  uint64_t flags;
  // COMMIT_AND_FETCH: the commit_id of the request answered.
  uint64_t commit_id;
  // The queue: one per possible CPU; the kernel queues a request on its submitter's CPU.
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(FuseUringCmdReq) == 24);

}  // namespace volstack::exportfs::abi
