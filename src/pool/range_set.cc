#include "pool/range_set.h"

#include <iterator>

namespace volstack::pool {

bool RangeSet::Overlaps(uint64_t start, uint64_t len) const {
  if (len == 0) return false;
  const uint64_t end = start + len;
  auto it = ranges_.lower_bound(start);
  if (it != ranges_.end() && it->first < end) return true;
  if (it != ranges_.begin()) {
    --it;
    if (it->second > start) return true;
  }
  return false;
}

bool RangeSet::Contains(uint64_t start, uint64_t len) const {
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  return it->first <= start && it->second >= start + len;
}

void RangeSet::InsertRun(uint64_t start, uint64_t end) {
  ranges_.emplace(start, end);
  if (unit_ == 0) return;
  const uint64_t len = end - start;
  unit_bytes_ += len / unit_ * unit_;
  if (len < unit_) short_runs_.insert(start);
}

RangeSet::Runs::iterator RangeSet::EraseRun(Runs::iterator it) {
  if (unit_ != 0) {
    const uint64_t len = it->second - it->first;
    unit_bytes_ -= len / unit_ * unit_;
    if (len < unit_) short_runs_.erase(it->first);
  }
  return ranges_.erase(it);
}

bool RangeSet::Add(uint64_t start, uint64_t len) {
  if (len == 0) return true;
  if (Overlaps(start, len)) return false;
  uint64_t s = start, e = start + len;
  auto next = ranges_.lower_bound(s);
  if (next != ranges_.end() && next->first == e) {
    e = next->second;
    next = EraseRun(next);
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == s) {
      s = prev->first;
      EraseRun(prev);
    }
  }
  InsertRun(s, e);
  total_ += len;
  return true;
}

bool RangeSet::Remove(uint64_t start, uint64_t len) {
  if (len == 0) return true;
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  const uint64_t s = it->first, e = it->second, end = start + len;
  if (s > start || e < end) return false;
  EraseRun(it);
  if (s < start) InsertRun(s, start);
  if (end < e) InsertRun(end, e);
  total_ -= len;
  return true;
}

std::optional<uint64_t> RangeSet::FindFit(uint64_t len, uint64_t hint, uint64_t align) const {
  auto fits = [&](uint64_t s, uint64_t e, uint64_t from) -> std::optional<uint64_t> {
    uint64_t a = s < from ? from : s;
    a = (a + align - 1) / align * align;
    if (a < e && e - a >= len) return a;
    return std::nullopt;
  };
  auto it = ranges_.upper_bound(hint);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (auto r = fits(prev->first, prev->second, hint)) return r;
  }
  for (auto i = it; i != ranges_.end(); ++i) {
    if (auto r = fits(i->first, i->second, 0)) return r;
  }
  for (auto i = ranges_.begin(); i != it; ++i) {
    if (auto r = fits(i->first, i->second, 0)) return r;
  }
  return std::nullopt;
}

std::optional<uint64_t> RangeSet::FindFitInShortRun(uint64_t len, uint64_t hint,
                                                    uint64_t align) const {
  auto fits = [&](uint64_t s) -> std::optional<uint64_t> {
    const uint64_t e = ranges_.at(s);
    const uint64_t a = (s + align - 1) / align * align;
    if (a < e && e - a >= len) return a;
    return std::nullopt;
  };
  const auto from = short_runs_.lower_bound(hint);
  for (auto i = from; i != short_runs_.end(); ++i) {
    if (auto r = fits(*i)) return r;
  }
  for (auto i = short_runs_.begin(); i != from; ++i) {
    if (auto r = fits(*i)) return r;
  }
  return std::nullopt;
}

std::optional<std::pair<uint64_t, uint64_t>> RangeSet::RangeAt(uint64_t offset) const {
  auto it = ranges_.upper_bound(offset);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (offset >= it->second) return std::nullopt;
  return *it;
}

}  // namespace volstack::pool
