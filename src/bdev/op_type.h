// OpType: the operations of the BlockDevice contract, named once so that observers (trace
// counters, fault rules) can count or select them by type. Masks are `1u << OpType`.
#pragma once

#include <cstdint>
#include <string_view>

namespace volstack::bdev {

enum class OpType : uint8_t {
  kRead = 0,
  kWrite,
  kFlush,
  kDiscard,
  kWriteZeroes,
  kQueryAllocation,
};
inline constexpr int kNumOpTypes = 6;

inline constexpr uint32_t OpBit(OpType op) { return 1u << static_cast<unsigned>(op); }
inline constexpr uint32_t kAllOps = (1u << kNumOpTypes) - 1;
// The operations that change the device's contents or durability.
inline constexpr uint32_t kMutatingOps = OpBit(OpType::kWrite) | OpBit(OpType::kFlush) |
                                         OpBit(OpType::kDiscard) | OpBit(OpType::kWriteZeroes);

inline constexpr std::string_view OpTypeName(OpType op) {
  switch (op) {
    case OpType::kRead:
      return "read";
    case OpType::kWrite:
      return "write";
    case OpType::kFlush:
      return "flush";
    case OpType::kDiscard:
      return "discard";
    case OpType::kWriteZeroes:
      return "write-zeroes";
    case OpType::kQueryAllocation:
      return "allocation-query";
  }
  return "?";
}

}  // namespace volstack::bdev
