#include "pool/checksum.h"

#include <openssl/evp.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <cstring>

#include "util/coding.h"

namespace volstack::pool {

bool IsValidChecksumType(uint8_t id) { return id == 1 || id == 2; }

namespace {
Checksum Sha256(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  Checksum c;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  VS_CHECK(ctx != nullptr);
  unsigned int len = 0;
  VS_CHECK(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1);
  VS_CHECK(EVP_DigestUpdate(ctx, a.data(), a.size()) == 1);
  if (!b.empty()) VS_CHECK(EVP_DigestUpdate(ctx, b.data(), b.size()) == 1);
  VS_CHECK(EVP_DigestFinal_ex(ctx, c.bytes.data(), &len) == 1);
  EVP_MD_CTX_free(ctx);
  return c;
}
}  // namespace

Checksum ComputeChecksum(ChecksumType type, std::span<const uint8_t> data) {
  if (type == ChecksumType::kSha256) return Sha256(data, {});
  Checksum c;
#if defined(__x86_64__)
  // libxxhash's plain entry point is built for baseline SSE2 (about 8 GB/s here); the
  // dispatcher picks AVX2 or AVX-512 at run time (about 35 GB/s), the same hash. Every data
  // block is checksummed on write and verified on read, so this is on the hot path.
  const XXH128_hash_t h = XXH3_128bits_dispatch(data.data(), data.size());
#else
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
#endif
  EncodeLE64(c.bytes.data(), h.low64);
  EncodeLE64(c.bytes.data() + 8, h.high64);
  return c;
}

Checksum ComputeEmbeddedChecksum(std::span<const uint8_t> data, uint64_t verifier) {
  uint8_t v[8];
  EncodeLE64(v, verifier);
  return Sha256(data, std::span<const uint8_t>(v, 8));
}

Result<ChecksumType> ParseChecksumName(const std::string& name) {
  if (name == "on" || name == "xxh3" || name == "xxh128" || name == "xxh3-128") {
    return ChecksumType::kXxh3_128;
  }
  if (name == "sha256") return ChecksumType::kSha256;
  return Status::InvalidArgument("invalid checksum '" + name + "': expected on, xxh3 or sha256");
}

std::string ChecksumName(ChecksumType type) {
  return type == ChecksumType::kSha256 ? "sha256" : "xxh3";
}

}  // namespace volstack::pool
