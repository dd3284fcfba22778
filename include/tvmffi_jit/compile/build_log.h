// Incremental builds in a build directory (`build --build-dir DIR`, Python's
// build_directory): ninja's model, kept in one small file in DIR.
//
// Per step (a translation unit, the embed unit, the link) the log records
//   * the command: a fingerprint of the exact argv (and of the generated
//     source text, for units compiled from text the plan generates);
//   * its outputs with their stat (mtime_ns, size, inode, device);
//   * its inputs: the source, the headers the compiler reported in its
//     depfile, the compiler program, the objects a link reads; each with its
//     stat and, when that stat is ambiguous (modified less than
//     kAmbiguousWindowNs before the step started, so a later write within the
//     same timestamp tick could keep it), the content's SHA-256 as well.
// A step runs again when it has no record, its command changed, an output or
// an input changed or disappeared, or an input was modified while the step
// ran (recorded as dirty). Nothing else is compared; no file is re-hashed
// unless its record carries a hash. A no-op build reads the log, stats the
// files and writes nothing. docs/build.md ("Incremental build directories").
//
// The executor (execute_plan with ExecuteOptions::incremental) is the only
// user: it asks check_up_to_date() before each step and record()s after it succeeded.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

class BuildLog {
 public:
  static constexpr const char* kFileName = ".tvmffi-jit.buildlog.json";
  static constexpr const char* kLockName = ".tvmffi-jit.lock";
  static constexpr int kFormatVersion = 1;
  // A larger log is not ours (or is damaged): it is ignored, every step runs.
  static constexpr uint64_t kMaxBytes = 16ull << 20;
  // Files modified this close before a step started get a content hash.
  // Timestamps come from the kernel's coarse clock (a tick of 1-10 ms) and
  // some file systems keep whole seconds; one second covers both.
  static constexpr int64_t kAmbiguousWindowNs = 1'000'000'000;

  struct Input {
    std::string path;  // absolute, or relative to the build dir
    // A file the plan itself produces earlier in this build (an object read
    // by the link): its producing step tracks it, so its stat is enough.
    bool produced = false;
  };

  // Loads DIR's log. A missing, oversized, malformed or other-version log is
  // an empty one (every step runs); `why_empty()` says which.
  explicit BuildLog(std::string dir);

  // A value when step `id` is up to date for `command`; else why it must run
  // ("no record", "the command changed", "input /x/a.h changed", ...).
  Expected<void> check_up_to_date(const std::string& id, const std::string& command) const;
  // Drops the record of a step about to run, so a failure leaves it to run again.
  void forget(const std::string& id);
  // After step `id` succeeded: stats (and, when ambiguous, hashes) its files.
  // `started_ns` is the wall clock just before the command started. Thread-safe.
  void record(const std::string& id, const std::string& command, const std::vector<Input>& inputs,
              const std::vector<std::string>& outputs, int64_t started_ns);
  // Writes the log atomically when it changed, keeping the steps in `ids`
  // only (a step gone from the plan leaves the log with it).
  void save(const std::vector<std::string>& ids);

  const std::string& why_empty() const { return why_empty_; }

  // A command fingerprint: the argv, each element delimited (util::KeyHasher),
  // plus named extras (the generated source text).
  static std::string fingerprint(const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& extras = {});
  static int64_t now_ns();  // CLOCK_REALTIME, the clock file timestamps follow

 private:
  struct File {
    std::string path;
    util::FileStamp stamp;
    std::string sha256;  // set when the stamp was ambiguous
  };
  struct Step {
    std::string command;
    std::vector<File> inputs;
    std::vector<File> outputs;
    bool dirty = false;  // an input was modified while the step ran
  };
  Expected<void> load(const std::string& text);  // or what is wrong with it
  std::string resolve(const std::string& path) const;
  Expected<void> check_unchanged(const File& f, const char* what) const;

  std::string dir_;
  std::string why_empty_;
  mutable std::mutex mutex_;
  std::map<std::string, Step> steps_;
  bool changed_ = false;
};

}  // namespace tvmffi_jit::compile
