// Internal invariant checks, after ZFS's VERIFY/ASSERT: a broken invariant is a bug in
// volstack, never a property of input, so it aborts with both operands printed. Bad bytes
// from a disk or the wire are Status::Corruption, never a check.
//
//   VS_CHECK(cond)          always on
//   VS_CHECK_OP(a, <=, b)   always on, prints a and b
//   VS_DCHECK / VS_DCHECK_OP  debug builds only (NDEBUG removes them)
#pragma once

#include <cstdint>
#include <string>

namespace volstack::internal {

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr);
[[noreturn]] void CheckOpFailed(const char* file, int line, const char* expr, uint64_t a,
                                uint64_t b);

}  // namespace volstack::internal

#define VS_CHECK(cond) \
  ((cond) ? (void)0 : ::volstack::internal::CheckFailed(__FILE__, __LINE__, #cond))

#define VS_CHECK_OP(a, op, b)                                                    \
  do {                                                                           \
    auto vs_a_ = (a);                                                            \
    auto vs_b_ = (b);                                                            \
    if (!(vs_a_ op vs_b_))                                                       \
      ::volstack::internal::CheckOpFailed(__FILE__, __LINE__, #a " " #op " " #b, \
                                          static_cast<uint64_t>(vs_a_),          \
                                          static_cast<uint64_t>(vs_b_));         \
  } while (0)

#ifdef NDEBUG
#define VS_DCHECK(cond) ((void)0)
#define VS_DCHECK_OP(a, op, b) ((void)0)
#else
#define VS_DCHECK(cond) VS_CHECK(cond)
#define VS_DCHECK_OP(a, op, b) VS_CHECK_OP(a, op, b)
#endif
