// Result<T>: a value or a non-OK Status, shaped like std::expected (C++23).
#pragma once

#include <utility>
#include <variant>

#include "util/check.h"
#include "util/status.h"

namespace volstack {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    VS_CHECK(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // Requires !ok().
  const Status& status() const& {
    VS_CHECK(!ok());
    return std::get<Status>(v_);
  }
  Status status() && {
    VS_CHECK(!ok());
    return std::move(std::get<Status>(v_));
  }

  // Requires ok().
  T& value() & {
    VS_CHECK(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    VS_CHECK(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    VS_CHECK(ok());
    return std::move(std::get<T>(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  void IgnoreError() const {}

 private:
  std::variant<T, Status> v_;
};

}  // namespace volstack

#define VS_CONCAT_INNER_(a, b) a##b
#define VS_CONCAT_(a, b) VS_CONCAT_INNER_(a, b)

// `VS_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a Result or returns its Status.
#define VS_ASSIGN_OR_RETURN(decl, expr) \
  VS_ASSIGN_OR_RETURN_IMPL_(VS_CONCAT_(vs_result_, __LINE__), decl, expr)
#define VS_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return std::move(tmp).status();   \
  decl = std::move(tmp).value()
