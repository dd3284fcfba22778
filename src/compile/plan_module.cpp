// make_plan's module plan (compile/plan_parts.h): a module or an object,
// from wrapped translation units, embedded device binaries and the link.
#include <algorithm>

#include "compile/plan_parts.h"
#include "tvmffi_jit/compile/embed.h"
#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

std::string stem(const std::string& path) {
  std::string f = util::file_name(path);
  size_t dot = f.rfind('.');
  return dot == std::string::npos ? f : f.substr(0, dot);
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
  append_flags(s.flags, embed_source_flags());
  s.generated_name = kEmbedSourceName;
  s.generated_text = embed_source_text(items);
  s.object_name = plan.embed_object_name;
  // The assembler writes no dependency file; the embedded files are inputs
  // of their own (the build log stamps them, the cache key hashes them).
  s.depfile_name.clear();
  s.display = "the embedded device binaries";
  return s;
}

// The flags of a module's units, per language: our defaults first, less
// those the user's flags replace (-O3 for -O2, -std=c++20 for -std=c++17) or
// repeat; then the user's flags; then the include directories.
struct UnitFlags {
  std::vector<std::string> cxx, c, cuda, hip;
};

UnitFlags unit_flags(const Manifest& m, const toolchain::Toolchain& tc, const Targets& t, const BuildPlan& plan) {
  const std::vector<std::string> user_cflags = stripped_flags(m.extra_cflags);
  const std::vector<std::string> user_cuda_cflags = stripped_flags(m.extra_cuda_cflags);
  UnitFlags f;
  f.cxx = defaults_not_overridden(default_cxx_flags(), user_cflags);
  f.c = defaults_not_overridden(default_c_flags(), user_cflags);
  f.cuda = defaults_not_overridden(default_cuda_flags(), user_cuda_cflags);
  append_flags(f.cuda, toolchain::gencode_flags(plan.archs));
  f.hip = defaults_not_overridden(default_hip_flags(), user_cuda_cflags);
  for (const auto& a : plan.rocm_archs) f.hip.push_back("--offload-arch=" + a);
  append_flags(f.cxx, user_cflags);
  append_flags(f.c, user_cflags);
  append_flags(f.cuda, user_cuda_cflags);
  append_flags(f.hip, user_cuda_cflags);
  const std::vector<std::string> includes = include_flags(tc, m, t.rocm_include);
  for (auto* flags : {&f.cxx, &f.c, &f.cuda, &f.hip}) append_flags(*flags, includes);
  // cuda_runtime / cuda_driver: host units see the toolkit's headers
  // (cuda_runtime.h, cuda.h) as system headers, last, as nvcc gives them to
  // CUDA units itself.
  if (!t.hip && (m.cuda_runtime || m.cuda_driver)) {
    const std::string toolkit_include = util::join_path(tc.cuda->home, "include");
    append_flags(f.cxx, {"-isystem", toolkit_include});
    append_flags(f.c, {"-isystem", toolkit_include});
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
  append_flags(link.inputs, prebuilt_objects);
  if (!plan.embeds.empty()) link.inputs.push_back(plan.embed_object_name);
  if (m.emit == EmitKind::kModule) {
    link.kind = LinkStep::Kind::kSharedLibrary;
    link.program = tc.host.cxx;
    link.flags = {"-shared", "-L" + tc.tvm_ffi->lib_dir, "-ltvm_ffi"};
    if (has_cuda || (!t.hip && m.cuda_runtime))
      append_flags(link.flags, {"-L" + util::join_path(tc.cuda->home, "lib64"), "-lcudart"});
    // The driver API through the toolkit's stub (its SONAME is libcuda.so.1,
    // the driver's): links on a machine without a GPU driver.
    if (!t.hip && m.cuda_driver) append_flags(link.flags, {"-L" + util::join_path(tc.cuda->home, "lib64/stubs"), "-lcuda"});
    if (t.hip) append_flags(link.flags, {"-L" + t.rocm_lib, "-lamdhip64"});
    append_flags(link.flags, stripped_flags(m.extra_ldflags));
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

}  // namespace

void plan_module(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options, const Targets& t,
                 BuildPlan& plan) {
  UnitPlanner units(m, tc, options, t, plan);
  const std::vector<std::string> prebuilt_objects = units.add_units();
  plan_embeds(m, tc, options, t, plan);
  plan.link = module_link(m, tc, t, plan, prebuilt_objects, units.has_cuda_units());
  plan.artifact_name = plan.link->output_name;
  check_artifact_name(m, plan);
}

}  // namespace tvmffi_jit::compile
