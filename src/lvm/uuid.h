// LVM2 identifiers (lib/id/id.c): 32 characters from a 64-character alphabet, stored raw in
// the PV label and written in text as 6-4-4-4-4-4-6 groups joined by '-'. Generation uses
// only the first 62 characters (a random byte modulo 62), as lvm2 does; parsing accepts
// all 64.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace volstack::lvm {

inline constexpr size_t kIdLen = 32;

// A fresh random ID (32 raw characters) from /dev/urandom.
std::string GenerateId();
// The 38-character dashed form of a 32-character raw ID.
std::string FormatId(std::string_view raw);
// Strips dashes; Corruption unless exactly 32 characters of the alphabet remain.
Result<std::string> ParseId(std::string_view text);
bool IsValidRawId(std::string_view raw);

}  // namespace volstack::lvm
