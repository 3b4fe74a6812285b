#include "pool/memory_bounds.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "util/size.h"

namespace volstack::pool {

namespace {

// Below 16M a txg or the cache's own tables would be most of the bound.
constexpr uint64_t kMinBound = 16ull << 20;
// zfs caps its dirty data at 4G by default; a larger txg only lengthens each commit.
constexpr uint64_t kMaxDirty = 16ull << 30;
// When the machine's memory cannot be read: a small machine, so the limits err low.
constexpr uint64_t kUnknownMemory = 4ull << 30;

// This process's cgroup memory limit, if it has one: v2's `memory.max` ("max" or bytes), or
// v1's `memory.limit_in_bytes` (a huge number when unlimited).
std::optional<uint64_t> CgroupLimit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    std::string file;
    if (line.rfind("0::", 0) == 0) {
      file = "/sys/fs/cgroup" + line.substr(3) + "/memory.max";
    } else if (const auto at = line.find(":memory:"); at != std::string::npos) {
      file = "/sys/fs/cgroup/memory" + line.substr(at + 8) + "/memory.limit_in_bytes";
    } else {
      continue;
    }
    std::ifstream limit(file);
    std::string v;
    if (limit >> v) {
      if (auto bytes = ParseByteCount(v)) return bytes;
    }
  }
  return std::nullopt;
}

uint64_t MachineMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  uint64_t memory = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : kUnknownMemory;
  if (auto limit = CgroupLimit()) memory = std::min(memory, *limit);
  return memory;
}

uint64_t PoolTuning::*Field(const std::string& prop) {
  if (prop == "cachemax") return &PoolTuning::cache_max_bytes;
  if (prop == "dirtymax") return &PoolTuning::dirty_max_bytes;
  return nullptr;
}

}  // namespace

bool IsMemoryBound(const std::string& prop) { return Field(prop) != nullptr; }

uint64_t MaxMemoryBound(const std::string& prop) {
  const uint64_t memory = MachineMemory();
  const uint64_t max = prop == "cachemax" ? memory / 2 : std::min(memory / 4, kMaxDirty);
  return std::max(max, kMinBound);
}

Result<std::string> StoredMemoryBound(const std::string& prop, const std::string& value) {
  if (!IsMemoryBound(prop)) return Status::InvalidArgument("'" + prop + "' is not a memory bound");
  auto bytes = ParseSize(value);
  const uint64_t max = MaxMemoryBound(prop);
  if (!bytes.ok() || *bytes < kMinBound || *bytes > max) {
    return Status::InvalidArgument("'" + prop + "' must be a size from " +
                                   FormatSizeShort(kMinBound) + " to " + FormatSizeShort(max) +
                                   " on this machine, not '" + value + "'");
  }
  return std::to_string(*bytes);
}

std::optional<uint64_t> StoredBytes(const std::map<std::string, std::string>& props,
                                    const std::string& prop) {
  const auto it = props.find(prop);
  if (it == props.end() || !IsMemoryBound(prop)) return std::nullopt;
  const auto bytes = ParseByteCount(it->second);
  if (!bytes || *bytes < kMinBound) return std::nullopt;
  return bytes;
}

uint64_t MemoryBound(const std::map<std::string, std::string>& props, const std::string& prop,
                     const PoolTuning& tuning) {
  const auto field = Field(prop);
  if (field == nullptr) return 0;
  // What StoredMemoryBound did not write (a damaged MOS) leaves the importer's own value.
  if (auto stored = StoredBytes(props, prop)) return std::min(*stored, MaxMemoryBound(prop));
  return tuning.*field;
}

void ApplyMemoryBounds(const std::map<std::string, std::string>& props, PoolTuning& tuning) {
  for (const char* prop : {"cachemax", "dirtymax"}) {
    tuning.*Field(prop) = MemoryBound(props, prop, tuning);
  }
}

}  // namespace volstack::pool
