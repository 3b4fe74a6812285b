// StreamingCopy (streaming_copy.h): the destination holds the source's bytes and nothing
// around it changes, on the streaming path (aligned, whole 64-byte lines) and the fallback.
#include "util/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace volstack {
namespace {

TEST(StreamingCopyTest, CopiesExactlyTheBytesAskedFor) {
  std::vector<uint8_t> src(70000);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 131 + i / 251);
  auto* arena = static_cast<uint8_t*>(std::aligned_alloc(4096, 81920));
  ASSERT_NE(arena, nullptr);
  for (const size_t dst_off : {size_t{0}, size_t{16}, size_t{1}, size_t{8}}) {
    for (const size_t src_off : {size_t{0}, size_t{3}}) {
      for (const size_t n : {size_t{0}, size_t{64}, size_t{4096}, size_t{16384}, size_t{65536},
                             size_t{100}, size_t{65}}) {
        std::memset(arena, 0xee, 81920);
        StreamingCopy(arena + 64 + dst_off, src.data() + src_off, n);
        for (size_t i = 0; i < 64 + dst_off; i++) ASSERT_EQ(arena[i], 0xee) << i;
        for (size_t i = 0; i < n; i++) {
          ASSERT_EQ(arena[64 + dst_off + i], src[src_off + i])
              << "byte " << i << " of " << n << ", dst +" << dst_off << ", src +" << src_off;
        }
        for (size_t i = 64 + dst_off + n; i < 81920; i++) ASSERT_EQ(arena[i], 0xee) << i;
      }
    }
  }
  std::free(arena);
}

}  // namespace
}  // namespace volstack
