// Status: the outcome of an operation, carried as a value across every layer.
//
// A Status is either OK or an errno-style code with a message that names the object and the
// operation (e.g. "vdev /tmp/a: read at 4096: Input/output error"). Codes map 1:1 to errno so
// the edges (NBD wire codes, FUSE's -errno, CLI exit codes) translate without loss.
//
// Statuses are [[nodiscard]]: dropping one is a compile warning (an error in CI). Where a
// caller really means to ignore one, it says so with IgnoreError(), which is greppable.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

namespace volstack {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status Ok() { return Status(); }
  // `code` is a positive errno value; 0 is OK.
  static Status FromErrno(int code, std::string message) {
    return Status(code, std::move(message));
  }
  static Status InvalidArgument(std::string m) { return Status(EINVAL, std::move(m)); }
  static Status NoSpace(std::string m) { return Status(ENOSPC, std::move(m)); }
  static Status IoError(std::string m) { return Status(EIO, std::move(m)); }
  static Status NotFound(std::string m) { return Status(ENOENT, std::move(m)); }
  static Status Exists(std::string m) { return Status(EEXIST, std::move(m)); }
  static Status Busy(std::string m) { return Status(EBUSY, std::move(m)); }
  static Status ReadOnly(std::string m) { return Status(EROFS, std::move(m)); }
  static Status NotSupported(std::string m) { return Status(EOPNOTSUPP, std::move(m)); }
  // Bytes read from a disk or the wire that do not decode: reported as EUCLEAN ("Structure
  // needs cleaning"), the code Linux filesystems use for a checksum or format failure.
  static Status Corruption(std::string m) { return Status(EUCLEAN, std::move(m)); }

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsCorruption() const { return code_ == EUCLEAN; }
  bool IsNotFound() const { return code_ == ENOENT; }

  // "message: strerror(code)" for people; "OK" when ok.
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context` + ": ".
  Status WithContext(std::string_view context) const;

  // Explicitly discards the status (the only sanctioned way).
  void IgnoreError() const {}

 private:
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}

  int code_ = 0;
  std::string message_;
};

// A Status from the current errno (or `err`) with "<what>: <strerror>" semantics.
Status ErrnoStatus(std::string_view what, int err = errno);

}  // namespace volstack

// Returns early from the enclosing function if `expr` (a Status) is not OK.
#define VS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::volstack::Status vs_status_ = (expr);  \
    if (!vs_status_.ok()) return vs_status_; \
  } while (0)
