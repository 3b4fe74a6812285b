#include "pool/dirty_buffers.h"

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
  }
  if (block == nullptr) return Buf(new uint8_t[size], Deleter{nullptr, size});
  return Buf(block, Deleter{this, size});
}

uint64_t DirtyBuffers::mapped_bytes() const {
  std::lock_guard l(mu_);
  return arena_.mapped_bytes();
}

void DirtyBuffers::Free(uint8_t* block, uint32_t size) {
  std::lock_guard l(mu_);
  arena_.Free(block, size);
}

}  // namespace volstack::pool
