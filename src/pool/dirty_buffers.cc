#include "pool/dirty_buffers.h"

#include <bit>

namespace volstack::pool {

void DirtyBuffers::Deleter::operator()(uint8_t* block) const {
  if (owner != nullptr) {
    owner->Free(block, size);
  } else {
    delete[] block;
  }
}

DirtyBuffers::Buf DirtyBuffers::Allocate(uint32_t size) {
  uint8_t* block;
  {
    std::lock_guard l(mu_);
    block = arena_.Allocate(size);
    if (block != nullptr) live_bytes_ += std::bit_ceil(size);
  }
  if (block == nullptr) return Buf(new uint8_t[size], Deleter{nullptr, size});
  return Buf(block, Deleter{this, size});
}

uint64_t DirtyBuffers::Trim() {
  std::lock_guard l(mu_);
  const uint64_t idle = arena_.mapped_bytes() - arena_.purged_bytes() - live_bytes_;
  return idle > kPurgeSlack ? arena_.Purge() : 0;
}

uint64_t DirtyBuffers::mapped_bytes() const {
  std::lock_guard l(mu_);
  return arena_.mapped_bytes();
}

uint64_t DirtyBuffers::resident_bytes() const {
  std::lock_guard l(mu_);
  return arena_.mapped_bytes() - arena_.purged_bytes();
}

void DirtyBuffers::Free(uint8_t* block, uint32_t size) {
  std::lock_guard l(mu_);
  arena_.Free(block, size);
  live_bytes_ -= std::bit_ceil(size);
}

}  // namespace volstack::pool
