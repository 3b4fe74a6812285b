// VdevTable: an open pool's top-level vdevs by id (a DVA's vdev), which zpool add appends
// to while I/O on any thread, status and the scans index and walk it.
//
// The slots are allocated once, for the most vdevs a pool may have, so a slot never moves.
// A new vdev is stored into its slot and then published by a release store of the count;
// a reader loads the count with acquire, so every vdev below it is fully built and seen
// as built. A vdev is never removed or replaced while the pool is open (a child leaves a
// mirror inside its Vdev), so a reference taken stays valid until the pool is destroyed.
//
// Threads: any number of readers at any time. Appends are serialised by the caller (the
// pool appends before it is shared, at create and import, and then only under sync_mu in
// zpool add). A reader that iterates sees the vdevs published when it began; an id it
// got from a DVA is below the count once the block it names was allocated, since the
// allocation happened under sync_mu after the append.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pool/vdev.h"
#include "util/check.h"

namespace volstack::pool {

class VdevTable {
 public:
  explicit VdevTable(size_t capacity)
      : capacity_(capacity), slots_(std::make_unique<std::unique_ptr<Vdev>[]>(capacity)) {}
  VdevTable(const VdevTable&) = delete;
  VdevTable& operator=(const VdevTable&) = delete;

  size_t size() const { return count_.load(std::memory_order_acquire); }
  bool empty() const { return size() == 0; }
  size_t capacity() const { return capacity_; }
  // Requires i < size() (as seen by this thread).
  const std::unique_ptr<Vdev>& operator[](size_t i) const {
    VS_DCHECK_OP(i, <, size());
    return slots_[i];
  }
  // The vdevs published when begin() or end() is called (a range-for calls each once).
  const std::unique_ptr<Vdev>* begin() const { return slots_.get(); }
  const std::unique_ptr<Vdev>* end() const { return slots_.get() + size(); }

  // Appends and publishes `v` (id size()). Callers serialise appends (see the top);
  // requires size() < capacity() and v non-null.
  void push_back(std::unique_ptr<Vdev> v) {
    const size_t n = count_.load(std::memory_order_relaxed);
    VS_CHECK_OP(n, <, capacity_);
    VS_CHECK(v != nullptr);
    slots_[n] = std::move(v);
    count_.store(n + 1, std::memory_order_release);
  }

  // The published vdevs' guids by id (the labels' vdev_guids).
  std::vector<uint64_t> guids() const {
    std::vector<uint64_t> out;
    for (const auto& v : *this) out.push_back(v->guid());
    return out;
  }

 private:
  const size_t capacity_;
  const std::unique_ptr<std::unique_ptr<Vdev>[]> slots_;
  std::atomic<size_t> count_{0};
};

}  // namespace volstack::pool
