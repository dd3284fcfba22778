// Expected<T, E>: a value, or the reason there is none.
//
// The error model (ARCHITECTURE.md, "Errors"):
//   * tvmffi_jit::Error (util/error.h) is for what ends the command: thrown,
//     carrying its exit code, caught once in cli::run().
//   * Expected<T, E> is for everything that can fail for a reason the caller
//     decides about ("found, or why not"; "stored, or timed out"). E is either
//       - std::string (the default): a reason that is only ever shown, a
//         complete sentence fragment ("CUDA_HOME=/opt/cuda has no bin/nvcc"); or
//       - Failure<Kind>: an enum the caller branches on plus the message to
//         show, so no caller ever tells failures apart by parsing a message.
//
// A small stand-in for C++23 std::expected: no exceptions inside, value() on
// an empty one (or error() on a full one) is a programming error (asserted).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace tvmffi_jit {

// A failure a caller can branch on: what kind (an enum of the layer that
// fails) and the message for a person.
template <typename Kind>
struct Failure {
  Kind kind{};
  std::string message;
};

// The "why not" of an Expected, so `return Unexpected{"no nvcc on PATH"};`
// and `return Unexpected{Failure<K>{K::kTimeout, "..."}};` read as what they are.
template <typename E = std::string>
struct Unexpected {
  E error;
};
Unexpected(const char*) -> Unexpected<std::string>;
Unexpected(std::string) -> Unexpected<std::string>;
template <typename Kind>
Unexpected(Failure<Kind>) -> Unexpected<Failure<Kind>>;

// Shorthand: `return fail(Kind::kCorrupt, "entry.json is not JSON");`
template <typename Kind>
Unexpected<Failure<Kind>> fail(Kind kind, std::string message) {
  return Unexpected<Failure<Kind>>{Failure<Kind>{kind, std::move(message)}};
}

// The message of either error shape, for code that only shows it.
inline const std::string& failure_message(const std::string& why) { return why; }
template <typename Kind>
const std::string& failure_message(const Failure<Kind>& f) {
  return f.message;
}

template <typename T, typename E = std::string>
class Expected {
 public:
  using value_type = T;
  using error_type = E;

  Expected(T value) : value_(std::move(value)) {}                 // NOLINT: implicit, as std::expected
  Expected(Unexpected<E> failure) : error_(std::move(failure.error)) {}  // NOLINT
  // A value convertible to T (a const char* for an Expected<std::string>, a
  // derived type) without spelling the conversion at every return.
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Expected>>>
  Expected(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

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

  // Why there is no value (an empty E when there is one).
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }
  // The message to show, whatever E is.
  const std::string& why() const { return failure_message(error_); }

  // The value, or `fallback` when there is none.
  T value_or(T fallback) const& { return value_ ? *value_ : std::move(fallback); }

  // The value as an optional, dropping the reason.
  std::optional<T> to_optional() const& { return value_; }

  // The value, or `error_for(error)` thrown: for callers for whom absence is fatal.
  template <typename MakeError>
  T value_or_throw(MakeError&& error_for) && {
    if (!value_) throw error_for(error_);
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
  E error_{};
};

// Expected<void, E>: done, or why not.
template <typename E>
class Expected<void, E> {
 public:
  Expected() = default;
  Expected(Unexpected<E> failure) : failed_(true), error_(std::move(failure.error)) {}  // NOLINT

  bool has_value() const { return !failed_; }
  explicit operator bool() const { return has_value(); }
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }
  const std::string& why() const { return failure_message(error_); }

 private:
  bool failed_ = false;
  E error_{};
};

}  // namespace tvmffi_jit
