// PageAlignedBytes: a growable byte buffer whose memory starts on a 4 KiB boundary, for
// buffers handed to a device that may be opened with O_DIRECT (bdev/file_device.h), which
// otherwise copies each unaligned buffer into an aligned one before writing it. (A
// std::vector with an aligned allocator would construct its bytes one at a time: libstdc++
// copies with memmove only for std::allocator.)
//
// Threads: none; one owner.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "util/check.h"

namespace volstack {

class PageAlignedBytes {
 public:
  static constexpr size_t kAlign = 4096;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_.get(); }
  operator std::span<const uint8_t>() const { return {data_.get(), size_}; }

  void Append(std::span<const uint8_t> bytes) {
    Reserve(size_ + bytes.size());
    if (!bytes.empty()) std::memcpy(data_.get() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
  }
  void AppendZeros(size_t n) {
    Reserve(size_ + n);
    if (n > 0) std::memset(data_.get() + size_, 0, n);
    size_ += n;
  }
  // Keeps the memory for the next fill.
  void clear() { size_ = 0; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  void Reserve(size_t need) {
    if (need <= capacity_) return;
    const size_t cap = (std::max(need, 2 * capacity_) + kAlign - 1) / kAlign * kAlign;
    std::unique_ptr<uint8_t[], Free> bigger(static_cast<uint8_t*>(std::aligned_alloc(kAlign, cap)));
    VS_CHECK(bigger != nullptr);  // out of memory, as new[] would be
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = cap;
  }

  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace volstack
