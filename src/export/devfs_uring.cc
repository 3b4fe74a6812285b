// FUSE over io_uring (devfs_transport.h). The protocol, from the kernel's fs/fuse/dev_uring.c:
// after an INIT reply with FUSE_OVER_IO_URING, the kernel holds new requests back until every
// queue (one per possible CPU) has a registered entry, then switches the connection's input
// queue to the ring. A request from CPU n goes to an available entry of queue n, or waits in
// that queue until one is committed. The kernel copies the fuse_in_header into the entry's
// header, the opcode's fixed argument (its first in-argument) into op_in and the rest into
// the payload buffer, with its length in ring_ent_in_out.payload_sz; the reply goes the same
// way back. FORGET, INTERRUPT and notifications stay on /dev/fuse. When the connection ends
// the kernel completes every entry's command with ENOTCONN.
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <sys/sysinfo.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "export/devfs_transport.h"
#include "export/fuse_uring_abi.h"

namespace volstack::exportfs {

namespace {

// How often an idle ring thread looks at stop_: only a fallback, since the end of the
// connection completes every entry at once.
constexpr long kStopCheckMs = 1000;

constexpr unsigned kRingFlags =
    IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;

// 128-byte SQEs for the FUSE command; one issuer, and completions' task work runs only when
// the thread waits (DEFER_TASKRUN: the kernel copies each request into the entry then).
int InitRing(io_uring* ring) {
  io_uring_params p{};
  p.flags = kRingFlags;
  int r = io_uring_queue_init_params(4, ring, &p);
  if (r == -EINVAL) {  // a kernel without DEFER_TASKRUN (before 6.1)
    p = {};
    p.flags = IORING_SETUP_SQE128;
    r = io_uring_queue_init_params(4, ring, &p);
  }
  return r;
}

// Fills the next SQE (never missing: a thread has at most one command in flight in a ring
// of four).
io_uring_sqe* PrepareCmd(io_uring* ring, int fd, uint32_t cmd_op, uint16_t qid,
                         uint64_t commit_id) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) std::abort();
  // A 128-byte SQE: the command area is its second half.
  auto* raw = reinterpret_cast<uint8_t*>(sqe);
  std::memset(raw, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = cmd_op;
  auto* req = reinterpret_cast<abi::FuseUringCmdReq*>(raw + offsetof(io_uring_sqe, cmd));
  req->qid = qid;
  req->commit_id = commit_id;
  return sqe;
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
std::unique_ptr<uint8_t, AlignedFree> AllocAligned(size_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, n) != 0) return nullptr;
  std::memset(p, 0, n);
  return std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(p));
}

__kernel_timespec Millis(long ms) {
  return {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
}

}  // namespace

Status DevfsUringLoop::Probe() {
  io_uring ring;
  const int r = InitRing(&ring);
  if (r < 0) {
    return Status::FromErrno(-r, "io_uring with 128-byte SQEs is unavailable");
  }
  io_uring_queue_exit(&ring);
  return Status::Ok();
}

Result<unsigned> DevfsUringLoop::PossibleCpus() {
  // "0-3" or "0,2-5": the kernel's num_possible_cpus() is the number of CPUs listed.
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string list;
  if (!(in >> list)) return static_cast<unsigned>(get_nprocs_conf());
  unsigned count = 0;
  std::stringstream ss(list);
  std::string range;
  while (std::getline(ss, range, ',')) {
    unsigned a = 0, b = 0;
    if (std::sscanf(range.c_str(), "%u-%u", &a, &b) == 2 && b >= a) {
      count += b - a + 1;
    } else if (std::sscanf(range.c_str(), "%u", &a) == 1) {
      count++;
    } else {
      return Status::Corruption("cannot parse /sys/devices/system/cpu/possible: " + list);
    }
  }
  if (count == 0 || count > 65535) return Status::Corruption("possible CPUs: " + list);
  return count;
}

DevfsUringLoop::~DevfsUringLoop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t->thread.joinable()) t->thread.join();
  }
}

// Registration order matters. The kernel switches the connection to the ring as soon as
// every queue has an entry, and a refused REGISTER (the only way to make it give up on the
// ring) clears the connection's io_uring state without undoing that switch; after it, every
// COMMIT_AND_FETCH is refused too unless the module parameter is on. So the entry that
// completes the ring goes last: first every entry of queues 1..n-1 (phase 0), then one entry
// of queue 0 (phase 1, the gate), and only then queue 0's others (phase 2). A failure before
// the gate leaves the ring incomplete and the kernel serving /dev/fuse; a failure after it
// only means fewer entries.
Status DevfsUringLoop::Start() {
  auto cpus = PossibleCpus();
  if (!cpus.ok()) {
    ForceFallback();
    return cpus.status();
  }
  const unsigned per_queue =
      threads_per_queue_ != 0 ? threads_per_queue_ : std::max(total_threads_ / *cpus, 1u);
  size_t in_phase[3] = {0, 0, 0};
  for (unsigned q = 0; q < *cpus; q++) {
    for (unsigned i = 0; i < per_queue; i++) {
      auto t = std::make_unique<Thread>();
      t->qid = static_cast<uint16_t>(q);
      t->phase = q != 0 ? 0 : (i == 0 ? 1 : 2);
      t->refuse = refuse_first_entry_ && q == *cpus - 1 && i == 0;
      in_phase[t->phase]++;
      threads_.push_back(std::move(t));
    }
  }
  for (auto& t : threads_) {
    Thread* raw = t.get();
    raw->thread = std::thread([this, raw] { Serve(*raw); });
  }
  std::unique_lock lock(mu_);
  for (int phase = 0; phase < 3; phase++) {
    open_phase_ = phase;
    cv_.notify_all();
    const bool all = cv_.wait_for(lock, std::chrono::seconds(10),
                                  [&] { return reported_[phase] == in_phase[phase]; });
    Status s = first_error_[phase];
    if (s.ok() && !all) s = Status::FromErrno(ETIMEDOUT, "ring threads did not register in 10 s");
    if (s.ok()) continue;
    if (phase == 2) {
      // The ring is complete and serving; this queue just has fewer entries.
      std::fprintf(stderr, "volstack: devfs: %s\n", s.ToString().c_str());
      break;
    }
    abort_ = true;  // threads still waiting for their turn register nothing
    cv_.notify_all();
    lock.unlock();
    ForceFallback();
    return s;
  }
  return Status::Ok();
}

bool DevfsUringLoop::WaitTurn(int phase) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return abort_ || open_phase_ >= phase; });
  return !abort_;
}

void DevfsUringLoop::Report(int phase, Status status) {
  std::lock_guard lock(mu_);
  if (!status.ok() && first_error_[phase].ok()) first_error_[phase] = std::move(status);
  reported_[phase]++;
  cv_.notify_all();
}

void DevfsUringLoop::ForceFallback() {
  io_uring ring;
  if (InitRing(&ring) < 0) return;
  PrepareCmd(&ring, session_fd_, abi::kFuseIoUringCmdRegister, 0xffff, 0);
  io_uring_submit(&ring);
  io_uring_cqe* cqe = nullptr;
  __kernel_timespec ts = Millis(1000);
  if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0) io_uring_cqe_seen(&ring, cqe);
  io_uring_queue_exit(&ring);
}

void DevfsUringLoop::Serve(Thread& t) {
  io_uring ring;
  const int r = InitRing(&ring);
  if (r < 0) {
    Report(t.phase, Status::FromErrno(-r, "io_uring_queue_init"));
    return;
  }
  if (pin_) {
    // Serve on the queue's CPU: the requests were issued there and its caches hold their
    // data. Best effort (an offline CPU or a narrower affinity mask).
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(t.qid, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }

  auto header_buf = AllocAligned(sizeof(abi::FuseUringReqHeader));
  auto payload = AllocAligned(payload_size_);
  if (header_buf == nullptr || payload == nullptr) {
    Report(t.phase, Status::FromErrno(ENOMEM, "ring entry buffers"));
    io_uring_queue_exit(&ring);
    return;
  }
  auto* header = reinterpret_cast<abi::FuseUringReqHeader*>(header_buf.get());
  if (!WaitTurn(t.phase)) {
    io_uring_queue_exit(&ring);
    return;
  }
  const bool refuse = t.refuse;
  iovec iov[2] = {{header, sizeof(*header)}, {payload.get(), refuse ? 4096 : payload_size_}};
  io_uring_sqe* sqe = PrepareCmd(&ring, session_fd_, abi::kFuseIoUringCmdRegister, t.qid, 0);
  sqe->addr = reinterpret_cast<uint64_t>(iov);
  sqe->len = 2;
  int sr = io_uring_submit(&ring);
  // A refused REGISTER completes at once; an accepted one only when a request arrives.
  io_uring_cqe* cqe = nullptr;
  __kernel_timespec first_wait = Millis(10);
  if (sr >= 0) {
    const int w = io_uring_wait_cqe_timeout(&ring, &cqe, &first_wait);
    if (w < 0) cqe = nullptr;
  }
  if (sr < 0 || (cqe != nullptr && cqe->res < 0)) {
    const int err = sr < 0 ? -sr : -cqe->res;
    Report(t.phase,
           Status::FromErrno(err, "FUSE_IO_URING_CMD_REGISTER on queue " + std::to_string(t.qid)));
    io_uring_queue_exit(&ring);
    return;
  }
  Report(t.phase, Status::Ok());

  const std::span<uint8_t> out(payload.get(), payload_size_);
  while (true) {
    if (cqe == nullptr) {
      __kernel_timespec ts = Millis(kStopCheckMs);
      const int w = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
      if (w == -ETIME || w == -EINTR) {
        cqe = nullptr;
        if (stop_) break;
        continue;
      }
      if (w < 0) break;
    }
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    cqe = nullptr;
    if (res < 0) {
      // ENOTCONN / ECONNABORTED: the connection ended; anything else ends this entry too.
      if (res != -ENOTCONN && res != -ECONNABORTED && res != -ECANCELED) {
        std::fprintf(stderr, "volstack: devfs: FUSE ring queue %u: %s\n", t.qid,
                     std::strerror(-res));
      }
      break;
    }
    fuse_in_header in;
    std::memcpy(&in, header->in_out, sizeof(in));
    const abi::FuseUringEntInOut ent = header->ring_ent_in_out;
    FuseRequest req;
    req.in = &in;
    req.arg = header->op_in;
    req.arg_len = sizeof(header->op_in);
    req.data = payload.get();
    req.data_len = std::min<size_t>(ent.payload_sz, payload_size_);
    FuseReply reply = fs_.Dispatch(req, out);
    if (reply.none) reply = FuseReply{.error = ENOSYS};  // every ring request wants a reply
    fuse_out_header oh{};
    oh.unique = in.unique;
    oh.error = -reply.error;
    const size_t size = reply.error == 0 ? reply.size : 0;
    oh.len = static_cast<uint32_t>(sizeof(oh) + size);
    std::memcpy(header->in_out, &oh, sizeof(oh));
    header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(size);
    PrepareCmd(&ring, session_fd_, abi::kFuseIoUringCmdCommitAndFetch, t.qid, ent.commit_id);
    // The reply and the wait for the next request in one io_uring_enter.
    __kernel_timespec ts = Millis(kStopCheckMs);
    const int w = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
    if (w < 0) {
      cqe = nullptr;
      if (w != -ETIME && w != -EINTR) break;
      if (stop_) break;
    }
  }
  io_uring_queue_exit(&ring);
}

}  // namespace volstack::exportfs
