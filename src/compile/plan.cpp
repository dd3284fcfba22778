// make_plan (compile/plan.h): what a manifest compiles for (the backend,
// archs, launchers), then the device-code plan (compile/plan_device.cpp) or
// the module plan (compile/plan_module.cpp), both built with the flags and
// steps of compile/plan_steps.cpp; the step types' command lines.
#include "tvmffi_jit/compile/plan.h"

#include <algorithm>

#include "compile/plan_parts.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

const char* mode_flag(CompileOutput o) {
  switch (o) {
    case CompileOutput::kObject: return "-c";
    case CompileOutput::kCubin: return "-cubin";
    case CompileOutput::kFatbin: return "-fatbin";
    case CompileOutput::kPtx: return "-ptx";
  }
  return "-c";
}

}  // namespace

const char* language_name(Language l) {
  switch (l) {
    case Language::kC: return "c";
    case Language::kCxx: return "c++";
    case Language::kCuda: return "cuda";
    case Language::kHip: return "hip";
  }
  return "c++";
}

std::string CompileStep::compiler_input() const { return generated_text ? generated_name : input_path; }

std::vector<std::string> CompileStep::argv() const {
  std::vector<std::string> a = {compiler};
  if (depfile_name.empty()) {
    // The embed unit: assembled, no dependency file.
  } else if (language == Language::kCuda) {
    a.insert(a.end(), {"--generate-dependencies-with-compile", "--dependency-output", depfile_name});
  } else {
    // -MD, not -MMD: headers found through -isystem, CPATH or /usr/include
    // change the object as much as the project's own (nvcc's -MD lists them too).
    a.insert(a.end(), {"-MD", "-MF", depfile_name});
  }
  append_flags(a, flags);
  a.insert(a.end(), {mode_flag(output), compiler_input(), "-o", object_name});
  return a;
}

std::vector<std::string> CompileStep::command(bool with_launcher, int nvcc_threads, int split, bool jobserver) const {
  std::vector<std::string> a = argv();
  const bool launched = with_launcher && !launcher.empty();
  if (language == Language::kCuda) {
    if (launched && !depfile_name.empty()) {
      a[1] = "-MD";
      a[2] = "-MF";
    }
    if (nvcc_threads > 1) a.insert(a.end() - 4, {"--threads", std::to_string(nvcc_threads)});
    if (split_compile == kSplitCompileAuto && split > 1) {
      a.insert(a.end() - 4, "--split-compile=" + std::to_string(split));
      if (jobserver) a.insert(a.end() - 4, "--jobserver");
    }
  }
  if (launched) a.insert(a.begin(), launcher.begin(), launcher.end());
  return a;
}

int CompileStep::gencode_targets() const {
  if (language != Language::kCuda) return 0;
  int n = 0;
  for (const auto& f : flags) n += util::starts_with(f, "-gencode") ? 1 : 0;
  return n;
}

std::vector<std::string> LinkStep::argv() const {
  std::vector<std::string> a;
  switch (kind) {
    case Kind::kSharedLibrary:
      a.push_back(program);
      append_flags(a, inputs);
      append_flags(a, flags);
      // What the linker read (libraries found through -L/-l, crt files): GNU
      // ld, gold and lld write it, and the cache records and re-checks those
      // files as it does headers.
      if (!depfile_name.empty()) a.push_back("-Wl,--dependency-file=" + depfile_name);
      a.insert(a.end(), {"-o", output_name});
      break;
    case Kind::kMergeObjects:
      a = {program, "-r", "-o", output_name};
      append_flags(a, inputs);
      break;
    case Kind::kCopyObject: break;
  }
  return a;
}

GpuBackend resolve_backend(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options) {
  if (m.backend) return *m.backend;
  if (m.emit == EmitKind::kCubin || m.emit == EmitKind::kFatbin || m.emit == EmitKind::kPtx) return GpuBackend::kCuda;
  for (const auto& s : m.sources)
    if (util::extension(s) == ".hip") return GpuBackend::kHip;
  if (!m.has_gpu_sources()) return GpuBackend::kCuda;  // nothing for a GPU: no backend flags at all
  if (options.env_gpu_backend) {
    std::string v = util::to_lower(std::string(util::trim(*options.env_gpu_backend)));
    if (auto b = parse_gpu_backend(v)) return *b;
  }
  if (!tc.cuda && tc.rocm) return GpuBackend::kHip;
  return GpuBackend::kCuda;
}

namespace {

// The launcher for one language, by precedence (toolchain::choose_launcher),
// its program found on PATH (exit 4 naming where it came from when it is not).
toolchain::Launcher pick_launcher(const std::optional<std::vector<std::string>>& given, const std::string& given_source,
                                  const std::optional<std::string>& env_value, const char* env_name,
                                  const std::vector<std::string>& from_compiler_variable, const char* variable_name) {
  toolchain::LauncherWords chosen =
      toolchain::choose_launcher(given, given_source, env_value, env_name, from_compiler_variable, variable_name);
  return toolchain::resolve_launcher(chosen.words, chosen.source);
}

// 1. Targets: the backend, the CUDA or ROCm archs (on `plan`), the launchers.
//    A missing toolkit or launcher program is exit 4 before anything runs.
Targets resolve_targets(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options,
                        BuildPlan& plan) {
  Targets t;
  plan.backend = resolve_backend(m, tc, options);
  t.hip = plan.backend == GpuBackend::kHip;
  t.device_emit = m.emit == EmitKind::kCubin || m.emit == EmitKind::kFatbin || m.emit == EmitKind::kPtx;
  t.nvrtc = m.compiler == DeviceCompiler::kNvrtc;
  if (!t.device_emit && !tc.tvm_ffi) throw missing_tool_error(tc.tvm_ffi.error());

  // Backend hip: tvm_ffi's flags (docs/build.md "HIP"); C++ units get the
  // ROCm include directory and the module links libamdhip64 even without
  // HIP sources, as in tvm_ffi.
  if (t.hip) {
    if (!tc.rocm) throw missing_tool_error("backend hip needs ROCm: " + tc.rocm.error());
    t.rocm_include = util::join_path(tc.rocm->home, "include");
    t.rocm_lib = util::join_path(tc.rocm->home, "lib");
    t.hipcc = tc.rocm->hipcc;
    if (m.has_gpu_sources()) {
      toolchain::RocmArchResolution r = toolchain::resolve_rocm_archs(m.command_line_rocm_arch, m.rocm_arch,
                                                                      options.env_rocm_arch_list, m.extra_cuda_cflags);
      plan.rocm_archs = r.archs;
      plan.arch_source = r.source;
    }
  }
  if (!t.hip && (m.cuda_runtime || m.cuda_driver) && !tc.cuda)
    throw missing_tool_error(std::string(m.cuda_runtime ? "cuda_runtime" : "cuda_driver") +
                             " needs the CUDA toolkit: " + tc.cuda.error());
  if (!t.hip && m.needs_cuda()) {
    if (!t.nvrtc && !tc.cuda) throw missing_tool_error(tc.cuda.error());
    toolchain::ArchResolution r =
        toolchain::resolve_archs(m.command_line_arch, m.cuda_arch, options.env_arch_list, options.detect_gpus);
    plan.archs = r.archs;
    plan.arch_source = r.source;
  }
  if ((t.hip ? m.has_gpu_sources() : m.needs_cuda()) && !t.nvrtc)
    t.cuda_launcher = pick_launcher(m.cuda_launcher, m.cuda_launcher_source, options.env_cuda_launcher,
                                    "TVMFFI_JIT_CUDA_LAUNCHER", {}, "");
  if (!t.device_emit) {
    t.cxx_launcher = pick_launcher(m.cxx_launcher, m.cxx_launcher_source, options.env_cxx_launcher,
                                   "TVMFFI_JIT_CXX_LAUNCHER", tc.host.cxx_launcher, "CXX");
    t.c_launcher = pick_launcher(m.cxx_launcher, m.cxx_launcher_source, options.env_cxx_launcher,
                                 "TVMFFI_JIT_CXX_LAUNCHER", tc.host.cc_launcher, "CC");
  }
  return t;
}

}  // namespace

BuildPlan make_plan(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options) {
  BuildPlan plan;
  plan.name = m.name;
  plan.emit = m.emit;
  plan.compiler = m.compiler;
  for (const auto& [f, _] : m.functions) plan.functions.push_back(f);
  const Targets targets = resolve_targets(m, tc, options, plan);
  if (targets.device_emit)
    plan_device_output(m, tc, options, targets, plan);
  else
    plan_module(m, tc, options, targets, plan);
  return plan;
}

}  // namespace tvmffi_jit::compile
