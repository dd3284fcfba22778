// libFuzzer target over the entry.bin reader (cache/store/entry_bin.h) and
// the entry checks its records go through (checked_entry). The stamp an
// input must match is taken from the input itself, so that the fuzzer gets
// past it to the record. Every input must be read or refused, never crash or
// allocate beyond what its bytes could hold. Replayed over
// tests/fuzz/corpus/entry_bin by the `fuzz.entry_bin` ctest (tests/fuzz/tests.cmake).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/store/entry_bin.h"

namespace {

// The five stamp fields after the length-prefixed magic (entry_bin.cpp's layout).
tvmffi_jit::util::FullStamp stamp_in(std::string_view in) {
  auto u64_at = [&](size_t at) -> uint64_t {
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && at + i < in.size(); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
  };
  const uint64_t magic = u64_at(0);
  if (magic > in.size()) return {};
  const size_t at = 8 + static_cast<size_t>(magic);
  return {u64_at(at), u64_at(at + 8), u64_at(at + 16), static_cast<int64_t>(u64_at(at + 24)),
          static_cast<int64_t>(u64_at(at + 32))};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tvmffi_jit::cache;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto raw = entry_from_bin(in, stamp_in(in))) (void)checked_entry(std::move(*raw));
  return 0;
}
