// Block checksums: a 256-bit value stored in the parent block pointer (or embedded at the end
// of a label/uberblock slot). XXH3-128 (libxxhash) is the default for data and metadata
// blocks; SHA-256 (OpenSSL) is selectable per dataset (`checksum=sha256`) and is always used
// for the self-checksummed label and uberblock regions. Thread-safe (pure functions).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace volstack::pool {

// On-disk checksum ids (blkptr byte 57). 0 is invalid so a zeroed pointer never verifies.
enum class ChecksumType : uint8_t { kXxh3_128 = 1, kSha256 = 2 };

struct Checksum {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const Checksum&) const = default;
};

bool IsValidChecksumType(uint8_t id);
Checksum ComputeChecksum(ChecksumType type, std::span<const uint8_t> data);
// SHA-256 of data || LE64(verifier): embedded checksums bound to their device offset, so a
// copy cannot be replayed at another place (ZFS's label verifier).
Checksum ComputeEmbeddedChecksum(std::span<const uint8_t> data, uint64_t verifier);

// "xxh3" / "sha256" as the `checksum` property spells them; "on" maps to the default.
Result<ChecksumType> ParseChecksumName(const std::string& name);
std::string ChecksumName(ChecksumType type);

}  // namespace volstack::pool
