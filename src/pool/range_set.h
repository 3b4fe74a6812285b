// RangeSet: a set of disjoint byte ranges [start, end), merged when adjacent. The pool uses it
// for each vdev's free space, its live (space-map-recorded) extents and per-txg records.
// Not thread-safe: owners lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace volstack::pool {

class RangeSet {
 public:
  // Adds [start, start+len). Returns false (and changes nothing) if it overlaps the set.
  bool Add(uint64_t start, uint64_t len);
  // Removes [start, start+len). Returns false (and changes nothing) unless fully contained.
  bool Remove(uint64_t start, uint64_t len);
  bool Contains(uint64_t start, uint64_t len) const;
  bool Overlaps(uint64_t start, uint64_t len) const;
  // First range of `len` bytes starting at or after `hint` (wrapping to the beginning), whose
  // start is a multiple of `align`. nullopt if none.
  std::optional<uint64_t> FindFit(uint64_t len, uint64_t hint, uint64_t align) const;
  // The range [start, end) that holds `offset`, if any.
  std::optional<std::pair<uint64_t, uint64_t>> RangeAt(uint64_t offset) const;

  uint64_t total() const { return total_; }
  size_t extents() const { return ranges_.size(); }
  bool empty() const { return ranges_.empty(); }
  void Clear() {
    ranges_.clear();
    total_ = 0;
  }
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }  // start -> end

 private:
  std::map<uint64_t, uint64_t> ranges_;
  uint64_t total_ = 0;
};

}  // namespace volstack::pool
