// Cache keys: SHA-256 over delimiter-tagged fields (util::KeyHasher).
//
// A module key covers everything that decides the bytes of the artifact and
// can be known before compiling; the headers the compilers read are only known
// afterwards and are checked on lookup against the entry's recorded list
// (cache/headers.h, compile/search_dirs.h). Nothing here reads a file's mtime: sources enter by
// content, compilers by their version output (toolchain/compiler_identity.h).
//
// Include resolution depends on where a source lives (`#include "h.h"` is
// searched first in the including file's directory), so a file source enters
// with its directory, and include paths enter too. A module key has two
// forms (cache/portable.h): the portable key hashes every path under the
// base directory as "<base>/relative" (what the remote tier and
// `cache export` use, so a checkout at another path finds it), and the local
// key binds it to the base directory (hash(portable, base)), so two copies
// of one project in two folders on one machine still get two entries; see
// docs/cache.md and docs/remote.md.
//
// Version history (kCacheFormatVersion covers this field layout and the
// entry.json grammar in cache/entry.h; bump it on any change to either):
//   1: initial layout.
//   2: entry.json records the objects a module was linked from ("objects")
//      and header paths that are not UTF-8 as "path_hex".
//      Also portable module keys (paths under the base directory relative), the
//      local key derived from it; entry.json gains portable_key and base_dir.
//   3: C/C++ units record system headers too (-MD), the link records what the
//      linker read (--dependency-file), header records carry the paths that
//      would shadow them ("shadows"), and the key covers every environment
//      variable the compilers and the linker read that changes their output
//      (relevant_environment_names()).
//   4: several results per module key (cache/results.h): a key's directory
//      holds result directories named by their content, and a remote holds
//      each result as an object of its own plus the key's result list. Bumped
//      so that no new key lands in a format-3 entry directory (an entry.json
//      beside its artifact), which maintenance then removes as an old entry.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/cache/entry.h"

namespace tvmffi_jit::compile {

// The key's format version is the cache's (cache::kCacheFormatVersion, in
// cache/entry.h: it covers this field layout and entry.json's grammar).
using cache::Key;

struct SourceInput {
  std::string name;       // file name for file sources, "<inline cpp>" style label for inline pieces
  std::string directory;  // absolute directory of a file source; empty for inline text
  std::string content;
};

struct CompilerInput {
  std::string role;      // "cxx", "cc", "nvcc", "host-cxx", "linker"...
  std::string path;      // absolute path as invoked
  std::string resolved;  // symlinks resolved
  std::string identity;  // `--version` output, or "sha256:<content hash>" when that failed
};

struct FlagGroup {
  std::string step;  // what these flags are for: "cxx", "cuda", "link", "compile a.cc"...
  std::vector<std::string> flags;
};

struct ModuleKeyInputs {
  // Absolute; paths under it enter the portable key relative to it
  // (cache/portable.h). Empty: every path enters as it is.
  std::string base_dir;
  std::string tool_version;  // defaults to TVMFFI_JIT_VERSION when empty
  std::string emit_kind;     // "module", "object", "cubin", "fatbin", "ptx"
  std::string name;
  std::vector<SourceInput> sources;
  std::vector<std::pair<std::string, std::string>> functions;  // name, docstring
  std::vector<FlagGroup> flags;
  std::vector<std::string> include_paths;
  std::vector<std::string> archs;
  std::vector<CompilerInput> compilers;
  std::string tvm_ffi_version;
  std::string tvm_ffi_include_dir;
  // Relevant environment, name -> value; an unset variable is passed with
  // `set` false so "unset" and "set to empty" differ.
  struct EnvVar {
    std::string name;
    std::string value;
    bool set = false;
  };
  std::vector<EnvVar> environment;
  // Anything else the planner knows that changes the output (device
  // compiler, kernel names, embedded binaries' content hashes...), as
  // tag/value pairs in a fixed order.
  std::vector<std::pair<std::string, std::string>> extra;
};

// One translation unit's object: keyed on its own inputs only, so changing
// one of N sources recompiles one TU.
struct ObjectKeyInputs {
  std::string tool_version;
  std::string language;  // "c++", "cuda", "c"
  CompilerInput compiler;
  std::vector<std::string> flags;  // the full compile argv minus the program, input and output paths
  SourceInput source;
  std::vector<std::string> include_paths;
  std::vector<ModuleKeyInputs::EnvVar> environment;
  std::vector<std::pair<std::string, std::string>> extra;
};

Key compute_module_key(const ModuleKeyInputs& in, bool keep_trace = false);
Key compute_object_key(const ObjectKeyInputs& in, bool keep_trace = false);

// The environment variables that change what a build produces: the ones
// that pick the compilers (CXX, CC, CUDA_HOME) and every variable gcc, nvcc
// and GNU ld read that changes their output (NVCC_APPEND_FLAGS, CPATH,
// LIBRARY_PATH, SOURCE_DATE_EPOCH, ...; docs/cache.md lists each with why).
const std::vector<std::string>& relevant_environment_names();
// Their values through `env` (the CLI's one reader of the environment,
// toolchain::EnvLookup: a value, or nullopt when unset), in the order of
// relevant_environment_names(), unset ones marked as such.
std::vector<ModuleKeyInputs::EnvVar> relevant_environment(
    const std::function<std::optional<std::string>(const std::string& name)>& env);

}  // namespace tvmffi_jit::compile
