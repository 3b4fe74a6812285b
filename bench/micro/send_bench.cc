// zfs send and receive (src/pool/send.cc, receive.cc), each against its reference in one
// run, on a thin volume of VOLSTACK_BENCH_SEND_MB (default 512; the figure is 2048)
// fully written with 1 MiB writes (volblocksize 16K) and snapshotted:
//
//   FullSend     a full send of the snapshot to a null sink against a sequential read of the
//                snapshot through its device (1 MiB reads), alternating. Counters: ref_MBps,
//                send_MBps, ratio (send / ref: target >= 0.8).
//   Receive      a receive of that stream from a file into a new volume of a second pool
//                against sequential 1 MiB writes of the same bytes into a new volume there,
//                each ending in a commit; alternating, the volume destroyed between passes.
//                Counters: ref_MBps, recv_MBps, ratio (recv / ref: target >= 0.8).
//   SendRecvPipe send | receive between two pools through a pipe against cp of a file of the
//                same size (and fdatasync, as the receive ends in a commit). Counters:
//                cp_MBps, pipe_MBps, ratio (pipe / cp: target >= 0.6).
//   Incremental  after 1% of the volume's blocks (16 KiB each, at random) changed and a
//                second snapshot: an incremental send against a full send of the second
//                snapshot. Counters: read_ratio (pool bytes read, incremental / full: ~0.01),
//                time_ratio, incr_ms, full_ms.
//
//   CompressedWalk  a `send -c` of an lz4 volume (the same size, each 4 KiB a 512-byte run
//                repeated: about 8x) to a null sink against a walk of its metadata (a dry
//                run, `send -n -c`): what naming the algorithms in BEGIN exactly would add
//                (send.cc). Counters: send_ms, walk_ms, walk_ratio (walk / send).
//
//   send_bench [--benchmark_filter=FullSend]
//
// Files live in VOLSTACK_BENCH_DIR (default /var/tmp) and are removed at exit.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bdev/file_device.h"
#include "pool/send.h"
#include "pool/spa.h"

namespace {

using namespace volstack;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;

uint64_t EnvOr(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

std::string Path(const std::string& n) {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return std::string(d ? d : "/var/tmp") + "/volstack-send-bench-" + std::to_string(getpid()) +
         "-" + n;
}

void Cleanup() {
  for (const char* n : {"a", "b", "c", "stream", "copy"}) ::unlink(Path(n).c_str());
}

void Die(const std::string& what) {
  std::fprintf(stderr, "send_bench: %s\n", what.c_str());
  Cleanup();
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::shared_ptr<pool::Pool> NewPool(const std::string& tag, uint64_t size) {
  auto f = bdev::FileDevice::Create(Path(tag), size);
  if (!f.ok()) Die(f.status().ToString());
  auto p = pool::Pool::Create(tag == "a" ? "src" : "dst", {*f});
  if (!p.ok()) Die(p.status().ToString());
  return *p;
}

struct Setup {
  uint64_t size = EnvOr("VOLSTACK_BENCH_SEND_MB", 512) * kMiB;
  std::shared_ptr<pool::Pool> a = NewPool("a", size * 3 + 512 * kMiB);
  Setup() {
    pool::VolumeOptions vo;
    vo.volsize = size;
    vo.sparse = true;
    if (!a->CreateVolume("src/v", vo).ok()) Die("create");
    auto dev = *a->OpenVolume("src/v");
    std::vector<uint8_t> d(kMiB);
    std::mt19937_64 rng(1);
    for (uint64_t o = 0; o < size; o += kMiB) {
      for (auto& b : d) b = static_cast<uint8_t>(rng());
      if (!dev->Write(o, d).ok()) Die("write");
    }
    if (!a->Snapshot({"src/v@1"}).ok()) Die("snapshot");
  }
  ~Setup() {
    a.reset();
    Cleanup();
  }
};

Setup& TheSetup() {
  static Setup* s = new Setup;  // shared by the benchmarks; removed at exit
  return *s;
}

pool::SendStats SendTo(pool::Pool& p, const pool::SendOptions& o,
                       const pool::StreamWriter::Sink& sink) {
  auto r = pool::Send(p, o, sink);
  if (!r.ok()) Die(r.status().ToString());
  return *r;
}

const pool::StreamWriter::Sink kNull = [](std::span<const uint8_t>) { return Status::Ok(); };

void FullSend(benchmark::State& state) {
  Setup& s = TheSetup();
  double ref_s = 0, send_s = 0;
  std::vector<uint8_t> buf(kMiB);
  for (auto _ : state) {
    auto t0 = Clock::now();
    {
      auto dev = *s.a->OpenVolume("src/v@1", {.read_only = true});
      for (uint64_t o = 0; o < s.size; o += kMiB) {
        if (!dev->Read(o, buf).ok()) Die("read");
      }
    }
    auto t1 = Clock::now();
    SendTo(*s.a, {.snapshot = "src/v@1"}, kNull);
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    send_s += Seconds(t1, t2);
  }
  const double bytes = double(s.size) * double(state.iterations());
  state.counters["ref_MBps"] = bytes / ref_s / 1e6;
  state.counters["send_MBps"] = bytes / send_s / 1e6;
  state.counters["ratio"] = ref_s / send_s;
}
BENCHMARK(FullSend)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void Receive(benchmark::State& state) {
  Setup& s = TheSetup();
  // The stream in a file, as `zfs send > file; zfs recv < file`.
  const int out = ::open(Path("stream").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (out < 0) Die("open stream file");
  SendTo(*s.a, {.snapshot = "src/v@1"}, [&](std::span<const uint8_t> rec) {
    return ::write(out, rec.data(), rec.size()) == ssize_t(rec.size()) ? Status::Ok()
                                                                       : Status::IoError("write");
  });
  ::close(out);
  auto b = NewPool("b", s.size * 3 + 512 * kMiB);
  std::vector<uint8_t> buf(kMiB);
  double ref_s = 0, recv_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    {
      const int in = ::open(Path("stream").c_str(), O_RDONLY);
      pool::StreamReader reader([&](uint8_t* dst, size_t n) -> Result<size_t> {
        const ssize_t r = ::read(in, dst, n);
        if (r < 0) return Status::IoError("read");
        return size_t(r);
      });
      auto r = pool::Receive(*b, {.target = "dst/r"}, reader);
      ::close(in);
      if (!r.ok()) Die(r.status().ToString());
    }
    auto t1 = Clock::now();
    {
      pool::VolumeOptions vo;
      vo.volsize = s.size;
      vo.sparse = true;
      if (!b->CreateVolume("dst/w", vo).ok()) Die("create");
      auto dev = *b->OpenVolume("dst/w");
      auto src = *s.a->OpenVolume("src/v@1", {.read_only = true});
      // The same bytes, read ahead of the clock's second half would be fairer but costs a
      // copy of the volume in memory; reading them from the source's cache is what the
      // receive's reads from the file are to it.
      for (uint64_t o = 0; o < s.size; o += kMiB) {
        if (!src->Read(o, buf).ok() || !dev->Write(o, buf).ok()) Die("copy");
      }
      if (!b->Sync().ok()) Die("sync");
    }
    auto t2 = Clock::now();
    recv_s += Seconds(t0, t1);
    ref_s += Seconds(t1, t2);
    if (!b->DestroySnapshot("dst/r@1").ok() || !b->DestroyVolume("dst/r").ok() ||
        !b->DestroyVolume("dst/w").ok()) {
      Die("destroy");
    }
    for (int i = 0; i < 3; i++) (void)b->Sync();  // the deferred frees back
  }
  const double bytes = double(s.size) * double(state.iterations());
  state.counters["ref_MBps"] = bytes / ref_s / 1e6;
  state.counters["recv_MBps"] = bytes / recv_s / 1e6;
  state.counters["ratio"] = ref_s / recv_s;
}
BENCHMARK(Receive)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// send | receive between two pools through a pipe (two threads, as two processes would
// be) against cp of a file of the same size to another file, ending in fdatasync as the
// receive ends in a commit.
void SendRecvPipe(benchmark::State& state) {
  Setup& s = TheSetup();
  auto b = NewPool("c", s.size * 3 + 512 * kMiB);
  {
    const int f = ::open(Path("stream").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    std::vector<uint8_t> d(kMiB);
    std::mt19937_64 rng(5);
    for (uint64_t o = 0; o < s.size; o += kMiB) {
      for (auto& x : d) x = static_cast<uint8_t>(rng());
      if (::write(f, d.data(), d.size()) != ssize_t(d.size())) Die("write file");
    }
    ::fsync(f);
    ::close(f);
  }
  double ref_s = 0, pipe_s = 0;
  std::vector<uint8_t> buf(kMiB);
  for (auto _ : state) {
    auto t0 = Clock::now();
    {
      const int in = ::open(Path("stream").c_str(), O_RDONLY);
      const int out = ::open(Path("copy").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
      for (;;) {
        const ssize_t n = ::read(in, buf.data(), buf.size());
        if (n <= 0) break;
        if (::write(out, buf.data(), size_t(n)) != n) Die("cp");
      }
      ::fdatasync(out);
      ::close(in);
      ::close(out);
    }
    auto t1 = Clock::now();
    {
      int fds[2];
      if (::pipe(fds) != 0) Die("pipe");
      std::thread sender([&] {
        SendTo(*s.a, {.snapshot = "src/v@1"}, [&](std::span<const uint8_t> rec) {
          size_t done = 0;
          while (done < rec.size()) {
            const ssize_t n = ::write(fds[1], rec.data() + done, rec.size() - done);
            if (n <= 0) return Status::IoError("pipe write");
            done += size_t(n);
          }
          return Status::Ok();
        });
        ::close(fds[1]);
      });
      pool::StreamReader reader([&](uint8_t* dst, size_t n) -> Result<size_t> {
        const ssize_t r = ::read(fds[0], dst, n);
        if (r < 0) return Status::IoError("pipe read");
        return size_t(r);
      });
      auto r = pool::Receive(*b, {.target = "dst/r"}, reader);
      sender.join();
      ::close(fds[0]);
      if (!r.ok()) Die(r.status().ToString());
    }
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    pipe_s += Seconds(t1, t2);
    if (!b->DestroySnapshot("dst/r@1").ok() || !b->DestroyVolume("dst/r").ok()) Die("destroy");
    for (int i = 0; i < 3; i++) (void)b->Sync();
  }
  ::unlink(Path("copy").c_str());
  const double bytes = double(s.size) * double(state.iterations());
  state.counters["cp_MBps"] = bytes / ref_s / 1e6;
  state.counters["pipe_MBps"] = bytes / pipe_s / 1e6;
  state.counters["ratio"] = ref_s / pipe_s;
}
BENCHMARK(SendRecvPipe)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void Incremental(benchmark::State& state) {
  Setup& s = TheSetup();
  {
    auto dev = *s.a->OpenVolume("src/v");
    std::vector<uint8_t> d(16384, 0x5a);
    std::mt19937_64 rng(2);
    const uint64_t blocks = s.size / 16384;
    for (uint64_t i = 0; i < blocks / 100; i++) {
      if (!dev->Write((rng() % blocks) * 16384, d).ok()) Die("write");
    }
    if (!s.a->Snapshot({"src/v@2"}).ok()) Die("snapshot");
  }
  double incr_s = 0, full_s = 0;
  uint64_t incr_read = 0, full_read = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    incr_read += SendTo(*s.a, {.snapshot = "src/v@2", .from = "@1"}, kNull).bytes_read;
    auto t1 = Clock::now();
    full_read += SendTo(*s.a, {.snapshot = "src/v@2"}, kNull).bytes_read;
    auto t2 = Clock::now();
    incr_s += Seconds(t0, t1);
    full_s += Seconds(t1, t2);
  }
  state.counters["read_ratio"] = double(incr_read) / double(full_read);
  state.counters["time_ratio"] = incr_s / full_s;
  state.counters["incr_ms"] = incr_s * 1e3 / double(state.iterations());
  state.counters["full_ms"] = full_s * 1e3 / double(state.iterations());
}
BENCHMARK(Incremental)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void CompressedWalk(benchmark::State& state) {
  Setup& s = TheSetup();
  auto c = NewPool("c", s.size + 512 * kMiB);
  {
    pool::VolumeOptions vo;
    vo.volsize = s.size;
    vo.sparse = true;
    vo.props["compression"] = "lz4";
    if (!c->CreateVolume("dst/z", vo).ok()) Die("create");
    auto dev = *c->OpenVolume("dst/z");
    std::vector<uint8_t> d(kMiB);
    std::mt19937_64 rng(3);
    for (uint64_t o = 0; o < s.size; o += kMiB) {
      for (size_t i = 0; i < d.size(); i += 4096) {
        for (size_t k = 0; k < 512; k++) d[i + k] = static_cast<uint8_t>(rng());
        for (size_t k = 512; k < 4096; k++) d[i + k] = d[i + k % 512];
      }
      if (!dev->Write(o, d).ok()) Die("write");
    }
  }
  if (!c->Snapshot({"dst/z@1"}).ok()) Die("snapshot");
  double send_s = 0, walk_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    SendTo(*c, {.snapshot = "dst/z@1", .compressed = true}, kNull);
    auto t1 = Clock::now();
    SendTo(*c, {.snapshot = "dst/z@1", .dry_run = true, .compressed = true}, kNull);
    auto t2 = Clock::now();
    send_s += Seconds(t0, t1);
    walk_s += Seconds(t1, t2);
  }
  const double n = double(state.iterations());
  state.counters["send_ms"] = send_s / n * 1e3;
  state.counters["walk_ms"] = walk_s / n * 1e3;
  state.counters["walk_ratio"] = walk_s / send_s;
}
BENCHMARK(CompressedWalk)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Cleanup();
  return 0;
}
