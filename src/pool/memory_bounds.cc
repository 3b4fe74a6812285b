#include "pool/memory_bounds.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "util/size.h"

namespace volstack::pool {

namespace {

constexpr uint64_t kMinBound = 16ull << 20;  // below, a txg or the cache's tables dominate
constexpr uint64_t kMaxDirty = 16ull << 30;

uint64_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : kMaxDirty;
}

uint64_t PoolTuning::*Field(const std::string& prop) {
  if (prop == "cachemax") return &PoolTuning::cache_max_bytes;
  if (prop == "dirtymax") return &PoolTuning::dirty_max_bytes;
  return nullptr;
}

uint64_t MaxBound(const std::string& prop) {
  return prop == "cachemax" ? PhysicalMemory() : kMaxDirty;
}

}  // namespace

bool IsMemoryBound(const std::string& prop) { return Field(prop) != nullptr; }

Result<std::string> StoredMemoryBound(const std::string& prop, const std::string& value) {
  if (!IsMemoryBound(prop)) return Status::InvalidArgument("'" + prop + "' is not a memory bound");
  auto bytes = ParseSize(value);
  const uint64_t max = MaxBound(prop);
  if (!bytes.ok() || *bytes < kMinBound || *bytes > max) {
    return Status::InvalidArgument("'" + prop + "' must be a size from " +
                                   FormatSizeShort(kMinBound) + " to " + FormatSizeShort(max) +
                                   ", not '" + value + "'");
  }
  return std::to_string(*bytes);
}

uint64_t MemoryBound(const std::map<std::string, std::string>& props, const std::string& prop,
                     const PoolTuning& tuning) {
  const auto field = Field(prop);
  if (field == nullptr) return 0;
  uint64_t stored = 0;
  const auto it = props.find(prop);
  if (it != props.end()) {
    const auto& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), stored);
    // What StoredMemoryBound did not write (a damaged MOS) leaves the importer's own value.
    if (ec == std::errc() && end == s.data() + s.size() && stored >= kMinBound) {
      return std::min(stored, MaxBound(prop));
    }
  }
  return tuning.*field;
}

void ApplyMemoryBounds(const std::map<std::string, std::string>& props, PoolTuning& tuning) {
  for (const char* prop : {"cachemax", "dirtymax"}) {
    tuning.*Field(prop) = MemoryBound(props, prop, tuning);
  }
}

}  // namespace volstack::pool
