#include "util/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/check.h"

namespace volstack {

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string reason = std::strerror(code_);
  if (message_.empty()) return reason;
  return message_ + ": " + reason;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  if (!message_.empty()) m += ": " + message_;
  return Status(code_, std::move(m));
}

Status ErrnoStatus(std::string_view what, int err) {
  if (err == 0) err = EIO;
  return Status::FromErrno(err, std::string(what));
}

namespace internal {

void CheckFailed(const char* file, int line, const char* expr) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
  std::abort();
}

void CheckOpFailed(const char* file, int line, const char* expr, uint64_t a, uint64_t b) {
  std::fprintf(stderr, "%s:%d: check failed: %s (%llu vs %llu)\n", file, line, expr,
               static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  std::abort();
}

}  // namespace internal
}  // namespace volstack
