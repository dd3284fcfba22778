#include "compile/pch_unit.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// A depfile larger than this is not a compiler's: left as it is.
constexpr uint64_t kMaxDepfileBytes = 16u << 20;

}  // namespace

// What a unit's first include is decided from: the start of its source
// (a file's first 64 KiB; an include later than that is not a first one).
std::string source_start(const std::string& path) {
  constexpr size_t kMaxBytes = 64 * 1024;
  std::string text;
  try {
    const int fd = util::open_for_reading(path);
    text.resize(kMaxBytes);
    auto n = util::pread_some(fd, text.data(), text.size(), 0);
    ::close(fd);
    text.resize(n ? *n : 0);
  } catch (const Error&) {
    text.clear();
  }
  return text;
}

// The key's environment: what can change a GCC C++ compile. Left out are
// the variables that choose the compiler (its identity is keyed) and those
// only nvcc, hipcc or the linker read; any other the object keys hold stays.
bool changes_a_gcc_compile(const std::string& name) {
  static const char* const kOthers[] = {"CXX", "CC", "CUDA_HOME", "NVCC_CCBIN", "NVCC_PREPEND_FLAGS",
                                        "NVCC_APPEND_FLAGS", "INCLUDES", "SYSTEM_INCLUDES", "LIBRARIES",
                                        "CUDAFE_FLAGS", "PTXAS_FLAGS", "LIBRARY_PATH", "LD_RUN_PATH",
                                        "GNUTARGET", "LDEMULATION", "DEVICE_LIB_PATH"};
  for (const char* o : kOthers)
    if (name == o) return false;
  return !util::starts_with(name, "HIP") && !util::starts_with(name, "ROCM");
}

// `flags` without the -I folders given after `header_dir`'s own -I (into
// `trailing`, as the compiler sees them). Unchanged when the header was not
// found through an -I folder.
std::vector<std::string> without_trailing_include_dirs(const std::vector<std::string>& flags,
                                                       const std::string& header_dir,
                                                       std::vector<std::string>& trailing) {
  std::vector<std::string> kept;
  std::vector<std::string> kept_dirs;
  bool past = false;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    const bool separate = f == "-I" && i + 1 < flags.size();
    if (!separate && !(util::starts_with(f, "-I") && f.size() > 2)) {
      kept.push_back(f);
      continue;
    }
    const std::string dir = separate ? flags[i + 1] : f.substr(2);
    const std::string opened = util::opened_path(dir);
    if (past) {
      // A folder given again is searched where it was first given (GCC
      // drops the repeat): not one of the unit's own (tvm_ffi passes
      // tvm-ffi's include folder twice when dlpack's is the same).
      if (std::find(kept_dirs.begin(), kept_dirs.end(), opened) == kept_dirs.end()) trailing.push_back(opened);
    } else {
      past = opened == header_dir;
      kept_dirs.push_back(opened);
      kept.push_back(f);
      if (separate) kept.push_back(dir);
    }
    if (separate) ++i;
  }
  if (!past) trailing.clear();
  return past ? kept : flags;
}

std::optional<FirstInclude> first_include(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string_view::npos) return std::nullopt;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      if (i == std::string_view::npos) return std::nullopt;
      i += 2;
    } else {
      break;
    }
  }
  auto skip_blanks = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  if (i >= text.size() || text[i] != '#') return std::nullopt;
  ++i;
  skip_blanks();
  if (text.compare(i, 7, "include") != 0) return std::nullopt;
  i += 7;
  skip_blanks();
  if (i >= text.size() || (text[i] != '<' && text[i] != '"')) return std::nullopt;
  const bool angle = text[i] == '<';
  const size_t end = text.find_first_of(angle ? ">\n" : "\"\n", i + 1);
  if (end == std::string_view::npos || text[end] == '\n' || end == i + 1) return std::nullopt;
  return FirstInclude{std::string(text.substr(i + 1, end - i - 1)), angle};
}

std::optional<std::vector<std::string>> precompilable_flags(const CompileStep& step) {
  const std::vector<std::string> a = step.argv();
  const size_t n = a.size();
  if (n < 8 || a[1] != "-MD" || a[2] != "-MF" || a[n - 4] != "-c" || a[n - 2] != "-o") return std::nullopt;
  std::vector<std::string> flags(a.begin() + 4, a.end() - 4);
  for (const auto& f : flags) {
    if (f.empty() || f[0] == '@') return std::nullopt;  // a response file: what it says is not seen here
    for (const char* p : {"-include", "-imacros", "-x", "-save-temps", "-fpch-preprocess"})
      if (util::starts_with(f, p)) return std::nullopt;
    for (const char* o : {"-E", "-S", "-M", "-MM", "-fsyntax-only", "-fno-pch-deps", "-fdirectives-only"})
      if (f == o) return std::nullopt;
    // Debug info records the compile's switches (DW_AT_producer), which
    // would then name -fpch-deps: the object would differ from one built
    // without a PCH. So would -frecord-gcc-switches'.
    if ((util::starts_with(f, "-g") && f != "-g0") || f == "-frecord-gcc-switches") return std::nullopt;
  }
  return flags;
}

void forget_pch_reads(const std::string& depfile_path, const std::string& folder, const std::string& target) {
  auto text = util::read_small_file(depfile_path, kMaxDepfileBytes);
  if (!text) return;
  std::vector<std::string> deps = parse_depfile(*text);
  const auto under = [&](const std::string& p) { return util::is_path_under(p, folder); };
  if (std::none_of(deps.begin(), deps.end(), under)) return;
  deps.erase(std::remove_if(deps.begin(), deps.end(), under), deps.end());
  util::write_file(depfile_path, format_depfile({target}, deps));
}

bool mentions_precompiled_header(const std::string& compiler_output) {
  return compiler_output.find(".gch") != std::string::npos ||
         compiler_output.find("precompiled header") != std::string::npos ||
         compiler_output.find("PCH") != std::string::npos;
}

}  // namespace tvmffi_jit::compile
