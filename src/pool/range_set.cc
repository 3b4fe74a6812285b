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

bool RangeSet::Add(uint64_t start, uint64_t len) {
  if (len == 0) return true;
  if (Overlaps(start, len)) return false;
  uint64_t s = start, e = start + len;
  auto next = ranges_.lower_bound(s);
  if (next != ranges_.end() && next->first == e) {
    e = next->second;
    next = ranges_.erase(next);
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == s) {
      prev->second = e;
      total_ += len;
      return true;
    }
  }
  ranges_.emplace(s, e);
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
  ranges_.erase(it);
  if (s < start) ranges_.emplace(s, start);
  if (end < e) ranges_.emplace(end, e);
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

std::optional<std::pair<uint64_t, uint64_t>> RangeSet::RangeAt(uint64_t offset) const {
  auto it = ranges_.upper_bound(offset);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (offset >= it->second) return std::nullopt;
  return *it;
}

}  // namespace volstack::pool
