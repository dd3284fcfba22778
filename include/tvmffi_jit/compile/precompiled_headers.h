// Precompiled headers (PCH) for the tvm-ffi header a C++ unit starts with.
//
// Every export unit starts with `#include <tvm/ffi/container/tensor.h>`
// (compile/wrapper.h), kernel sources often with another tvm-ffi header,
// and parsing what that pulls in is two thirds of a small unit's compile
// (0.46 s of 0.70 s with GCC 12 at -O2). GCC loads a precompiled header
// instead when it finds `<name>.gch` in a folder searched before the
// header's own, and the object it writes is the same, byte for byte
// (docs/build.md, "Precompiled headers"). So a C++ unit compiled by GCC
// without a launcher whose first include (before any token) is a
// `tvm/ffi/...` header gets `-I<folder> -fpch-deps` in front of its flags,
// where <folder> holds `<name>.gch`, built with the unit's own flags from
// the very header its search would find, and `<name>` itself (a link to
// that header: a later include of it, which no PCH serves, finds it there
// and skips it by its guard). -fpch-deps makes the depfile list the headers
// the PCH stands for, so what the unit read is recorded as without a PCH
// (the link's own path is taken out). Neither flag is in argv(), so
// neither is in a key.
//
// Where: one folder per user (TVMFFI_JIT_PCH_DIR, else
// $XDG_CACHE_HOME/tvmffi-jit-toolchain/pch), owned by us and writable by
// nobody else, else none is used. Each PCH is a folder named by the SHA-256
// of what makes it: the compiler's identity, the header's path, the flags,
// the compile environment. It is built the third time a flag set is
// compiled (in this command or later ones: a PCH costs 1.6 s and ~65 MiB
// and saves 0.35 s per compile, so a flag set compiled once or twice pays
// nothing), under a file lock, into a temp folder renamed into place.
//
// GCC does not check the headers a PCH holds against the disk, so we do:
// its record lists every header its build read with its full stamp (util/
// stamp.h), each settled and on a filesystem with trusted stamps, the .gch's
// own stamp, and the files that did not exist and would have been read had
// they existed (a header's name in include folders searched before its own,
// __has_include answers: compile/search_dirs.h, compile/include_probes.h);
// a PCH is used only while all of them are as recorded, checked once per
// command (a few hundred stats). The key holds the compiler's identity, not
// its path: GCC itself refuses a PCH another cc1plus wrote (it is ignored,
// and the unit compiled from the text). Anything else (a header
// changed, a record unreadable, a build that failed, a compiler that could
// not load it) means compiling without one, never a failed build. The
// kKeep PCHs used last are kept; building another removes the one unused longest.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

struct ExecuteOptions;
class CompilerIdentities;

class PrecompiledHeaders {
 public:
  // About 1 GiB at ~65 MiB each: a kernel library's flag variants, several
  // compilers, and a test suite's (10 here) fit without evicting each other.
  static constexpr size_t kKeep = 16;
  // A flag set's PCH is built at its kBuildAtCompile-th compile (in one
  // command or over several); it pays from about its fifth use.
  static constexpr uint64_t kBuildAtCompile = 3;
  // The record beside each .gch (its headers and stamps).
  static constexpr const char* kRecordName = "pch.json";

  // `dir`: where the PCHs live (created 0700 at the first compile that may
  // use one). Empty, or a folder another user owns or may write: none is used.
  explicit PrecompiledHeaders(std::string dir);
  ~PrecompiledHeaders();
  // A folder was given (whether it is usable is known at the first job).
  bool enabled() const { return configured_; }

  // What decides a step's PCH besides the step itself.
  struct StepContext {
    std::string compiler_identity;  // its compiler's (`--version` text and content hash)
    std::vector<std::string> search_dirs;  // include_search_dirs(step, "", environment)
    // The toolchain's own folders (adoptable_roots.h): their __has_include
    // probes are the compiler's, keyed by its identity.
    std::vector<std::string> toolchain_roots;
    std::vector<ModuleKeyInputs::EnvVar> environment;
  };
  // On the planning thread: whether `step` may use a PCH and which one.
  void prepare(const CompileStep& step, const StepContext& context);
  // prepare() for every C++ step of `plan` before it runs (cached, in a
  // --build-dir or uncached), done when the step is about to compile: its
  // compiler identified then, with the memo in `identity_memo_dir` (the
  // first one given; "" none).
  void prepare_plan(const BuildPlan& plan, const toolchain::Toolchain& tc,
                    const std::vector<ModuleKeyInputs::EnvVar>& environment, const std::string& identity_memo_dir);

  // On a worker, as `step` starts: the folder to put first on its include
  // path, holding a PCH proven current; built now when its flag set was
  // compiled before. nullopt: compile without one.
  std::optional<std::string> folder_for(const CompileStep& step, const ExecuteOptions& options);

  // The compiler could not load it: removed, and not used again by this command.
  void discard(const CompileStep& step);

  // What `step` was prepared for: the PCH's key, or "" (none). For tests and -v.
  std::string key_of(const CompileStep& step) const;

 private:
  struct Request {
    std::string key;
    std::string compiler;
    std::string name;    // as the unit includes it: "tvm/ffi/function.h"
    std::string header;  // the file its search finds
    std::vector<std::string> flags;  // the unit's, without its trailing -I folders
    std::vector<std::string> search_dirs;  // what the PCH's build searches
    std::vector<std::string> toolchain_roots;
    // The unit's -I folders after the header's: in neither the PCH nor its
    // key, checked per unit (shadowed()).
    std::vector<std::string> trailing_dirs;
  };
  struct Proven {
    bool ready = false;   // its record holds and every stamp in it is current
    bool probes = false;  // its build asked __has_include of files outside the toolchain
    std::vector<std::string> names;  // of what it read, under the folder each was found in
  };
  struct State;
  State& state_of(const std::string& key);
  void prepare_pending(const CompileStep& step);
  bool open_dir_locked();
  Proven prove(const std::string& folder, const std::string& name) const;
  static bool shadowed(const Proven& proven, const std::vector<std::string>& trailing_dirs);
  bool build(const Request& r, const std::string& folder, const ExecuteOptions& options);
  static std::optional<std::vector<std::string>> compile_header(const Request& r, const std::string& tmp,
                                                                const std::string& gch,
                                                                const ExecuteOptions& options);
  static std::vector<std::string> builtin_dirs(const Request& r, const std::string& tmp,
                                               const ExecuteOptions& options);
  static std::optional<std::string> record_of(const Request& r, std::vector<std::string> read, int64_t start_ns,
                                              const std::string& tmp, const std::string& gch,
                                              const ExecuteOptions& options);
  void evict_old(const std::string& keep) const;

  const bool configured_;
  std::string dir_;
  bool dir_checked_ = false;  // open_dir_locked() ran (dir_ is cleared when unusable)
  mutable std::mutex mutex_;
  std::unordered_map<const CompileStep*, Request> requests_;
  std::unordered_map<const CompileStep*, StepContext> pending_;  // prepare_plan()'s, not yet asked for
  std::unique_ptr<CompilerIdentities> ids_;  // pending_ steps' compilers, identified once each
  std::unordered_map<std::string, std::unique_ptr<State>> states_;
};

}  // namespace tvmffi_jit::compile
