#include "tvmffi_jit/compile/plan.h"

#include <algorithm>

#include "tvmffi_jit/compile/embed.h"
#include "tvmffi_jit/compile/wrapper.h"
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

// tvm_ffi strips every user flag; an entry that is empty after that adds nothing.
std::vector<std::string> stripped(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& f : flags) {
    std::string_view t = util::trim(f);
    if (!t.empty()) out.emplace_back(t);
  }
  return out;
}

void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// `backend_include`: <rocm>/include for backend hip (tvm_ffi adds it to
// every unit's flags, C++ ones too), else empty.
std::vector<std::string> include_flags(const toolchain::Toolchain& tc, const Manifest& m,
                                       const std::string& backend_include = "") {
  std::vector<std::string> out;
  // tvm_ffi passes both default directories even when they are the same
  // (a wheel); kept so the command lines match.
  if (tc.tvm_ffi) {
    out.push_back("-I" + tc.tvm_ffi->include_dir);
    out.push_back("-I" + tc.tvm_ffi->dlpack_include_dir);
  }
  if (!backend_include.empty()) out.push_back("-I" + backend_include);
  for (const auto& p : m.extra_include_paths) out.push_back("-I" + p);
  for (const auto& p : m.system_include_paths) append(out, {"-isystem", p});
  return out;
}

// The option a flag sets when the same option given twice is a conflict, not
// an addition: "-O3" and "-O2" are one optimisation level (nvcc warns about an
// "incompatible redefinition"), "-std=c++20" and "-std=c++17" one standard.
// Empty: the flag is not one of those.
std::string_view exclusive_option(std::string_view flag) {
  if (util::starts_with(flag, "-O") || util::starts_with(flag, "--optimize")) return "optimize";
  if (util::starts_with(flag, "-std=") || util::starts_with(flag, "--std=") || flag == "-std" || flag == "--std")
    return "std";
  return {};
}

// One default flag as nvcc may also spell it: "-Xcompiler -fPIC" is
// "-Xcompiler=-fPIC", "--compiler-options=-fPIC", "--compiler-options -fPIC".
std::vector<std::string> host_option_words(const std::vector<std::string>& flags, size_t i) {
  const std::string& f = flags[i];
  for (std::string_view opt : {"-Xcompiler", "--compiler-options"}) {
    if (f == opt && i + 1 < flags.size()) return util::split_any(flags[i + 1], ",");
    if (util::starts_with(f, std::string(opt) + "=")) return util::split_any(f.substr(opt.size() + 1), ",");
  }
  return {};
}

}  // namespace

std::vector<std::string> defaults_not_overridden(const std::vector<std::string>& defaults,
                                                 const std::vector<std::string>& user) {
  std::vector<std::string> user_host_words;
  for (size_t i = 0; i < user.size(); ++i) append(user_host_words, host_option_words(user, i));
  auto given = [&](const std::string& flag) { return std::find(user.begin(), user.end(), flag) != user.end(); };
  std::vector<std::string> out;
  for (size_t i = 0; i < defaults.size(); ++i) {
    const std::string& d = defaults[i];
    if (std::vector<std::string> words = host_option_words(defaults, i); !words.empty()) {
      // "-Xcompiler -fPIC": kept unless the user passes the same host option.
      const bool same = std::all_of(words.begin(), words.end(), [&](const std::string& w) {
        return std::find(user_host_words.begin(), user_host_words.end(), w) != user_host_words.end();
      });
      if (!same) out.insert(out.end(), {d, defaults[i + 1]});
      if (d == "-Xcompiler" || d == "--compiler-options") ++i;
      continue;
    }
    if (given(d)) continue;  // the same flag again: once is enough
    std::string_view option = exclusive_option(d);
    if (!option.empty() &&
        std::any_of(user.begin(), user.end(), [&](const std::string& u) { return exclusive_option(u) == option; }))
      continue;  // the user's value replaces ours
    out.push_back(d);
  }
  return out;
}

namespace {

// `path` relative to the manifest's folder, or for a manifest given on the
// command line to the working directory (PlanOptions); else whole.
std::string display_path(const Manifest& m, const std::string& path, const std::string& working_directory) {
  const std::string base = m.manifest_path.empty() ? working_directory : util::parent_path(m.manifest_path);
  if (!base.empty() && util::starts_with(path, base + "/")) return path.substr(base.size() + 1);
  return path;
}

std::string stem(const std::string& path) {
  std::string f = util::file_name(path);
  size_t dot = f.rfind('.');
  return dot == std::string::npos ? f : f.substr(0, dot);
}

[[noreturn]] void need_one_arch(const std::string& what, const std::vector<toolchain::CudaArch>& archs,
                                const std::string& source, const std::string& suggestion) {
  std::vector<std::string> texts;
  for (const auto& a : archs) texts.push_back(a.text());
  throw usage_error(what + " is for one architecture, but " + source + " gives " + std::to_string(archs.size()) +
                    " (" + util::join(texts, " ") + "): " + suggestion);
}

// --split-compile for one nvcc step: N is a flag of the command (in its
// key); auto is decided per job by the scheduler (compile/launch.cpp) and
// the key says only "auto". A user's own --split-compile wins.
void set_split_compile(CompileStep& s, int policy) {
  for (const auto& f : s.flags)
    if (util::starts_with(f, "--split-compile") || util::starts_with(f, "-split-compile")) return;
  if (policy == kSplitCompileAuto) s.split_compile = kSplitCompileAuto;
  else if (policy > 1) s.flags.push_back("--split-compile=" + std::to_string(policy));
}

CompileStep device_compile(const Manifest& m, const toolchain::Toolchain& tc, CompileOutput output,
                           const std::vector<std::string>& arch_flags, int split_compile) {
  CompileStep s;
  s.language = Language::kCuda;
  s.output = output;
  s.compiler = tc.cuda->nvcc;
  s.flags = defaults_not_overridden({"-std=c++17", "-O2"}, stripped(m.extra_cuda_cflags));
  append(s.flags, arch_flags);
  append(s.flags, stripped(m.extra_cuda_cflags));
  append(s.flags, include_flags(tc, m));
  set_split_compile(s, split_compile);
  return s;
}

// The launcher for one language, by precedence (toolchain::choose_launcher),
// its program found on PATH (exit 4 naming where it came from when it is not).
toolchain::Launcher pick_launcher(const std::optional<std::vector<std::string>>& given, const std::string& given_source,
                                  const std::optional<std::string>& env_value, const char* env_name,
                                  const std::vector<std::string>& from_compiler_variable, const char* variable_name) {
  toolchain::LauncherWords chosen =
      toolchain::choose_launcher(given, given_source, env_value, env_name, from_compiler_variable, variable_name);
  return toolchain::resolve_launcher(chosen.words, chosen.source);
}

// The embed unit: one generated assembler file including every embedded
// binary (user files by absolute path, built cubins by their name in the
// build dir, where it is assembled), compiled like any unit. -fPIC: the
// object goes into a shared library whatever the other units' language.
CompileStep embed_step(const BuildPlan& plan, const std::string& compiler) {
  std::vector<EmbeddedBinary> items;
  for (const auto& e : plan.embeds) {
    EmbeddedBinary item{e.name, e.built_name.empty() ? e.path : e.built_name};
    if (e.built_name.empty()) check_embedded_file(item);
    items.push_back(std::move(item));
  }
  CompileStep s;
  s.language = Language::kCxx;  // the C++ compiler driver, told the language by its flags
  s.compiler = compiler;
  s.flags = {"-fPIC"};
  append(s.flags, embed_source_flags());
  s.generated_name = kEmbedSourceName;
  s.generated_text = embed_source_text(items);
  s.object_name = plan.embed_object_name;
  // The assembler writes no dependency file; the embedded files are inputs
  // of their own (the build log stamps them, the cache key hashes them).
  s.depfile_name.clear();
  s.display = "the embedded device binaries";
  return s;
}

void set_launcher(CompileStep& s, const toolchain::Launcher& l) {
  s.launcher = l.argv;
  s.launcher_source = l.empty() ? "" : l.source;
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
  append(a, flags);
  a.insert(a.end(), {mode_flag(output), compiler_input(), "-o", object_name});
  return a;
}

std::vector<std::string> CompileStep::command(bool with_launcher, int nvcc_threads, int split) const {
  std::vector<std::string> a = argv();
  const bool launched = with_launcher && !launcher.empty();
  if (language == Language::kCuda) {
    if (launched && !depfile_name.empty()) {
      a[1] = "-MD";
      a[2] = "-MF";
    }
    if (nvcc_threads > 1) a.insert(a.end() - 4, {"--threads", std::to_string(nvcc_threads)});
    if (split_compile == kSplitCompileAuto && split > 1) a.insert(a.end() - 4, "--split-compile=" + std::to_string(split));
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
      append(a, inputs);
      append(a, flags);
      // What the linker read (libraries found through -L/-l, crt files): GNU
      // ld, gold and lld write it, and the cache records and re-checks those
      // files as it does headers.
      if (!depfile_name.empty()) a.push_back("-Wl,--dependency-file=" + depfile_name);
      a.insert(a.end(), {"-o", output_name});
      break;
    case Kind::kMergeObjects:
      a = {program, "-r", "-o", output_name};
      append(a, inputs);
      break;
    case Kind::kCopyObject: break;
  }
  return a;
}

std::vector<std::string> default_cxx_flags() { return {"-std=c++17", "-fPIC", "-O2"}; }
std::vector<std::string> default_c_flags() { return {"-fPIC", "-O2"}; }
std::vector<std::string> default_cuda_flags() { return {"-Xcompiler", "-fPIC", "-std=c++17", "-O2"}; }
std::vector<std::string> default_hip_flags() {
  return {"-std=c++17", "-O2", "-fPIC", "-D__HIP_PLATFORM_AMD__=1", "-fno-gpu-rdc"};
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

// What a manifest compiles for, resolved once before any step is planned:
// the backend, the archs (on the plan) and the launchers.
struct Targets {
  bool device_emit = false;  // emit cubin, fatbin or ptx: device code only, no module
  bool nvrtc = false;
  bool hip = false;
  std::string rocm_include, rocm_lib, hipcc;  // backend hip only
  // Set on the compile steps, never on the embed unit or the link.
  toolchain::Launcher cuda_launcher, cxx_launcher, c_launcher;
};

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
  append(step.request.include_paths, m.extra_include_paths);
  append(step.request.include_paths, m.system_include_paths);  // NVRTC has no -isystem
  step.request.options = stripped(m.extra_cuda_cflags);
  step.request.name_expressions = m.kernel_names;
  step.output_name = plan.artifact_name;
  return step;
}

// 2a. Device code only: one kernel source -> one cubin/fatbin/PTX file,
//     through NVRTC or one nvcc step.
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

// The flags of a module's units, per language: our defaults first, less
// those the user's flags replace (-O3 for -O2, -std=c++20 for -std=c++17) or
// repeat; then the user's flags; then the include directories.
struct UnitFlags {
  std::vector<std::string> cxx, c, cuda, hip;
};

UnitFlags unit_flags(const Manifest& m, const toolchain::Toolchain& tc, const Targets& t, const BuildPlan& plan) {
  const std::vector<std::string> user_cflags = stripped(m.extra_cflags);
  const std::vector<std::string> user_cuda_cflags = stripped(m.extra_cuda_cflags);
  UnitFlags f;
  f.cxx = defaults_not_overridden(default_cxx_flags(), user_cflags);
  f.c = defaults_not_overridden(default_c_flags(), user_cflags);
  f.cuda = defaults_not_overridden(default_cuda_flags(), user_cuda_cflags);
  append(f.cuda, toolchain::gencode_flags(plan.archs));
  f.hip = defaults_not_overridden(default_hip_flags(), user_cuda_cflags);
  for (const auto& a : plan.rocm_archs) f.hip.push_back("--offload-arch=" + a);
  append(f.cxx, user_cflags);
  append(f.c, user_cflags);
  append(f.cuda, user_cuda_cflags);
  append(f.hip, user_cuda_cflags);
  const std::vector<std::string> includes = include_flags(tc, m, t.rocm_include);
  for (auto* flags : {&f.cxx, &f.c, &f.cuda, &f.hip}) append(*flags, includes);
  // cuda_runtime / cuda_driver: host units see the toolkit's headers
  // (cuda_runtime.h, cuda.h) as system headers, last, as nvcc gives them to
  // CUDA units itself.
  if (!t.hip && (m.cuda_runtime || m.cuda_driver)) {
    const std::string toolkit_include = util::join_path(tc.cuda->home, "include");
    append(f.cxx, {"-isystem", toolkit_include});
    append(f.c, {"-isystem", toolkit_include});
  }
  return f;
}

// Which translation unit receives the exports: inline C++, else the first
// C++ file, else inline CUDA, else the first CUDA file. For inline-only
// builds this is load_inline's rule (C++ if there is any, else CUDA).
enum class ExportHost { kNone, kInlineCpp, kCppFile, kInlineCuda, kCudaFile };

std::string first_file_with(const Manifest& m, Language lang) {
  for (const auto& s : m.sources) {
    std::string ext = util::extension(s);
    bool cuda = ext == ".cu" || ext == ".hip", c = ext == ".c", obj = ext == ".o";
    if (lang == Language::kCuda ? cuda : (!cuda && !c && !obj)) return s;
  }
  return "";
}

std::pair<ExportHost, std::string> export_host(const Manifest& m) {
  if (m.functions.empty()) return {ExportHost::kNone, ""};
  if (m.has_inline_cpp()) return {ExportHost::kInlineCpp, ""};
  if (std::string f = first_file_with(m, Language::kCxx); !f.empty()) return {ExportHost::kCppFile, f};
  if (m.has_inline_cuda()) return {ExportHost::kInlineCuda, ""};
  if (std::string f = first_file_with(m, Language::kCuda); !f.empty()) return {ExportHost::kCudaFile, f};
  return {ExportHost::kNone, ""};
}

// A module's translation units, numbered per language as tvm_ffi names
// their objects (cpp_0.o, c_0.o, cuda_0.o).
class UnitPlanner {
 public:
  UnitPlanner(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options, const Targets& t,
              BuildPlan& plan)
      : m_(m), tc_(tc), options_(options), t_(t), plan_(plan), flags_(unit_flags(m, tc, t, plan)) {}

  // Inline code, then the source files in order; returns the prebuilt
  // objects (.o sources), linked as they are.
  std::vector<std::string> add_units() {
    auto [host, host_file] = export_host(m_);
    // What GPU sources (.cu, .hip, inline CUDA) compile as.
    const Language gpu = t_.hip ? Language::kHip : Language::kCuda;
    if (m_.has_inline_cpp()) add_inline(Language::kCxx, "main.cpp", m_.cpp_sources, host == ExportHost::kInlineCpp,
                                        "cpp_sources");
    if (m_.has_inline_cuda())
      add_inline(gpu, "cuda.cu", m_.cuda_sources, host == ExportHost::kInlineCuda, "cuda_sources");
    std::vector<std::string> prebuilt_objects;
    for (const auto& path : m_.sources) {
      std::string ext = util::extension(path);
      if (ext == ".o") {
        prebuilt_objects.push_back(path);
        continue;
      }
      Language lang = (ext == ".cu" || ext == ".hip") ? gpu : ext == ".c" ? Language::kC : Language::kCxx;
      CompileStep s;
      s.display = display_path(m_, path, options_.working_directory);
      if ((host == ExportHost::kCppFile || host == ExportHost::kCudaFile) && path == host_file) {
        // Compiled in place of the file: the wrapper around #include "<file>".
        const bool on_gpu = lang == Language::kCuda || lang == Language::kHip;
        int index = on_gpu ? cuda_count_ : cpp_count_;
        s.generated_name = std::string(on_gpu ? "cuda_" : "cpp_") + std::to_string(index) + "_" + stem(path) +
                           (!on_gpu ? ".exports.cpp" : ext == ".hip" ? ".exports.hip" : ".exports.cu");
        s.generated_text = file_export_unit(path, m_.functions);
        set_exports(s, s.display);
        host_file.clear();
      } else {
        s.input_path = path;
      }
      add_step(lang, std::move(s));
    }
    return prebuilt_objects;
  }

  bool has_cuda_units() const { return !t_.hip && (m_.has_inline_cuda() || cuda_count_ > 0); }

 private:
  void set_exports(CompileStep& s, const std::string& source) {
    for (const auto& [f, _] : m_.functions) s.exports.push_back(f);
    s.exports_source = source;
  }

  void add_inline(Language lang, const char* name, const std::vector<std::string>& sources, bool exports,
                  const char* key) {
    CompileStep s;
    s.generated_name = name;
    s.generated_text = decorate_with_tvm_ffi(join_inline_sources(sources), exports ? m_.functions : FunctionList{});
    s.display = s.generated_name;
    if (exports) set_exports(s, key);
    add_step(lang, std::move(s));
  }

  void add_step(Language lang, CompileStep s) {
    s.language = lang;
    s.output = CompileOutput::kObject;
    if (lang == Language::kCuda || lang == Language::kHip) {
      s.compiler = lang == Language::kHip ? t_.hipcc : tc_.cuda->nvcc;
      s.flags = lang == Language::kHip ? flags_.hip : flags_.cuda;
      s.object_name = "cuda_" + std::to_string(cuda_count_++) + ".o";  // tvm_ffi's name for hipcc objects too
      set_launcher(s, t_.cuda_launcher);
      if (lang == Language::kCuda) set_split_compile(s, options_.split_compile);
    } else if (lang == Language::kC) {
      s.compiler = tc_.host.cc;
      s.flags = flags_.c;
      s.object_name = "c_" + std::to_string(c_count_++) + ".o";
      set_launcher(s, t_.c_launcher);
    } else {
      s.compiler = tc_.host.cxx;
      s.flags = flags_.cxx;
      s.object_name = "cpp_" + std::to_string(cpp_count_++) + ".o";
      set_launcher(s, t_.cxx_launcher);
    }
    s.depfile_name = s.object_name + ".d";
    plan_.compile_steps.push_back(std::move(s));
  }

  const Manifest& m_;
  const toolchain::Toolchain& tc_;
  const PlanOptions& options_;
  const Targets& t_;
  BuildPlan& plan_;
  const UnitFlags flags_;
  int cpp_count_ = 0, c_count_ = 0, cuda_count_ = 0;
};

// Embedded device binaries: prebuilt files as they are, .cu files compiled
// to a cubin for the build's single arch first; then the embed unit.
void plan_embeds(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options, const Targets& t,
                 BuildPlan& plan) {
  for (const auto& e : m.embed_cubin) {
    PlannedEmbed pe;
    pe.name = e.name;
    if (e.compile_from_cuda()) {
      if (plan.archs.size() != 1)
        need_one_arch("compiling " + util::file_name(e.path) + " to a cubin for embed_cubin \"" + e.name + "\"",
                      plan.archs, plan.arch_source, "pick one with --arch, or embed a prebuilt .fatbin");
      CompileStep s = device_compile(m, tc, CompileOutput::kCubin,
                                     {toolchain::gencode_flag(plan.archs[0], toolchain::GencodeCode::kSass)},
                                     options.split_compile);
      s.input_path = e.path;
      s.display = display_path(m, e.path, options.working_directory);
      s.object_name = "embed_" + e.name + ".cubin";
      s.depfile_name = s.object_name + ".d";
      set_launcher(s, t.cuda_launcher);
      pe.built_name = s.object_name;
      plan.device_steps.push_back(std::move(s));
    } else {
      pe.path = e.path;
    }
    plan.embeds.push_back(std::move(pe));
  }
  plan.embed_compiler = tc.host.cxx;
  if (!plan.embeds.empty()) plan.embed_step = embed_step(plan, plan.embed_compiler);
}

// The link: a shared library for a module, else one object (merged by ld -r
// when there are several).
LinkStep module_link(const Manifest& m, const toolchain::Toolchain& tc, const Targets& t, const BuildPlan& plan,
                     const std::vector<std::string>& prebuilt_objects, bool has_cuda) {
  LinkStep link;
  for (const auto& s : plan.compile_steps) link.inputs.push_back(s.object_name);
  append(link.inputs, prebuilt_objects);
  if (!plan.embeds.empty()) link.inputs.push_back(plan.embed_object_name);
  if (m.emit == EmitKind::kModule) {
    link.kind = LinkStep::Kind::kSharedLibrary;
    link.program = tc.host.cxx;
    link.flags = {"-shared", "-L" + tc.tvm_ffi->lib_dir, "-ltvm_ffi"};
    if (has_cuda || (!t.hip && m.cuda_runtime))
      append(link.flags, {"-L" + util::join_path(tc.cuda->home, "lib64"), "-lcudart"});
    // The driver API through the toolkit's stub (its SONAME is libcuda.so.1,
    // the driver's): links on a machine without a GPU driver.
    if (!t.hip && m.cuda_driver) append(link.flags, {"-L" + util::join_path(tc.cuda->home, "lib64/stubs"), "-lcuda"});
    if (t.hip) append(link.flags, {"-L" + t.rocm_lib, "-lamdhip64"});
    append(link.flags, stripped(m.extra_ldflags));
    link.output_name = m.name + ".so";
    link.depfile_name = link.output_name + ".d";
  } else {
    link.kind = link.inputs.size() == 1 ? LinkStep::Kind::kCopyObject : LinkStep::Kind::kMergeObjects;
    if (link.kind == LinkStep::Kind::kMergeObjects) link.program = tc.ld;
    link.output_name = m.name + ".o";
  }
  return link;
}

// Intermediate names are fixed (cpp_0.o, main.cpp, embed_cubin.o), so a
// module named like one of them would overwrite its own input.
void check_artifact_name(const Manifest& m, const BuildPlan& plan) {
  auto collides = [&](const std::string& n) { return n == plan.artifact_name; };
  for (const auto* steps : {&plan.compile_steps, &plan.device_steps})
    for (const auto& s : *steps)
      if (collides(s.object_name) || collides(s.generated_name))
        throw usage_error("module name \"" + m.name + "\" makes the output " + plan.artifact_name +
                          " collide with an intermediate file of the build: choose another name");
  if (!plan.embeds.empty() && collides(plan.embed_object_name))
    throw usage_error("module name \"" + m.name + "\" collides with the embed object " + plan.embed_object_name +
                      ": choose another name");
}

// 2b. A module or an object: wrapped translation units, embedded device
//     binaries, the link.
void plan_module(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options, const Targets& t,
                 BuildPlan& plan) {
  UnitPlanner units(m, tc, options, t, plan);
  const std::vector<std::string> prebuilt_objects = units.add_units();
  plan_embeds(m, tc, options, t, plan);
  plan.link = module_link(m, tc, t, plan, prebuilt_objects, units.has_cuda_units());
  plan.artifact_name = plan.link->output_name;
  check_artifact_name(m, plan);
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
