#include "bench/cancel.h"

#include <signal.h>

#include <atomic>
#include <cerrno>

namespace volstack::bench {

namespace {

std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free);

struct sigaction g_old_int;
struct sigaction g_old_term;

extern "C" void OnSignal(int) { g_cancel.store(true, std::memory_order_relaxed); }

}  // namespace

ScopedCancelOnSignal::ScopedCancelOnSignal() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll/wait returns EINTR and sees the flag
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

ScopedCancelOnSignal::~ScopedCancelOnSignal() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool CancelRequested() { return g_cancel.load(std::memory_order_relaxed); }
void RequestCancel() { g_cancel.store(true, std::memory_order_relaxed); }
void ResetCancel() { g_cancel.store(false, std::memory_order_relaxed); }

Status CheckCancelled() {
  if (CancelRequested()) return Status::FromErrno(ECANCELED, "interrupted");
  return Status::Ok();
}

}  // namespace volstack::bench
