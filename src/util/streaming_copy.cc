#include "util/streaming_copy.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace volstack {

void StreamingCopy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0 && n % 64 == 0) {
    for (size_t i = 0; i < n; i += 64) {
      const auto* s = reinterpret_cast<const __m128i*>(src + i);
      auto* d = reinterpret_cast<__m128i*>(dst + i);
      const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
      const __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    // Streaming stores are weakly ordered, and a lock's release is not promised to order
    // them: fence them, so that whoever this thread hands the buffer to sees them.
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace volstack
