#include "export/devfs_stats.h"

#include <bit>
#include <cstdlib>

namespace volstack::exportfs {

namespace {

const char* OpName(size_t op) {
  static const char* const kNames[] = {"LOOKUP",  "GETATTR",   "SETATTR", "OPEN",
                                       "RELEASE", "READ",      "WRITE",   "FLUSH",
                                       "FSYNC",   "FALLOCATE", "LSEEK",   "other"};
  return kNames[op];
}

void StoreMax(std::atomic<uint64_t>& max, uint64_t v) {
  uint64_t cur = max.load(std::memory_order_relaxed);
  while (v > cur && !max.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::unique_ptr<DevfsStats> DevfsStats::FromEnvironment() {
  const char* env = std::getenv("VOLSTACK_DEVFS_STATS");
  if (env == nullptr || *env == '\0' || std::string(env) == "0") return nullptr;
  auto stats = std::make_unique<DevfsStats>();
  if (std::string(env) != "1") stats->path_ = env;
  return stats;
}

void DevfsStats::Begin() {
  const uint64_t n = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  StoreMax(in_flight_max_, n);
}

void DevfsStats::Record(DevfsOp op, uint64_t bytes, std::chrono::nanoseconds spent) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  Counter& c = counters_[static_cast<size_t>(op)];
  const auto ns = static_cast<uint64_t>(spent.count());
  c.count.fetch_add(1, std::memory_order_relaxed);
  c.ns_total.fetch_add(ns, std::memory_order_relaxed);
  StoreMax(c.ns_max, ns);
  if (op == DevfsOp::kRead || op == DevfsOp::kWrite) {
    c.bytes.fetch_add(bytes, std::memory_order_relaxed);
    // Bucket b holds sizes in (256 << (b-1), 256 << b]: 0 = up to 512 B, 11 = up to 1 MiB.
    const int log = bytes <= 512 ? 9 : std::bit_width(bytes - 1);
    const size_t b = std::min<size_t>(static_cast<size_t>(log - 9), kBuckets - 1);
    c.sizes[b].fetch_add(1, std::memory_order_relaxed);
  }
}

void DevfsStats::BeginSync() {
  const uint64_t n = syncs_in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  StoreMax(syncs_in_flight_max_, n);
}

void DevfsStats::EndSync(bool datasync, DevfsFlusher::How how) {
  syncs_in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (datasync) syncs_datasync_.fetch_add(1, std::memory_order_relaxed);
  syncs_how_[static_cast<size_t>(how)].fetch_add(1, std::memory_order_relaxed);
}

void DevfsStats::Dump() const {
  std::FILE* out = path_.empty() ? stderr : std::fopen(path_.c_str(), "a");
  if (out == nullptr) out = stderr;
  DumpTo(out);
  if (out != stderr) std::fclose(out);
}

void DevfsStats::DumpTo(std::FILE* out) const {
  std::fprintf(out, "devfs stats: %-10s %10s %12s %10s %10s\n", "request", "count", "MiB", "avg us",
               "max ms");
  for (size_t i = 0; i < kOps; i++) {
    const Counter& c = counters_[i];
    const uint64_t n = c.count.load();
    if (n == 0) continue;
    std::fprintf(out, "devfs stats: %-10s %10llu %12.1f %10.1f %10.2f\n", OpName(i),
                 static_cast<unsigned long long>(n), c.bytes.load() / 1048576.0,
                 c.ns_total.load() / 1e3 / n, c.ns_max.load() / 1e6);
  }
  for (size_t i : {static_cast<size_t>(DevfsOp::kRead), static_cast<size_t>(DevfsOp::kWrite)}) {
    const Counter& c = counters_[i];
    if (c.count.load() == 0) continue;
    std::fprintf(out, "devfs stats: %s sizes:", OpName(i));
    for (size_t b = 0; b < kBuckets; b++) {
      const uint64_t n = c.sizes[b].load();
      if (n == 0) continue;
      if (b + 1 == kBuckets) {
        std::fprintf(out, " >1M:%llu", static_cast<unsigned long long>(n));
      } else {
        const uint64_t kib = (512ull << b) / 1024;
        if (kib == 0) {
          std::fprintf(out, " <=512:%llu", static_cast<unsigned long long>(n));
        } else {
          std::fprintf(out, " %lluK:%llu", static_cast<unsigned long long>(kib),
                       static_cast<unsigned long long>(n));
        }
      }
    }
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "devfs stats: most requests in service at once: %llu\n",
               static_cast<unsigned long long>(in_flight_max_.load()));
  const auto u = [](const std::atomic<uint64_t>& v) {
    return static_cast<unsigned long long>(v.load());
  };
  if (counters_[static_cast<size_t>(DevfsOp::kFsync)].count.load() != 0) {
    std::fprintf(
        out,
        "devfs stats: FSYNC: %llu with datasync; answered by a device flush %llu,"
        " clean %llu, by another's flush %llu; most at once %llu\n",
        u(syncs_datasync_), u(syncs_how_[static_cast<size_t>(DevfsFlusher::How::kFlushed)]),
        u(syncs_how_[static_cast<size_t>(DevfsFlusher::How::kClean)]),
        u(syncs_how_[static_cast<size_t>(DevfsFlusher::How::kJoined)]), u(syncs_in_flight_max_));
  }
  std::fflush(out);
}

}  // namespace volstack::exportfs
