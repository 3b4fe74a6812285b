#include "bdev/sync_error_latch.h"

namespace volstack::bdev {

Status SyncErrorLatch::Run(const std::function<Status()>& call, const std::string& what) {
  auto earlier_failure = [&] {
    return first_error_.WithContext(
        what +
        ": an earlier flush failed, so what it covered may be lost; no flush succeeds "
        "until the device is opened again");
  };
  uint64_t ticket;
  {
    std::lock_guard l(mu_);
    if (!first_error_.ok()) return earlier_failure();
    ticket = next_ticket_++;
    running_.insert(ticket);
  }
  Status st = call();
  std::unique_lock l(mu_);
  running_.erase(ticket);
  ended_.notify_all();
  if (!st.ok()) {
    if (first_error_.ok()) first_error_ = st;
    return st;
  }
  // Calls with a smaller ticket than any handed out by now started before this one ended.
  const uint64_t ended_before = next_ticket_;
  ended_.wait(l, [&] { return running_.empty() || *running_.begin() >= ended_before; });
  if (!first_error_.ok()) return earlier_failure();
  return Status::Ok();
}

}  // namespace volstack::bdev
