// EarlyFlusher: flushes a vdev in the background once enough data has been written to it
// since its last flush, so the flush a txg commit makes before its uberblock finds little
// left to drain.
//
// Why. On the disks this project is measured on (a VM's virtual disk over a host cache),
// writes complete into a volatile cache at once and a flush then drains that cache at a
// fixed rate, about 0.5 ms a MiB, however long the data has waited: a flush after 16 MiB
// took 8 ms even 20 ms after the writes (docs/notes/commit-path.md). So a commit that
// writes its data and only then flushes pays the whole drain after all its writes. Flushing
// in the background, as the early writer's runs and the commit's own runs go out, moves
// most of the drain under those writes: pool_bench SeqWrite64K went from 0.75-0.77 to
// 0.85-0.89 of raw on written files and from 0.71-0.74 to 0.77-0.83 on sparse ones
// (medians of 7).
//
// Safety. A flush only makes writes durable sooner: the data of the txg being written
// (which only that txg's tree will name, or which a failed commit leaves in free space),
// never a change to anything an older uberblock needs. The commit still flushes before its
// uberblock, so the order import relies on is unchanged. What a failed early flush means is
// the caller's to decide (`flush` sees it): the pool suspends itself (PoolImpl::EarlyFlush),
// and a commit waits for the early flush in flight (WaitIdle) before it trusts its own
// flush, since a vdev that lost writes must not have a flush that overlapped the failing
// one taken as proof that they are durable.
//
// Threads: NoteWritten and NoteFlushed are thread-safe and never block on I/O; one thread
// of the flusher's own calls `flush`, one vdev at a time, at most one early flush in
// flight. The destructor stops and joins it (an early flush in flight ends first).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace volstack::pool {

class EarlyFlusher {
 public:
  // Flushes one vdev and deals with a failure; runs on the flusher's thread.
  using FlushFn = std::function<void(uint32_t vdev)>;

  // `threshold`: the bytes written to a vdev since its last flush that start an early
  // flush of it (> 0).
  EarlyFlusher(size_t vdevs, uint64_t threshold, FlushFn flush);
  ~EarlyFlusher();
  EarlyFlusher(const EarlyFlusher&) = delete;
  EarlyFlusher& operator=(const EarlyFlusher&) = delete;

  // `bytes` of data were written to `vdev` (the write has returned).
  void NoteWritten(uint32_t vdev, uint64_t bytes);
  // A flush of `vdev` is starting elsewhere (the commit's): it covers everything written
  // so far, so an early flush of it that has not started yet is dropped.
  void NoteFlushed(uint32_t vdev);
  // Returns once no early flush is in flight.
  void WaitIdle();
  uint64_t flushes() const;                 // early flushes made
  uint64_t unflushed(uint32_t vdev) const;  // bytes noted since the vdev's last flush

 private:
  void Run();

  const uint64_t threshold_;
  const FlushFn flush_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> unflushed_;  // GUARDED_BY(mu_): per vdev, bytes since its flush
  std::vector<bool> wanted_;         // GUARDED_BY(mu_): per vdev, an early flush is due
  int64_t in_flight_ = -1;           // GUARDED_BY(mu_): the vdev being flushed, or -1
  std::condition_variable idle_;     // in_flight_ went back to -1
  bool stop_ = false;                // GUARDED_BY(mu_)
  uint64_t flushes_ = 0;             // GUARDED_BY(mu_)
  std::thread thread_;               // started last
};

}  // namespace volstack::pool
