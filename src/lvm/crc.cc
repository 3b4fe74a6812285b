#include "lvm/crc.h"

#include <array>

namespace volstack::lvm {

namespace {
constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();
}  // namespace

uint32_t LvmCrc(std::span<const uint8_t> data, uint32_t crc) {
  for (uint8_t b : data) crc = kTable[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc;
}

uint32_t LvmCrc(std::string_view data, uint32_t crc) {
  return LvmCrc(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()), crc);
}

}  // namespace volstack::lvm
