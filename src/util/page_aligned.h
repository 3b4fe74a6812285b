// PageAlignedAllocator: a std::allocator whose memory starts on a 4 KiB boundary, for
// buffers handed to a device that may be opened with O_DIRECT (bdev/file_device.h), which
// otherwise copies each unaligned buffer into an aligned one before writing it.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace volstack {

template <typename T>
struct PageAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{4096};

  PageAlignedAllocator() = default;
  template <typename U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t n) { ::operator delete(p, n * sizeof(T), kAlign); }

  template <typename U>
  bool operator==(const PageAlignedAllocator<U>&) const {
    return true;
  }
};

using PageAlignedBytes = std::vector<uint8_t, PageAlignedAllocator<uint8_t>>;

}  // namespace volstack
