#include "lvm/uuid.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>

namespace volstack::lvm {

namespace {
constexpr std::string_view kAlphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#";
}  // namespace

std::string GenerateId() {
  uint8_t bytes[kIdLen];
  bool ok = false;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ok = ::read(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
    ::close(fd);
  }
  if (!ok) {
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<uint8_t>(rd());
  }
  std::string id(kIdLen, '0');
  for (size_t i = 0; i < kIdLen; i++) id[i] = kAlphabet[bytes[i] % 62];
  return id;
}

std::string FormatId(std::string_view raw) {
  static constexpr int kGroups[] = {6, 4, 4, 4, 4, 4, 6};
  std::string out;
  size_t pos = 0;
  for (int g : kGroups) {
    if (!out.empty()) out += '-';
    out += raw.substr(pos, g);
    pos += g;
  }
  return out;
}

bool IsValidRawId(std::string_view raw) {
  if (raw.size() != kIdLen) return false;
  for (char c : raw) {
    if (kAlphabet.find(c) == std::string_view::npos) return false;
  }
  return true;
}

Result<std::string> ParseId(std::string_view text) {
  std::string raw;
  for (char c : text) {
    if (c != '-') raw += c;
  }
  if (!IsValidRawId(raw)) {
    return Status::Corruption("invalid LVM ID '" + std::string(text.substr(0, 64)) + "'");
  }
  return raw;
}

}  // namespace volstack::lvm
