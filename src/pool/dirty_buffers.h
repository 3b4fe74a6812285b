// DirtyBuffers: the memory of the volumes' dirty blocks (volume.h: the open and syncing
// maps, the spares), in huge-page chunks shared by every volume of a pool.
//
// Why not new[]. On this class of VM a 4 KiB page the process has not touched before costs
// a trap and a host fault on first write, about 11 us (16 MiB of fresh 16 KiB new[] blocks
// written once: 42-59 ms). A pool's first 16 MiB of dirty blocks took 67-102 ms of its
// writer's time in new[]'d blocks and 18-42 ms in huge pages, where one fault maps 2 MiB:
// that one interval was about 7 % of the pool's time in pool_bench's SeqWrite64K/0
// (docs/notes/memory.md).
//
// Memory. A commit gives its buffers back and the volume keeps some as spares
// (Volume::FinishSync); the rest return here, where an emptied chunk is kept as the one
// spare chunk or unmapped (BlockArena). After random writes, though, the blocks still in
// use (the spares, the next txg's) are spread over many chunks that only their block size
// can use: after 56 MiB of random 4 KiB writes, the volume's 16 MiB of spares keep all 56
// MiB of chunks mapped (DirtyBuffersTest), and a 16 KiB volume's writes cannot reuse them.
// So after each commit (Trim) the free slots' pages are given back once more than
// kPurgeSlack of them sit resident: the pool's dirty memory stays within the live blocks
// plus that slack, whatever mix of block sizes its volumes have, while a streaming writer,
// whose freed chunks empty whole, never pays for a purge. (A purged chunk leaves huge
// pages until it empties, or khugepaged would fill its holes back in.)
//
// Threads: every method may be called from any thread; one mutex guards the arena, taken
// for each block handed out or given back and never held while calling out (a leaf lock).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "pool/block_arena.h"

namespace volstack::pool {

class DirtyBuffers {
 public:
  // Gives a block back to the DirtyBuffers it came from; with none (a buffer made with
  // new[], as tests do, or the fallback when no chunk can be mapped), delete[]s it.
  struct Deleter {
    DirtyBuffers* owner = nullptr;
    uint32_t size = 0;
    void operator()(uint8_t* block) const;
  };
  using Buf = std::unique_ptr<uint8_t[], Deleter>;

  DirtyBuffers() = default;
  // Every block handed out must have been given back first.
  ~DirtyBuffers() = default;
  DirtyBuffers(const DirtyBuffers&) = delete;
  DirtyBuffers& operator=(const DirtyBuffers&) = delete;

  // A block of `size` bytes (> 0, up to a volblocksize), aligned to the power of two at or
  // above it; new[] memory when no chunk can be mapped. Its contents are unspecified.
  Buf Allocate(uint32_t size);
  // Gives the free slots' pages back to the kernel when more than kPurgeSlack of the
  // mapped memory is neither in use nor given back already. Returns the bytes given back.
  uint64_t Trim();
  static constexpr uint64_t kPurgeSlack = 16 << 20;

  // Chunks mapped, the spare chunk included.
  uint64_t mapped_bytes() const;
  // What is mapped and not given back by Trim: the memory these buffers hold.
  uint64_t resident_bytes() const;

 private:
  void Free(uint8_t* block, uint32_t size);

  mutable std::mutex mu_;
  BlockArena arena_{BlockArena::kHugePage};  // GUARDED_BY(mu_)
  uint64_t live_bytes_ = 0;                  // GUARDED_BY(mu_): slots handed out
};

}  // namespace volstack::pool
