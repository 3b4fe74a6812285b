// A pool on a vdev file opened O_DIRECT (as the stack opens them: docs/performance.md):
// random 4 KiB writes into 16 KiB and 4 KiB blocks, compressed and not (a compressed block's
// run has pieces of any length, which the file device gathers into one aligned write),
// several commits, then an export and an import from a fresh O_DIRECT open: every byte reads
// back and the checker finds the pool consistent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bdev/file_device.h"
#include "pool/checker.h"
#include "pool/spa.h"

namespace volstack::pool {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(DirectVdevTest, RandomWritesSurviveCommitsAndImport) {
  char tmpl[] = "/var/tmp/volstack-direct-vdev-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  struct Unlink {
    std::string p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink{path};
  bdev::FileDeviceOptions fo;
  fo.direct_io = true;
  auto file = bdev::FileDevice::Create(path, 96 * kMiB, fo);
  if (!file.ok() && file.status().code() == EINVAL) GTEST_SKIP() << "/var/tmp has no O_DIRECT";
  ASSERT_TRUE(file.ok()) << file.status().ToString();

  PoolCreateOptions co;
  co.tuning.dirty_max_bytes = 1 * kMiB;  // commits on their own, between the writes
  auto created = Pool::Create("direct", {*file}, co);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto pool = *created;
  struct Vol {
    std::string name;
    uint32_t vbs;
    std::string compression;
    std::vector<uint8_t> image;
  };
  std::vector<Vol> vols = {{"direct/a", 16384, "lz4", {}},
                           {"direct/b", 4096, "off", {}},
                           {"direct/c", 16384, "off", {}}};
  std::mt19937_64 rng(38);
  for (auto& v : vols) {
    VolumeOptions vo;
    vo.volsize = 4 * kMiB;
    vo.volblocksize = v.vbs;
    vo.props["compression"] = v.compression;
    ASSERT_TRUE(pool->CreateVolume(v.name, vo).ok()) << v.name;
    v.image.assign(vo.volsize, 0);
  }
  for (int i = 0; i < 3000; i++) {
    auto& v = vols[rng() % vols.size()];
    auto dev = pool->OpenVolume(v.name);
    ASSERT_TRUE(dev.ok());
    const uint64_t off = rng() % (v.image.size() / 4096) * 4096;
    std::vector<uint8_t> d(4096);
    // Half compressible (a repeated short pattern), half random.
    const bool text = rng() % 2 == 0;
    for (size_t k = 0; k < d.size(); k++) d[k] = text ? "volstack"[k % 8] : uint8_t(rng());
    ASSERT_TRUE((*dev)->Write(off, d).ok());
    std::copy(d.begin(), d.end(), v.image.begin() + static_cast<ptrdiff_t>(off));
    if (i % 700 == 699) {
      ASSERT_TRUE(pool->Sync().ok());
    }
  }
  ASSERT_TRUE(pool->Export().ok());
  pool.reset();
  file = Status::NotFound("closed");

  auto reopened = bdev::FileDevice::Open(path, fo);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  auto imported = Pool::Import({*reopened});
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  for (const auto& v : vols) {
    auto dev = (*imported)->OpenVolume(v.name);
    ASSERT_TRUE(dev.ok()) << v.name;
    std::vector<uint8_t> back(v.image.size());
    ASSERT_TRUE((*dev)->Read(0, back).ok());
    EXPECT_TRUE(back == v.image) << v.name << " does not read back what was written";
  }
  auto report = CheckPool(**imported, /*verify_data=*/true);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->Summary();
}

}  // namespace
}  // namespace volstack::pool
