#include "pool/compress.h"

#include <lz4.h>
#include <zstd.h>

#include <charconv>
#include <cstring>
#include <memory>

namespace volstack::pool {

namespace {

constexpr int kZstdDefaultLevel = 3;  // zfs's `zstd`

struct ZstdContexts {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ~ZstdContexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};

ZstdContexts& Zstd() {
  thread_local ZstdContexts ctx;
  return ctx;
}

}  // namespace

Result<CompressionSetting> ParseCompression(const std::string& value) {
  if (value == "off") return CompressionSetting{};
  if (value == "on" || value == "lz4") return CompressionSetting{Compression::kLz4, 0};
  if (value == "zstd") return CompressionSetting{Compression::kZstd, kZstdDefaultLevel};
  if (value == "zstd-fast") return CompressionSetting{Compression::kZstd, -1};
  if (value.starts_with("zstd-")) {
    int level = 0;
    const char* first = value.data() + 5;
    const char* last = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(first, last, level);
    if (ec == std::errc() && ptr == last && first != last && *first != '0' && level >= 1 &&
        level <= 19) {
      return CompressionSetting{Compression::kZstd, level};
    }
  }
  return Status::InvalidArgument("bad compression '" + value +
                                 "': expected off, on, lz4, zstd, zstd-1..zstd-19 or zstd-fast");
}

uint32_t MaxCompressedSize(uint32_t lsize, uint32_t unit) {
  const uint32_t eighth = lsize - lsize / 8;
  if (unit == 0) return eighth;
  // At least one unit saved: the stream must fit one unit fewer than the block takes.
  const uint32_t units = (lsize + unit - 1) / unit;
  return std::min(eighth, (units - 1) * unit);
}

uint32_t CompressBlock(const CompressionSetting& setting, std::span<const uint8_t> in,
                       uint32_t unit, std::span<uint8_t> out) {
  const uint32_t limit = std::min<size_t>(MaxCompressedSize(in.size(), unit), out.size());
  if (setting.algo == Compression::kNone || limit == 0) return 0;
  if (setting.algo == Compression::kLz4) {
    const int n = LZ4_compress_default(reinterpret_cast<const char*>(in.data()),
                                       reinterpret_cast<char*>(out.data()),
                                       static_cast<int>(in.size()), static_cast<int>(limit));
    return n > 0 ? static_cast<uint32_t>(n) : 0;
  }
  const size_t n =
      ZSTD_compressCCtx(Zstd().c, out.data(), limit, in.data(), in.size(), setting.level);
  return ZSTD_isError(n) ? 0 : static_cast<uint32_t>(n);
}

Status DecompressBlock(Compression comp, std::span<const uint8_t> in, std::span<uint8_t> out) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption(CompressionName(comp) + " block of " + std::to_string(in.size()) +
                              " bytes: " + why);
  };
  switch (comp) {
    case Compression::kNone:
      if (in.size() != out.size()) return bad("size does not match");
      std::memcpy(out.data(), in.data(), in.size());
      return Status::Ok();
    case Compression::kLz4: {
      if (in.empty() || in.size() > INT32_MAX || out.size() > INT32_MAX) return bad("bad size");
      const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()),
                                        reinterpret_cast<char*>(out.data()),
                                        static_cast<int>(in.size()), static_cast<int>(out.size()));
      if (n < 0) return bad("does not decode");
      if (static_cast<size_t>(n) != out.size()) {
        return bad("decodes to " + std::to_string(n) + " bytes, not " + std::to_string(out.size()));
      }
      return Status::Ok();
    }
    case Compression::kZstd: {
      // The frame must be the whole stream: trailing bytes would be data nobody checked.
      if (ZSTD_findFrameCompressedSize(in.data(), in.size()) != in.size()) {
        return bad("not one whole frame");
      }
      const size_t n = ZSTD_decompressDCtx(Zstd().d, out.data(), out.size(), in.data(), in.size());
      if (ZSTD_isError(n)) return bad(std::string("does not decode: ") + ZSTD_getErrorName(n));
      if (n != out.size()) return bad("decodes to the wrong size");
      return Status::Ok();
    }
  }
  return bad("unknown compression " + std::to_string(static_cast<int>(comp)));
}

Status DecompressLz4Prefix(std::span<const uint8_t> in, std::span<uint8_t> out) {
  if (in.empty() || in.size() > INT32_MAX || out.size() > INT32_MAX) {
    return Status::Corruption("lz4 block of " + std::to_string(in.size()) + " bytes: bad size");
  }
  // With the capacity at the target, the decoder writes no byte past it.
  const int n = LZ4_decompress_safe_partial(
      reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
      static_cast<int>(in.size()), static_cast<int>(out.size()), static_cast<int>(out.size()));
  if (n < 0 || static_cast<size_t>(n) != out.size()) {
    return Status::Corruption("lz4 block of " + std::to_string(in.size()) +
                              " bytes: does not decode to " + std::to_string(out.size()) +
                              " bytes");
  }
  return Status::Ok();
}

std::string CompressionName(Compression comp) {
  switch (comp) {
    case Compression::kNone:
      return "uncompressed";
    case Compression::kLz4:
      return "lz4";
    case Compression::kZstd:
      return "zstd";
  }
  return "compression " + std::to_string(static_cast<int>(comp));
}

}  // namespace volstack::pool
