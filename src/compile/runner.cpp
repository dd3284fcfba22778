#include "tvmffi_jit/compile/runner.h"

#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/progress.h"

namespace tvmffi_jit::compile {

namespace {

class ProcessRunner final : public CommandRunner {
 public:
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    return util::run_process(argv, options);
  }
};

class ProgressSink final : public StatusSink {
 public:
  void begin(size_t steps) override { util::Progress::global().start(steps); }
  void started(std::string_view label) override { util::Progress::global().next(label); }
  // Output of successful commands (warnings, ptxas info) is shown, not
  // swallowed (apache/tvm-ffi#565): through the progress line, which erases
  // itself first and serialises writers.
  void finished(std::string_view, std::string_view output) override {
    if (!output.empty()) util::Progress::global().print_above(output);
  }
  void warning(std::string_view message) override { spdlog::warn("{}", message); }
  void end() override { util::Progress::global().finish(); }
};

class SilentSink final : public StatusSink {
 public:
  void begin(size_t) override {}
  void started(std::string_view) override {}
  void finished(std::string_view, std::string_view) override {}
  void warning(std::string_view) override {}
  void end() override {}
};

}  // namespace

CommandRunner& process_runner() {
  static ProcessRunner runner;
  return runner;
}

StatusSink& progress_sink() {
  static ProgressSink sink;
  return sink;
}

StatusSink& silent_sink() {
  static SilentSink sink;
  return sink;
}

}  // namespace tvmffi_jit::compile
