// libFuzzer target over the whole offline inspector: format sniffing, ELF,
// cubin .nv.info records, fatbin containers, LZ4/zstd entries, PTX, host ELF
// and TVM FFI symbol scanning, the printers and entry_payload. Built with
// clang -fsanitize=fuzzer by tests/fuzz/CMakeLists.txt, and replayed over
// tests/fuzz/corpus/devcode by the `fuzz.devcode` ctest (tests/fuzz/tests.cmake).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/print.h"
#include "tvmffi_jit/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tvmffi_jit::devcode;
  InspectOptions options;
  options.max_entry_bytes = 64u << 20;  // keep fuzzing fast; the cap path is what matters
  // A small arena: entries both fit in shared ranges and overflow into their own.
  options.buffer_budget_bytes = 256u << 10;
  options.scan_data = true;  // a superset: .nv_fatbin plus the data-section scan
  FileReport report = inspect_bytes(data, size, "fuzz-input", options);
  // A report must be printable whatever it holds.
  (void)format_text(report);
  (void)to_json(report).dump();
  static std::FILE* null_out = std::fopen("/dev/null", "w");
  if (null_out) (void)write_json(null_out, std::vector<FileReport>{report}, 2);
  // Every entry the parser accepted must yield its bytes (or a clean error).
  for (const Entry& e : report.entries) {
    try {
      (void)entry_payload(data, size, e, options.max_entry_bytes);
    } catch (const tvmffi_jit::Error&) {
    }
  }
  return 0;
}
