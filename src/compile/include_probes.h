// __has_include and __has_include_next ask whether a header exists without
// reading it, so the depfile does not name what they probed: a header that
// appears after a build that was told "no" would be a stale hit. The files a
// unit read (its source -- a file, or the generated text of inline sources --
// and the headers of its depfile) outside the toolchain's own directories are
// scanned for them; each literal operand ("x.h", <x.h>) is resolved along the
// search directories (the including file's own directory first for the quote
// form; every search directory for both forms, a superset of what the
// compiler tries), each candidate as the file the compiler would open
// (util::opened_path), and
//   * the candidates tried before the first existing one are recorded as
//     shadows ("did not exist": one appearing is a miss, cache/headers.h),
//   * the first existing one is recorded as a header (its removal or change
//     is a miss).
// An operand the scan cannot read as a literal (a macro, as in
// `#define HAS(h) __has_include(h)`) makes the unit unkeyable: built, not
// stored. Probes of the compiler's built-in directories are not recorded
// (they belong to the toolchain, keyed by its identity).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tvmffi_jit::compile {

struct IncludeProbes {
  std::vector<std::string> found;   // existing answers: record as headers
  std::vector<std::string> absent;  // candidates that did not exist: record as shadows
  std::optional<std::string> unkeyable;
};

// `files`: absolute paths of what the unit read. `search_dirs`: where the
// compile looks (compile/search_dirs.h). Files under `skip_roots` (the
// toolchain's) are not scanned; candidates under `build_dir` (the staging
// dir) are ignored.
IncludeProbes has_include_probes(const std::vector<std::string>& files, const std::vector<std::string>& search_dirs,
                                 const std::vector<std::string>& skip_roots, const std::string& build_dir);

// The probes of one text (NVRTC's source has no file; `file` names it and
// its directory is searched first for the quote form), into `out`.
void add_has_include_probes(const std::string& file, const std::string& text, const std::vector<std::string>& search_dirs,
                            const std::string& build_dir, IncludeProbes& out);
// One header name looked up as an include would be (`own_dir` first, when
// given, then `search_dirs`): absent candidates until the first that exists.
void add_candidates(const std::string& name, const std::string& own_dir, const std::vector<std::string>& search_dirs,
                    const std::string& build_dir, IncludeProbes& out);

}  // namespace tvmffi_jit::compile
