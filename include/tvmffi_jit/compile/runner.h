// The executor's two seams (the idea of ninja's CommandRunner and Status):
// how a command runs, and where a build shows what it does. The executor
// never calls util::run_process or util::Progress itself, so its scheduling,
// launcher fallback, failure handling and incremental skips are unit-tested
// with a runner that fakes compilers (tests/unit/test_compile_executor.cpp),
// and doctor runs its probes through the same executor with a timeout and no
// progress lines.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::compile {

// Runs one command of a plan and waits for it. A non-zero exit is a result
// for the executor to judge, not an error; a program that cannot be started
// throws Error(kMissingTool), as util::run_process does. Called from the
// executor's worker threads concurrently.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) = 0;
};

// util::run_process.
CommandRunner& process_runner();

// What a build shows while it runs: a run of steps, each started (the
// "[3/7] nvcc k.cu" label) and finished with the output to show (warnings;
// empty when there is none or it is hidden), and the executor's own warnings
// (a launcher that did not deliver). Runs nest as util::Progress's do: the
// outermost begin() sets the total. Called from worker threads.
class StatusSink {
 public:
  virtual ~StatusSink() = default;
  virtual void begin(size_t steps) = 0;
  virtual void started(std::string_view label) = 0;
  virtual void finished(std::string_view label, std::string_view output) = 0;
  virtual void warning(std::string_view message) = 0;
  virtual void end() = 0;
};

// util::Progress::global(): the status line (or one line per step) on
// stderr, output printed above it; warnings through spdlog.
StatusSink& progress_sink();
// Shows nothing: for callers that report results themselves (doctor's probes).
StatusSink& silent_sink();

}  // namespace tvmffi_jit::compile
