#include "util/size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace volstack {

namespace {
int ShiftForSuffix(char c) {
  switch (std::tolower(static_cast<unsigned char>(c))) {
    case 'b':
      return 0;
    case 's':
      return 9;  // 512-byte sectors, as lvm2 takes them
    case 'k':
      return 10;
    case 'm':
      return 20;
    case 'g':
      return 30;
    case 't':
      return 40;
    case 'p':
      return 50;
    case 'e':
      return 60;
    default:
      return -1;
  }
}
}  // namespace

std::optional<uint64_t> ParseByteCount(std::string_view text) {
  uint64_t bytes = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, bytes);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return bytes;
}

Result<uint64_t> ParseSize(std::string_view text, uint64_t default_unit) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("invalid size '" + std::string(text) + "': " + why);
  };
  size_t i = 0;
  uint64_t whole = 0;
  bool any_digit = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (whole > (UINT64_MAX - d) / 10)
      return Status::FromErrno(ERANGE, "size too large: " + std::string(text));
    whole = whole * 10 + d;
    any_digit = true;
    i++;
  }
  // A fraction is kept as digits over a power of ten, so "1.5G" is exact.
  uint64_t frac = 0, frac_scale = 1;
  if (i < text.size() && text[i] == '.') {
    i++;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (frac_scale < 1000000000000ULL) {
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_scale *= 10;
      }
      any_digit = true;
      i++;
    }
  }
  if (!any_digit) return bad("expected a number");
  uint64_t unit = default_unit;
  if (i < text.size()) {
    const int shift = ShiftForSuffix(text[i]);
    if (shift < 0) return bad("unknown suffix");
    unit = uint64_t{1} << shift;
    i++;
    std::string_view rest = text.substr(i);
    if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib")) {
      return bad("unknown suffix");
    }
  }
  if (whole != 0 && unit > UINT64_MAX / whole) {
    return Status::FromErrno(ERANGE, "size too large: " + std::string(text));
  }
  uint64_t bytes = whole * unit;
  // frac/frac_scale * unit, computed without overflow for units up to 2^60.
  const long double extra = static_cast<long double>(frac) * static_cast<long double>(unit) /
                            static_cast<long double>(frac_scale);
  if (static_cast<long double>(UINT64_MAX - bytes) < extra) {
    return Status::FromErrno(ERANGE, "size too large: " + std::string(text));
  }
  bytes += static_cast<uint64_t>(std::llround(extra));
  return bytes;
}

std::string FormatSizeShort(uint64_t bytes) {
  static const char kSuffix[] = "BKMGTPE";
  int idx = 0;
  long double v = static_cast<long double>(bytes);
  // Divide while the value, rounded as it will be printed, would not fit below 1024.
  while (idx < 6 && std::roundl(v) >= 1024) {
    v /= 1024;
    idx++;
  }
  char buf[32];
  if (idx == 0) {
    std::snprintf(buf, sizeof buf, "%lluB", static_cast<unsigned long long>(bytes));
    return buf;
  }
  if (v < 9.995L) {
    std::snprintf(buf, sizeof buf, "%.2Lf%c", v, kSuffix[idx]);
  } else if (v < 99.95L) {
    std::snprintf(buf, sizeof buf, "%.1Lf%c", v, kSuffix[idx]);
  } else {
    std::snprintf(buf, sizeof buf, "%.0Lf%c", v, kSuffix[idx]);
  }
  return buf;
}

}  // namespace volstack
