// StreamingCopy: memcpy for a destination that will not be read again soon, written with
// non-temporal stores (past the CPU's caches, straight to memory).
//
// Why. An ordinary store first reads the destination's cache line in; for a buffer that
// is only read back after many megabytes of other traffic (a txg's dirty buffers: a 64 KiB
// streaming writer fills 16 MiB of them before the commit reads them), that read is wasted
// and the lines it brings in push out data that is still in use. glibc's memcpy streams
// only copies larger than a sizeable share of the last-level cache, never one 4-128 KiB
// block at a time. With it pool_bench SeqWrite64K's writes into a volume took 5.0-5.7 ms a
// 16 MiB interval instead of 6.1-6.5 (docs/notes/commit-path.md).
//
// Falls back to memcpy where it cannot stream: without SSE2, for a destination that is not
// 16-byte aligned, or for a length that is not a multiple of 64.
#pragma once

#include <cstddef>
#include <cstdint>

namespace volstack {

void StreamingCopy(uint8_t* dst, const uint8_t* src, size_t n);

}  // namespace volstack
