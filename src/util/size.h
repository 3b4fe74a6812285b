// Human sizes as zfs and lvm2 spell them: "1G", "512k", "1.5T", "4096". Suffixes are binary
// (K = 1024) and case-insensitive, as both tools take them; "B", "iB" and "b" endings are
// accepted. A number without a suffix is in `default_unit` bytes (1 for zfs, MiB for lvcreate).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace volstack {

// Parses `text`; EINVAL with a message naming the text when it is not a size, ERANGE past 2^64.
Result<uint64_t> ParseSize(std::string_view text, uint64_t default_unit = 1);

// A count of bytes as the project stores one (a MOS property, a cgroup limit): decimal digits
// only, the whole text, below 2^64. Nothing else is a count: no sign, suffix or space.
std::optional<uint64_t> ParseByteCount(std::string_view text);

// a + b, or UINT64_MAX when that does not fit: space checks sum user-given sizes (a
// refreservation of 2^64-1), and a wrapped sum would pass them.
constexpr uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a + b < a ? ~uint64_t{0} : a + b;
}

// "1.00G", "512K", "3.50M": zfs-style, at most three significant digits.
std::string FormatSizeShort(uint64_t bytes);

}  // namespace volstack
