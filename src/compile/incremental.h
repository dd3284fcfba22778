// Incremental builds (ExecuteOptions::incremental, --build-dir): what
// decides each step of a plan (its command and inputs, as the build log
// records them, compile/build_log.h) and the lock and log of one
// execute_plan(). Private to the compile layer; used by the executor.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/build_log.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/util/lock.h"

namespace tvmffi_jit::compile {

// What decides a unit's output besides its inputs' content: the argv as
// argv() gives it (no launcher, no --threads: neither changes the output)
// and, for a generated source, its text.
std::string unit_command(const CompileStep& step);

// A unit's inputs: the compiler, the source (a generated one is in the
// command instead) and every file its depfile names.
std::vector<BuildLog::Input> unit_inputs(const CompileStep& step, const CompiledUnit& unit);

// The embed unit's inputs: the compiler and the embedded files (a built one
// as an output of this plan); its assembler source names them, and is in the
// command (unit_command).
std::vector<BuildLog::Input> embed_inputs(const BuildPlan& plan);

// The link's command: its argv, or for an object copied as is, the copy.
std::string link_command(const LinkStep& link);

// The link's inputs: the linker and the objects (a relative one is an output of this plan).
std::vector<BuildLog::Input> link_inputs(const LinkStep& link);

// The incremental state of one execute_plan(): the directory lock and the
// log, saved however the build ends, so the units that did compile before a
// failure are not compiled again.
class Incremental {
 public:
  Incremental(const std::string& dir, const BuildPlan& plan, bool verbose);
  ~Incremental();
  Incremental(const Incremental&) = delete;
  Incremental& operator=(const Incremental&) = delete;

  // true: skip the step. Else it is forgotten until it succeeds again.
  bool up_to_date(const std::string& id, const std::string& command);
  BuildLog& log() { return *log_; }

 private:
  std::vector<std::string> ids_;
  bool verbose_;
  util::FileLock lock_;
  std::optional<BuildLog> log_;
};

}  // namespace tvmffi_jit::compile
