// Expected<T>: a value, or the reason there is none.
//
// The error model (ARCHITECTURE.md, "Errors"):
//   * tvmffi_jit::Error (util/error.h) is for what ends the command: thrown,
//     carrying its exit code, caught once in cli::run().
//   * Expected<T> is for "found, or why not": lookups whose failure is an
//     ordinary answer the caller decides about (toolchain finders: a build
//     turns a missing nvcc into exit 4 only when it needs nvcc, doctor reports
//     it and goes on). The reason is a complete sentence fragment the caller
//     can show as it is ("CUDA_HOME=/opt/cuda has no bin/nvcc").
//
// A small C++17 stand-in for std::expected<T, std::string>: no exceptions
// inside, value() on an empty one is a programming error (asserted).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tvmffi_jit {

// The "why not" of an Expected, so `return Unexpected{"no nvcc on PATH"};` reads as what it is.
struct Unexpected {
  std::string why;
};

template <typename T>
class Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as std::expected
  Expected(Unexpected failure) : why_(std::move(failure.why)) {}  // NOLINT

  bool has_value() const { return value_.has_value(); }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return *value_;
  }
  const T& value() const& {
    assert(has_value());
    return *value_;
  }
  T&& value() && {
    assert(has_value());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Why there is no value ("" when there is one).
  const std::string& error() const { return why_; }

  // The value, or `fallback` when there is none.
  T value_or(T fallback) const& { return value_ ? *value_ : std::move(fallback); }

  // The value as an optional, dropping the reason.
  std::optional<T> to_optional() const& { return value_; }

  // The value, or `error_for(why)` thrown: for callers for whom absence is fatal.
  template <typename MakeError>
  T value_or_throw(MakeError&& error_for) && {
    if (!value_) throw error_for(why_);
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
  std::string why_;
};

}  // namespace tvmffi_jit
