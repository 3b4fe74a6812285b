#include "export/devfs_writeback.h"

#include <fcntl.h>

namespace volstack::exportfs {

DevfsWriteBehind::DevfsWriteBehind() : thread_([this] { Run(); }) {}

DevfsWriteBehind::~DevfsWriteBehind() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DevfsWriteBehind::Kick(const std::shared_ptr<DevfsFile>& file) {
  if (file->writeback_queued.exchange(true, std::memory_order_acq_rel)) return;  // queued
  {
    std::lock_guard lock(mu_);
    queue_.push_back(file);
  }
  cv_.notify_one();
}

uint64_t DevfsWriteBehind::passes() const {
  std::lock_guard lock(mu_);
  return passes_;
}

void DevfsWriteBehind::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::shared_ptr<DevfsFile> file = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Cleared first: a write after this point kicks again, so none is left behind.
    file->writeback_queued.store(false, std::memory_order_release);
    ::sync_file_range(file->page_cache_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    file.reset();
    lock.lock();
    passes_++;
  }
}

}  // namespace volstack::exportfs
