// doctor's compiler launchers (cli/doctor_probes.h).
//
// Not components (a build needs none), but a launcher that is configured and
// broken silently costs every build a second compile, so doctor names its
// known limits and, for a CUDA launcher, compiles a tiny kernel through it in
// each nvcc mode the tool uses and checks the outputs as builds do.
#include <optional>
#include <string>
#include <vector>

#include "doctor_probes.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/parallel.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

using nlohmann::json;

std::vector<std::string> launcher_limits(const std::string& program, bool cuda) {
  std::vector<std::string> out;
  if (program == "ccache" && cuda)
    out.push_back("ccache caches nvcc -c only: --emit cubin/fatbin/ptx and embedded cubins run uncached "
                  "(ccache counts them as \"called for link\")");
  if (program == "sccache" && cuda)
    out.push_back("released sccache versions may exit 0 without writing the output for newer nvcc releases "
                  "(the probe below tests this nvcc); such steps are re-run without the launcher and counted "
                  "as launcher_fallbacks");
  if ((program == "distcc" || program == "icecc" || program == "icecream") && cuda)
    out.push_back(program + " cannot distribute nvcc (nvcc does not compile preprocessed input): use sccache-dist "
                            "(docs/farm.md)");
  return out;
}

// Runs doctor's probe compiles with a timeout: a launcher that hangs (a
// distributed one waiting for its scheduler) must not hang doctor.
class ProbeRunner final : public compile::CommandRunner {
 public:
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    util::ProcessOptions o = options;
    o.timeout_seconds = kLauncherProbeTimeoutSeconds;
    return util::run_process(argv, o);
  }
  static constexpr double kLauncherProbeTimeoutSeconds = 120;
};

// One nvcc mode of the launcher probe: a tiny manifest (the kernel file, the
// emit kind, its archs, the launcher as the build would be given it), planned
// and run by the build's own plan and executor, so the probe runs exactly the
// command lines a build runs and checks the outputs the way it does.
struct ModeProbe {
  json entry;            // {"mode", "exit", "output_ok"[, "output"]}
  bool launcher_lied = false;  // it exited 0 without the outputs, so the build ran the step without it
};

ModeProbe probe_nvcc_mode(const std::string& mode, compile::EmitKind emit, const std::string& archs,
                     const std::string& kernel, const toolchain::Launcher& launcher, const toolchain::Toolchain& tc,
                     const std::string& dir) {
  compile::Manifest m;
  m.name = "probe";
  m.emit = emit;
  m.sources = {kernel};
  m.cuda_arch = toolchain::parse_arch_list(archs, "doctor");
  m.cuda_launcher = launcher.argv;
  m.cuda_launcher_source = launcher.source;
  const compile::BuildPlan plan = compile::make_plan(m, tc, compile::PlanOptions{});
  ProbeRunner runner;
  compile::ExecuteOptions exec;
  exec.jobs = 1;
  exec.hide_compiler_output = true;
  exec.runner = &runner;
  exec.status = &compile::silent_sink();
  auto built = compile::try_execute_plan(plan, util::join_path(dir, mode), exec);
  if (!built) {
    const compile::CommandFailure& failed = built.error();
    return {{{"mode", mode},
             {"exit", failed.record.status},
             {"output_ok", false},
             {"output", failed.record.output.substr(0, 2000)}},
            failed.kind == compile::CommandFailureKind::kNoOutput};
  }
  // The compile is the first command (an object is then copied to its artifact).
  const compile::CommandRecord& compiled = built->commands.at(0);
  return {{{"mode", mode}, {"exit", compiled.status}, {"output_ok", !compiled.launcher_fallback}},
          compiled.launcher_fallback};
}

}  // namespace

json probe_launcher(const std::optional<std::string>& given, const char* option, const char* variable,
                    const std::vector<std::string>& compiler_words, const char* compiler_variable, bool cuda,
                    const toolchain::EnvLookup& env, const Expected<toolchain::TvmFfiLocation>& tvm_ffi) {
  json l = json::object();
  std::optional<std::vector<std::string>> given_words;
  if (given) given_words = toolchain::split_launcher_text(*given);
  // The build's precedence (toolchain::choose_launcher), so doctor reports
  // the launcher a build would use.
  const toolchain::LauncherWords chosen =
      toolchain::choose_launcher(given_words, option, env(variable), variable, compiler_words, compiler_variable);
  const std::vector<std::string>& words = chosen.words;
  l["configured"] = !words.empty();
  l["source"] = chosen.source.empty() ? json(nullptr) : json(chosen.source);
  l["argv"] = words;
  l["program"] = nullptr;
  l["version"] = nullptr;
  l["limits"] = json::array();
  l["probe"] = json::array();
  l["problem"] = nullptr;
  if (words.empty()) return l;
  auto found = toolchain::find_launcher(words, chosen.source);
  if (!found) {
    l["problem"] = found.error();
    return l;
  }
  const toolchain::Launcher& resolved = *found;
  l["argv"] = resolved.argv;
  const std::string program = util::file_name(resolved.argv[0]);
  l["program"] = resolved.argv[0];
  if (auto v = doctor_version_line(resolved.argv[0])) l["version"] = *v;
  l["limits"] = launcher_limits(program, cuda);
  if (!cuda) return l;
  toolchain::Toolchain tc;
  tc.cuda = toolchain::find_cuda_toolkit(env);
  if (!tc.cuda) return l;
  tc.tvm_ffi = tvm_ffi;
  // Each nvcc mode the tool runs, through the launcher, with its outputs
  // checked. An object is a module's unit and needs tvm-ffi's headers to be
  // planned; without tvm-ffi only the device-code modes are probed.
  util::TempDir dir(util::temp_root(), "tvmffi-jit-doctor-");
  const std::string kernel = util::join_path(dir.path(), "k.cu");
  util::write_file(kernel, "__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n");
  struct Mode {
    const char* name;
    compile::EmitKind emit;
    const char* archs;
  };
  const Mode modes[] = {{"object", compile::EmitKind::kObject, "8.0"},
                        {"cubin", compile::EmitKind::kCubin, "8.0"},
                        {"fatbin", compile::EmitKind::kFatbin, "8.0 9.0"},
                        {"ptx", compile::EmitKind::kPtx, "8.0"}};
  // The modes are independent builds in directories of their own: probed
  // side by side, reported in this order.
  std::vector<std::optional<ModeProbe>> probes(std::size(modes));
  util::parallel_for(probes.size(), 0, [&](size_t i) {
    const Mode& mode = modes[i];
    if (mode.emit == compile::EmitKind::kObject && !tc.tvm_ffi) return;
    probes[i] = probe_nvcc_mode(mode.name, mode.emit, mode.archs, kernel, resolved, tc, dir.path());
  });
  std::vector<std::string> broken;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (!probes[i]) continue;
    if (probes[i]->launcher_lied) broken.push_back(modes[i].name);
    l["probe"].push_back(probes[i]->entry);
  }
  if (!broken.empty())
    l["problem"] = program + " exited 0 without writing the output of nvcc " + util::join(broken, ", ") + " with " +
                   tc.cuda->nvcc + ": builds re-run those steps without it (launcher_fallbacks); "
                   "upgrade it or leave it unset for CUDA";
  return l;
}

void print_launchers(const json& launchers, std::string& out) {
  for (const char* which : {"cxx", "cuda"}) {
    const json& l = launchers[which];
    if (!l["configured"].get<bool>()) continue;
    out += std::string("  launcher ") + which + ": " + util::join(l["argv"].get<std::vector<std::string>>(), " ");
    if (l["version"].is_string()) out += "  " + l["version"].get<std::string>();
    out += "  (" + l["source"].get<std::string>() + ")\n";
    for (const auto& p : l["probe"])
      out += "    nvcc " + p["mode"].get<std::string>() + " through it: " + p["exit"].get<std::string>() +
             (p["output_ok"].get<bool>() ? ", output written" : ", NO OUTPUT") + "\n";
    for (const auto& lim : l["limits"]) out += "    limit: " + lim.get<std::string>() + "\n";
    if (l["problem"].is_string()) out += "    problem: " + l["problem"].get<std::string>() + "\n";
  }
}

}  // namespace tvmffi_jit::cli
