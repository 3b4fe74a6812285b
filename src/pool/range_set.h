// RangeSet: a set of disjoint byte ranges [start, end), merged when adjacent. The pool uses it
// for each vdev's free space, its live (space-map-recorded) extents and per-txg records.
// Not thread-safe: owners lock.
//
// With a run unit (the pool's free sets: kIndirectBlockSize), the set also keeps what an
// allocator of blocks of that size needs to know once small frees have cut the space into
// holes: how many bytes the runs hold in whole units (unit_bytes), and an index of the runs
// shorter than a unit, which only smaller blocks can use (FindFitInShortRun).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace volstack::pool {

class RangeSet {
 public:
  explicit RangeSet(uint64_t run_unit = 0) : unit_(run_unit) {}

  // Adds [start, start+len). Returns false (and changes nothing) if it overlaps the set.
  bool Add(uint64_t start, uint64_t len);
  // Removes [start, start+len). Returns false (and changes nothing) unless fully contained.
  bool Remove(uint64_t start, uint64_t len);
  bool Contains(uint64_t start, uint64_t len) const;
  bool Overlaps(uint64_t start, uint64_t len) const;
  // First range of `len` bytes starting at or after `hint` (wrapping to the beginning), whose
  // start is a multiple of `align`. nullopt if none.
  std::optional<uint64_t> FindFit(uint64_t len, uint64_t hint, uint64_t align) const;
  // As FindFit, among the runs shorter than the run unit only (nullopt without a unit).
  std::optional<uint64_t> FindFitInShortRun(uint64_t len, uint64_t hint, uint64_t align) const;
  // The sum over runs of their length rounded down to the run unit (0 without a unit):
  // room for that many bytes of unit-sized blocks, however the rest is cut up.
  uint64_t unit_bytes() const { return unit_bytes_; }
  // The range [start, end) that holds `offset`, if any.
  std::optional<std::pair<uint64_t, uint64_t>> RangeAt(uint64_t offset) const;

  uint64_t total() const { return total_; }
  size_t extents() const { return ranges_.size(); }
  bool empty() const { return ranges_.empty(); }
  void Clear() {
    ranges_.clear();
    short_runs_.clear();
    total_ = unit_bytes_ = 0;
  }
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }  // start -> end

 private:
  using Runs = std::map<uint64_t, uint64_t>;
  // Every change of ranges_ goes through these two, which keep the unit's accounting.
  void InsertRun(uint64_t start, uint64_t end);
  Runs::iterator EraseRun(Runs::iterator it);

  Runs ranges_;
  uint64_t total_ = 0;
  uint64_t unit_ = 0;
  uint64_t unit_bytes_ = 0;
  std::set<uint64_t> short_runs_;  // starts of the runs shorter than unit_
};

}  // namespace volstack::pool
