#include "compile/nvrtc_step.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

#include <chrono>

namespace tvmffi_jit::compile::detail {

Expected<CommandRecord, CommandFailure> run_nvrtc_step(const NvrtcStep& step, const std::string& dir,
                                                       BuildResult* result) {
  auto start = std::chrono::steady_clock::now();
  NvrtcResult r = nvrtc_compile(step.request);
  CommandRecord rec;
  rec.description = "nvrtc " + step.request.source_name + " --gpu-architecture=" + nvrtc_architecture(step.request) +
                    (r.effective_options.empty() ? "" : " (" + util::join(r.effective_options, " ") + ")");
  rec.output = r.log;
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok) {
    return Unexpected<CommandFailure>{CommandFailure{
        CommandFailureKind::kFailed,
        "NVRTC failed to compile " + step.request.source_name + " for " + nvrtc_architecture(step.request) + ":\n" + r.log +
            nvrtc_missing_header_hint(r.log),
        rec}};
  }
  util::write_file_atomic(util::join_path(dir, step.output_name), r.binary);
  result->lowered_names = r.lowered_names;
  return rec;
}

}  // namespace tvmffi_jit::compile::detail
