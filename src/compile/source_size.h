// A cold unit's cost from something cheap that ranks units: the bytes its
// preprocessor may read (compile/cost_log.h, estimate source "source-size").
//
// The unit's source (or generated text) and every file its #include lines
// reach, each counted once: "..." next to the including file, then, for both
// forms, the include directories its flags name (-I, -isystem, --include-path,
// --system-include, in order). Conditionals are not evaluated (a header under
// an #if counts), and the compiler's own directories (the CUDA toolkit, the
// C++ library) are not searched, so every unit pays the same for them and
// the ranking is what its own project's headers make. A file is read and
// scanned once per command (memoised by path), at most kMaxFiles per unit.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// The include directories named by a compile step's flags, in order.
std::vector<std::string> include_dirs_of(const std::vector<std::string>& flags);

// The #include lines of a text: (quoted, name) in order.
std::vector<std::pair<bool, std::string>> scan_includes(std::string_view text);

class SourceSizer {
 public:
  static constexpr size_t kMaxFiles = 20000;
  // The bytes of the step's source and the headers it reaches (0 when the
  // source cannot be read). Thread-safe.
  uint64_t closure_bytes(const CompileStep& step);

 private:
  struct File {
    uint64_t bytes = 0;
    std::vector<std::pair<bool, std::string>> includes;
    bool ok = false;
  };
  const File& file(const std::string& path);  // mutex_ held

  std::mutex mutex_;
  std::unordered_map<std::string, File> files_;
  std::unordered_map<std::string, std::string> resolved_;  // dirs + from + name -> path ("" none)
};

}  // namespace tvmffi_jit::compile
