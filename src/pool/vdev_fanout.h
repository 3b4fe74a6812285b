// Vdev::Fanout: the helper threads a top-level vdev runs its children's I/O on (vdev.cc,
// vdev_raidz.cc). Internal to the vdev.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/vdev.h"

namespace volstack::pool {

// Runs jobs on threads of their own, one per child, so a mirror's write reaches every
// child at once instead of one after the other. A job per child at a time: the caller
// waits for all before it returns.
class Vdev::Fanout {
 public:
  // Runs fn(i) for i in [0, n): i = 0 on the calling thread, the others on helpers.
  void Run(size_t n, const std::function<void(size_t)>& fn) {
    if (n <= 1) {
      if (n == 1) fn(0);
      return;
    }
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      size_t left;
    };
    auto done = std::make_shared<Done>();
    done->left = n - 1;
    std::vector<Worker*> workers;
    {
      std::lock_guard l(mu_);
      while (workers_.size() < n - 1) workers_.push_back(std::make_unique<Worker>());
      for (size_t i = 0; i + 1 < n; i++) workers.push_back(workers_[i].get());
    }
    for (size_t i = 1; i < n; i++) {
      workers[i - 1]->Post([&fn, i, done] {
        fn(i);
        std::lock_guard l(done->mu);
        if (--done->left == 0) done->cv.notify_all();
      });
    }
    fn(0);
    std::unique_lock l(done->mu);
    done->cv.wait(l, [&] { return done->left == 0; });
  }

 private:
  class Worker {
   public:
    Worker() : thread_([this] { Loop(); }) {}
    ~Worker() {
      {
        std::lock_guard l(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    void Post(std::function<void()> job) {
      {
        std::lock_guard l(mu_);
        jobs_.push_back(std::move(job));
      }
      cv_.notify_one();
    }

   private:
    void Loop() {
      std::unique_lock l(mu_);
      while (true) {
        cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        l.unlock();
        job();
        l.lock();
      }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;  // GUARDED_BY(mu_)
    bool stop_ = false;                       // GUARDED_BY(mu_)
    std::thread thread_;
  };
  // Workers are only added, under mu_; concurrent Runs share them (each job is short).
  std::mutex mu_;
  std::deque<std::unique_ptr<Worker>> workers_;  // GUARDED_BY(mu_)
};

}  // namespace volstack::pool
