// make_plan's device-code-only plan (compile/plan_parts.h): one kernel
// source -> one cubin, fatbin or PTX file, through NVRTC or one nvcc step.
#include "compile/plan_parts.h"
#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

namespace {

// NVRTC lowers the one kernel source in-process.
NvrtcStep nvrtc_step(const Manifest& m, const toolchain::Toolchain& tc, const BuildPlan& plan,
                     const std::string& source_file) {
  const bool is_inline = m.has_inline_cuda();
  NvrtcStep step;
  step.request.source = is_inline ? join_inline_sources(m.cuda_sources) : util::read_file(source_file);
  // NVRTC searches `#include "x.h"` next to the source *name*, as nvcc does
  // next to the file: the full path keeps quote includes working from any cwd.
  step.request.source_name = is_inline ? m.name + ".cu" : source_file;
  step.request.arch = plan.archs[0];
  step.request.output = m.emit == EmitKind::kCubin ? NvrtcOutput::kCubin : NvrtcOutput::kPtx;
  if (tc.tvm_ffi) step.request.include_paths = {tc.tvm_ffi->include_dir, tc.tvm_ffi->dlpack_include_dir};
  append_flags(step.request.include_paths, m.extra_include_paths);
  append_flags(step.request.include_paths, m.system_include_paths);  // NVRTC has no -isystem
  step.request.options = stripped_flags(m.extra_cuda_cflags);
  step.request.name_expressions = m.kernel_names;
  step.output_name = plan.artifact_name;
  return step;
}

}  // namespace

void plan_device_output(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options,
                        const Targets& t, BuildPlan& plan) {
  const std::string emit = emit_kind_name(m.emit);
  if ((m.emit == EmitKind::kCubin || m.emit == EmitKind::kPtx) && plan.archs.size() != 1)
    need_one_arch("emit " + emit, plan.archs, plan.arch_source,
                  "use --emit fatbin to bundle several, or pick one with --arch");
  if (m.emit == EmitKind::kCubin && plan.archs[0].ptx)
    throw usage_error("emit cubin holds SASS only, but " + plan.archs[0].text() +
                      " asks for PTX: use --emit fatbin (SASS + PTX) or --emit ptx");
  const std::string out_ext = m.emit == EmitKind::kCubin ? ".cubin" : m.emit == EmitKind::kFatbin ? ".fatbin" : ".ptx";
  plan.artifact_name = m.name + out_ext;
  const bool is_inline = m.has_inline_cuda();
  const std::string source_file = is_inline ? "" : m.sources.front();
  if (t.nvrtc) {
    plan.nvrtc = nvrtc_step(m, tc, plan, source_file);
    return;
  }
  std::vector<std::string> arch_flags;
  CompileOutput out = CompileOutput::kFatbin;
  if (m.emit == EmitKind::kCubin) {
    out = CompileOutput::kCubin;
    arch_flags = {toolchain::gencode_flag(plan.archs[0], toolchain::GencodeCode::kSass)};
  } else if (m.emit == EmitKind::kPtx) {
    out = CompileOutput::kPtx;
    arch_flags = {"-arch=" + plan.archs[0].compute()};
  } else {
    arch_flags = toolchain::gencode_flags(plan.archs);
  }
  CompileStep s = device_compile(m, tc, out, arch_flags, options.split_compile);
  if (is_inline) {
    s.generated_name = m.name + ".cu";
    s.generated_text = join_inline_sources(m.cuda_sources);
    s.display = s.generated_name;
  } else {
    s.input_path = source_file;
    s.display = display_path(m, source_file, options.working_directory);
  }
  s.object_name = plan.artifact_name;
  s.depfile_name = s.object_name + ".d";
  set_launcher(s, t.cuda_launcher);
  plan.compile_steps.push_back(std::move(s));
}


}  // namespace tvmffi_jit::compile
