// lvm2's metadata checksum (lib/misc/crc.c): reflected CRC-32 with the zlib polynomial
// 0xEDB88320, initial value 0xf597a6cf and no final XOR. Chaining is explicit: pass the
// previous result as `crc` to continue over a second buffer (a wrapped metadata text).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace volstack::lvm {

inline constexpr uint32_t kLvmInitialCrc = 0xf597a6cf;

uint32_t LvmCrc(std::span<const uint8_t> data, uint32_t crc = kLvmInitialCrc);
uint32_t LvmCrc(std::string_view data, uint32_t crc = kLvmInitialCrc);

}  // namespace volstack::lvm
