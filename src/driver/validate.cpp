// Driver validation (include/tvmffi_jit/driver/validate.h): plan, run the
// crash-isolated child, judge; printing is validate_print.cpp. The steps are
// described in validate_internal.h.
#include "tvmffi_jit/driver/validate.h"

#include "validate_internal.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::driver {

std::vector<FileVerdict> validate_files(const std::vector<devcode::FileReport>& reports,
                                        const ValidateOptions& options) {
  Plan plan = plan_validation(reports, options);
  ProbeOutcome outcome = run_probes(plan, options);
  judge(plan, outcome);
  return std::move(plan.verdicts);
}

FileVerdict validate_file(const std::string& path, const devcode::FileReport& offline,
                          const ValidateOptions& options) {
  devcode::FileReport r = offline;
  if (r.path.empty()) r.path = path;
  return validate_files({r}, options).front();
}

int exit_code_for(const std::vector<FileVerdict>& verdicts) {
  bool no_driver = false;
  for (const auto& v : verdicts) {
    if (v.verdict == Verdict::kInvalid) return static_cast<int>(ExitCode::kInvalid);
    if (v.verdict == Verdict::kNoDriver) no_driver = true;
  }
  return no_driver ? static_cast<int>(ExitCode::kMissingTool) : 0;
}

}  // namespace tvmffi_jit::driver
