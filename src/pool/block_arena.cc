#include "pool/block_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <functional>
#include <utility>

#include "util/check.h"

namespace volstack::pool {

std::span<uint8_t> MapAligned(uint64_t bytes, uint64_t align) {
  // Map `align` more and trim: a chunk aligned to its size is found by rounding a block's
  // address down, and a huge page must start on a huge page boundary.
  const size_t span = bytes + align;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return {};
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + align - 1) & ~(align - 1);
  if (aligned > start) ::munmap(p, aligned - start);
  const uintptr_t end = start + span, mapped_end = aligned + bytes;
  if (end > mapped_end) ::munmap(reinterpret_cast<void*>(mapped_end), end - mapped_end);
  auto* base = reinterpret_cast<uint8_t*>(aligned);
  // Advice only: without huge pages the memory still works, in 4 KiB pages.
  if (align % BlockArena::kHugePage == 0) ::madvise(base, bytes, MADV_HUGEPAGE);
  return {base, bytes};
}

void Unmap(std::span<uint8_t> memory) {
  if (!memory.empty()) ::munmap(memory.data(), memory.size());
}

BlockArena::BlockArena(uint64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {
  VS_CHECK(std::has_single_bit(chunk_bytes) && chunk_bytes >= 4096);
}

BlockArena::~BlockArena() {
  while (!chunks_.empty()) RetireChunk(chunks_.begin()->second.get());
  ReleaseSpare();
}

uint64_t BlockArena::GrowthFor(uint32_t size) const {
  if (!InChunks(size)) return size;
  auto it = not_full_.find(SlotSize(size));
  const bool room = it != not_full_.end() && !it->second.empty();
  return room || !spare_.empty() ? 0 : chunk_bytes_;
}

uint64_t BlockArena::ReleaseSpare() {
  if (spare_.empty()) return 0;
  spare_small_pages_ = false;
  Unmap(std::exchange(spare_, {}));
  mapped_bytes_ -= chunk_bytes_;
  return chunk_bytes_;
}

void BlockArena::AddSpare(std::span<uint8_t> chunk) {
  VS_CHECK(spare_.empty());
  VS_CHECK_OP(chunk.size(), ==, chunk_bytes_);
  spare_ = chunk;
  mapped_bytes_ += chunk_bytes_;
}

uint8_t* BlockArena::Allocate(uint32_t size) {
  VS_CHECK_OP(size, >, 0u);
  if (!InChunks(size)) {
    auto* block = static_cast<uint8_t*>(std::malloc(size));
    if (block != nullptr) mapped_bytes_ += size;
    return block;
  }
  const uint32_t slot_size = SlotSize(size);
  auto& room = not_full_[slot_size];
  if (room.empty()) {
    Chunk* chunk = NewChunk(slot_size);
    if (chunk == nullptr) return nullptr;
    room.insert(chunk);
  }
  Chunk& c = **room.begin();
  uint32_t slot;
  if (c.free_slots.empty()) {
    slot = c.never_used++;
  } else {
    // The lowest free slot goes to the back: the heap's top, else the purged prefix's end.
    if (c.free_slots.size() > c.purged) {
      std::pop_heap(c.free_slots.begin() + c.purged, c.free_slots.end(), std::greater<>());
    } else {
      c.purged--;
      purged_bytes_ -= slot_size;
    }
    slot = c.free_slots.back();
    c.free_slots.pop_back();
  }
  if (c.Full()) room.erase(room.begin());
  return c.base + uint64_t{slot} * slot_size;
}

void BlockArena::Free(uint8_t* block, uint32_t size) {
  if (!InChunks(size)) {
    std::free(block);
    mapped_bytes_ -= size;
    return;
  }
  const auto base = reinterpret_cast<uintptr_t>(block) & ~(chunk_bytes_ - 1);
  auto it = chunks_.find(base);
  VS_CHECK(it != chunks_.end());
  Chunk& c = *it->second;
  const uint32_t slot_size = SlotSize(size);
  VS_CHECK_OP(c.block_size, ==, slot_size);
  const uint64_t offset = reinterpret_cast<uintptr_t>(block) - base;
  VS_CHECK_OP(offset % slot_size, ==, 0u);
  const bool was_full = c.Full();
  c.free_slots.push_back(static_cast<uint32_t>(offset / slot_size));
  std::push_heap(c.free_slots.begin() + c.purged, c.free_slots.end(), std::greater<>());
  if (c.live() == 0) {
    RetireChunk(&c);
  } else if (was_full) {
    not_full_[slot_size].insert(&c);
  }
}

uint64_t BlockArena::Purge() {
  uint64_t purged = 0;
  std::vector<uint32_t> slots;
  for (auto& [base, chunk] : chunks_) {
    Chunk& c = *chunk;
    if (c.purged == c.free_slots.size()) continue;
    slots.assign(c.free_slots.begin() + c.purged, c.free_slots.end());
    std::sort(slots.begin(), slots.end());
    for (size_t i = 0; i < slots.size();) {
      size_t j = i + 1;
      while (j < slots.size() && slots[j] == slots[j - 1] + 1) j++;
      // Advice only: should the kernel refuse, the pages merely stay resident.
      ::madvise(c.base + uint64_t{slots[i]} * c.block_size, (j - i) * uint64_t{c.block_size},
                MADV_DONTNEED);
      i = j;
    }
    // khugepaged would fill the holes back in (it collapses a range with a single page
    // present) and make them resident again: a purged chunk stays in small pages.
    if (chunk_bytes_ % kHugePage == 0 && !c.small_pages) {
      ::madvise(c.base, chunk_bytes_, MADV_NOHUGEPAGE);
      c.small_pages = true;
    }
    purged += slots.size() * uint64_t{c.block_size};
    std::sort(c.free_slots.begin(), c.free_slots.end(), std::greater<>());
    c.purged = static_cast<uint32_t>(c.free_slots.size());
  }
  purged_bytes_ += purged;
  return purged;
}

std::span<uint8_t> BlockArena::SparsestChunk() const {
  const Chunk* best = nullptr;
  for (const auto& [base, chunk] : chunks_) {
    if (best == nullptr || chunk->live() < best->live()) best = chunk.get();
  }
  if (best == nullptr) return {};
  return {best->base, chunk_bytes_};
}

BlockArena::Chunk* BlockArena::NewChunk(uint32_t size) {
  std::span<uint8_t> memory = std::exchange(spare_, {});
  // A purged spare was advised out of huge pages: reused whole, it is worth one again.
  if (std::exchange(spare_small_pages_, false)) {
    ::madvise(memory.data(), memory.size(), MADV_HUGEPAGE);
  }
  if (memory.empty()) {
    memory = MapAligned(chunk_bytes_, chunk_bytes_);
    if (memory.empty()) return nullptr;
    mapped_bytes_ += chunk_bytes_;
  }
  uint8_t* const base = memory.data();
  auto chunk = std::make_unique<Chunk>();
  chunk->base = base;
  chunk->block_size = size;
  chunk->slots = static_cast<uint32_t>(chunk_bytes_ / size);
  Chunk* raw = chunk.get();
  chunks_.emplace(reinterpret_cast<uintptr_t>(base), std::move(chunk));
  return raw;
}

void BlockArena::RetireChunk(Chunk* chunk) {
  auto& room = not_full_[chunk->block_size];
  room.erase(chunk);
  const std::span<uint8_t> memory{chunk->base, chunk_bytes_};
  purged_bytes_ -= uint64_t{chunk->purged} * chunk->block_size;
  const bool small_pages = chunk->small_pages;
  chunks_.erase(reinterpret_cast<uintptr_t>(chunk->base));  // destroys *chunk
  if (spare_.empty()) {
    spare_ = memory;
    spare_small_pages_ = small_pages;
    return;
  }
  Unmap(memory);
  mapped_bytes_ -= chunk_bytes_;
}

}  // namespace volstack::pool
