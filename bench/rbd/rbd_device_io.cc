// rbd_device_io: I/O on an RbdDevice in-process, shaped like `rbd bench` so the two compare
// in one run (bench/rbd_compare.sh): THREADS callers (the queue depth, since each call is one
// librbd aio operation in flight) each issue SIZE-byte reads or writes, random or sequential,
// until TOTAL bytes are done. Prints one line: "ops: N ops/sec: X bytes/sec: Y".
//
//   rbd_device_io NAME read|write rand|seq SIZE THREADS TOTAL
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "remote/rbd_device.h"

// "64M" -> 67108864 (K, M, G suffixes as rbd bench takes them).
uint64_t Bytes(const char* text) {
  char* end = nullptr;
  uint64_t n = std::strtoull(text, &end, 0);
  switch (*end) {
    case 'G':
      n <<= 10;
      [[fallthrough]];
    case 'M':
      n <<= 10;
      [[fallthrough]];
    case 'K':
      n <<= 10;
  }
  return n;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s NAME read|write rand|seq SIZE THREADS TOTAL\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1], type = argv[2], pattern = argv[3];
  const uint64_t size = Bytes(argv[4]);
  const int threads = std::atoi(argv[5]);
  const uint64_t total = Bytes(argv[6]);
  auto dev = volstack::remote::RbdDevice::Open(name);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 1;
  }
  const uint64_t blocks = (*dev)->size() / size;
  const uint64_t ops = total / size;
  if (size == 0 || blocks == 0 || ops == 0 || threads <= 0) {
    std::fprintf(stderr, "bad sizes: SIZE %s, THREADS %s, TOTAL %s\n", argv[4], argv[5], argv[6]);
    return 2;
  }
  std::atomic<uint64_t> next{0}, failed{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; t++) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::vector<uint8_t> buf(size, static_cast<uint8_t>(t + 1));
      for (uint64_t i = next++; i < ops; i = next++) {
        const uint64_t block = pattern == "rand" ? rng() % blocks : i % blocks;
        volstack::Status s =
            type == "write" ? (*dev)->Write(block * size, buf) : (*dev)->Read(block * size, buf);
        if (!s.ok()) failed++;
      }
    });
  }
  for (auto& w : workers) w.join();
  if (type == "write" && !(*dev)->Flush().ok()) failed++;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed != 0) {
    std::fprintf(stderr, "%llu requests failed\n", static_cast<unsigned long long>(failed.load()));
    return 1;
  }
  std::printf("ops: %llu ops/sec: %.2f bytes/sec: %.2f\n", static_cast<unsigned long long>(ops),
              ops / secs, ops * size / secs);
  return 0;
}
