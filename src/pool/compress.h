// Block compression: the codec between a volume's logical blocks and the bytes a block
// pointer names on disk (lz4 and zstd, from liblz4 and libzstd).
//
// Format. A compressed block is the codec's own stream and nothing else: an lz4 block
// (LZ4_compress_default's output, no frame) or one zstd frame, exactly `psize` bytes,
// padded with zeroes to the allocation unit on disk. The blkptr holds comp, psize and
// lsize, so no length header is needed (ZFS prefixes lz4 with one because its psize is
// rounded to sectors). The zstd level is not recorded: any level decodes alike.
//
// When a block is stored compressed (ZFS's rule): only if that saves at least one
// allocation unit and at least 1/8 of the block. CompressBlock gives the codec an output
// buffer of exactly that limit, so an incompressible block costs one failed attempt and
// no copy.
//
// Decoding trusts nothing: a stream that fails to decode, decodes to any size but lsize,
// or (zstd) declares another content size is Corruption, and the output is then undefined
// (callers pass a buffer whose bytes nobody reads on failure). The checksum is verified on
// the compressed bytes before decoding, so on an intact pool decoding never fails; it is
// the fuzzers and a hostile image that reach these paths.
//
// Threads: pure functions; zstd's contexts are per thread (thread_local), so any number of
// commit threads may compress at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pool/blkptr_format.h"
#include "util/result.h"

namespace volstack::pool {

// The `compression` property, parsed: off, on (= lz4), lz4, zstd (= zstd-3),
// zstd-1..zstd-19, zstd-fast (= zstd level -1).
// The property's value where a volume sets none: off, measured (docs/format/pool.md,
// "Compression").
inline constexpr const char* kDefaultCompression = "off";

struct CompressionSetting {
  Compression algo = Compression::kNone;
  int level = 0;  // zstd only
  bool operator==(const CompressionSetting&) const = default;
};

Result<CompressionSetting> ParseCompression(const std::string& value);

// The largest psize worth storing for a block of `lsize` bytes on a pool whose allocation
// unit is `unit` bytes (0: none).
uint32_t MaxCompressedSize(uint32_t lsize, uint32_t unit);

// Compresses `in` into `out` (at least MaxCompressedSize(in.size(), unit) bytes). Returns
// the psize written, or 0 when the block is stored as it is (setting off, or it does not
// save enough).
uint32_t CompressBlock(const CompressionSetting& setting, std::span<const uint8_t> in,
                       uint32_t unit, std::span<uint8_t> out);

// Decodes `in` (psize bytes of a `comp` stream) into exactly out.size() (lsize) bytes.
// Corruption on anything else; kNone copies and requires equal sizes.
Status DecompressBlock(Compression comp, std::span<const uint8_t> in, std::span<uint8_t> out);

// Decodes the first out.size() bytes of an lz4 block (`in`, psize bytes) and stops: a read
// of part of a block that nothing caches need not decode the rest (on text, decoding costs
// several times the read and checksum of the stored bytes). Corruption when the stream
// fails to decode before then; the rest of the block is not looked at (its checksum over
// the stored bytes was).
Status DecompressLz4Prefix(std::span<const uint8_t> in, std::span<uint8_t> out);

std::string CompressionName(Compression comp);

}  // namespace volstack::pool
