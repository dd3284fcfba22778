// Internal entry points shared by the devcode sources (not public API).
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "devcode/bytes.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

// Bytes of kernel and variable listings (the structs and their names) one
// file may still produce, shared by the threads that parse its entries: a
// crafted entry can declare millions of kernels that all share one name
// string, each of which would become a Kernel of its own. take() throws
// FormatError once the file's allowance is spent; the inspector then drops
// the listings of every entry (which ones got theirs first depends on the
// thread count, and the report must not).
class ListingBudget {
 public:
  explicit ListingBudget(uint64_t bytes) : limit_(bytes), left_(bytes) {}
  void take(uint64_t bytes) {
    uint64_t left = left_.load(std::memory_order_relaxed);
    do {
      if (left < bytes) {
        exhausted_.store(true, std::memory_order_relaxed);
        fail("the kernel and variable listings exceed this file's limit of {} bytes", limit_);
      }
    } while (!left_.compare_exchange_weak(left, left - bytes, std::memory_order_relaxed));
  }
  bool exhausted() const { return exhausted_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // What one kernel or variable listing costs, from its name (the
  // demangled name is reckoned at twice the mangled one).
  static uint64_t kernel_cost(std::string_view name) { return sizeof(Kernel) + 3 * name.size(); }
  static uint64_t global_cost(std::string_view name) { return sizeof(Global) + name.size(); }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> left_;
  std::atomic<bool> exhausted_{false};
};

// Fills the ELF fields, kernels and globals of `entry` from a cubin. When
// entry.arch is already set (from a fatbin header) it is kept. Throws FormatError.
void parse_cubin(Bytes cubin, const InspectOptions& options, Entry& entry, ListingBudget& listing);

// Fills ptx_version (unless set), arch (unless set), kernels and globals of
// `entry` from PTX text (trailing NULs allowed). Throws FormatError.
void parse_ptx(std::string_view text, const InspectOptions& options, Entry& entry, ListingBudget& listing);

// Itanium C++ demangling; returns the input when it is not a mangled name.
std::string demangle(std::string_view name);

}  // namespace tvmffi_jit::devcode
