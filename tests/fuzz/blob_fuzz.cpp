// libFuzzer target over the blob reader (cache/transfer/blob.h): zstd framing, tar
// headers, the manifest, sizes, hashes and the end of the archive. Every
// input must either read completely or throw tvmffi_jit::Error, never crash
// or allocate beyond the limits. Built with clang -fsanitize=fuzzer by
// tests/fuzz/CMakeLists.txt, and replayed over tests/fuzz/corpus/blob by the
// `fuzz.blob` ctest (tests/fuzz/tests.cmake).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/util/error.h"

namespace {

struct DiscardingReceiver : tvmffi_jit::cache::BlobReceiver {
  uint64_t bytes = 0;
  void open(const tvmffi_jit::cache::BlobEntry&, const tvmffi_jit::cache::BlobFile&) override {}
  void write(const char*, size_t n) override { bytes += n; }
  void close() override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tvmffi_jit::cache;
  BlobLimits limits;
  limits.max_entries = 4;
  limits.max_total_bytes = 16u << 20;  // keep fuzzing fast; the cap path is what matters
  limits.max_manifest_bytes = 64u << 10;
  DiscardingReceiver rx;
  try {
    (void)read_blob(blob_source(std::string_view(reinterpret_cast<const char*>(data), size)), rx, limits);
  } catch (const tvmffi_jit::Error&) {
  }
  return 0;
}
