// The checks of a whole module description (compile/manifest_checks.h).
#include "compile/manifest_checks.h"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// Bytes a list of arguments takes in a new process's argv: the strings, their
// NULs and the pointers.
uint64_t argv_bytes(const std::vector<std::string>& args, size_t prefix = 0) {
  uint64_t n = 0;
  for (const auto& a : args) n += a.size() + prefix + 1 + sizeof(char*);
  return n;
}

// posix_spawn fails with E2BIG when one argument passes the kernel's
// per-string limit or argv plus the environment pass ARG_MAX; the flags of a
// manifest are the only part of a compiler command that can grow without
// bound, so they are checked here (exit 2, naming the key) before anything is
// written. Commands: host compile (extra_cflags + includes), CUDA compile
// (extra_cuda_cflags + includes), link (extra_ldflags + sources).
template <typename Reporter>
void check_command_line_length(const Manifest& m, const CommandLineInputs* cli, const Reporter& r) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t max_string = static_cast<uint64_t>(page > 0 ? page : 4096) * 32;  // MAX_ARG_STRLEN
  const long arg_max_sys = ::sysconf(_SC_ARG_MAX);
  const uint64_t arg_max = arg_max_sys > 0 ? static_cast<uint64_t>(arg_max_sys) : (uint64_t{2} << 20);
  struct List {
    const char* key;
    const char* flag;
    bool from_cli;
    const std::vector<std::string>* args;
    size_t prefix;  // "-I"
  };
  const List lists[] = {
      {"extra_cflags", "--cflag", cli && !cli->cflags.empty(), &m.extra_cflags, 0},
      {"extra_cuda_cflags", "--cuda-cflag", cli && !cli->cuda_cflags.empty(), &m.extra_cuda_cflags, 0},
      {"extra_ldflags", "--ldflag", cli && !cli->ldflags.empty(), &m.extra_ldflags, 0},
      {"extra_include_paths", "-I", cli && !cli->include_paths.empty(), &m.extra_include_paths, 2},
      {"sources", "sources", cli && !cli->sources.empty(), &m.sources, 0},
      {"system_include_paths", "--isystem", cli && !cli->system_include_paths.empty(), &m.system_include_paths, 0},
  };
  for (const auto& l : lists) {
    for (const auto& a : *l.args) {
      if (a.size() + l.prefix + 1 > max_string)
        r.fail(l.key, l.flag, l.from_cli,
               "one argument is " + util::format_bytes(a.size()) + "; the system allows " +
                   util::format_bytes(max_string) + " per argument (E2BIG): split it or put it in a response file (@file)");
    }
  }
  // Room for what the plan adds (the compiler, tvm-ffi's includes, -o ...).
  constexpr uint64_t kGeneratedReserve = 64 * 1024;
  const uint64_t env = util::child_environment_bytes();
  // -isystem DIR is two arguments: the option's 9 bytes and a pointer more.
  const uint64_t includes =
      argv_bytes(m.extra_include_paths, 2) + argv_bytes(m.system_include_paths, 9 + sizeof(char*));
  const struct {
    uint64_t total;
    const List* biggest;
  } commands[] = {
      {argv_bytes(m.extra_cflags) + includes, argv_bytes(m.extra_cflags) >= includes ? &lists[0] : &lists[3]},
      {argv_bytes(m.extra_cuda_cflags) + includes, argv_bytes(m.extra_cuda_cflags) >= includes ? &lists[1] : &lists[3]},
      {argv_bytes(m.extra_ldflags) + argv_bytes(m.sources),
       argv_bytes(m.extra_ldflags) >= argv_bytes(m.sources) ? &lists[2] : &lists[4]},
  };
  for (const auto& c : commands) {
    if (c.total + env + kGeneratedReserve > arg_max)
      r.fail(c.biggest->key, c.biggest->flag, c.biggest->from_cli,
             std::to_string(c.biggest->args->size()) + " entries make a compiler command line of " +
                 util::format_bytes(c.total) + ", more than the system allows (ARG_MAX " + util::format_bytes(arg_max) +
                 " for arguments and the " + util::format_bytes(env) +
                 " environment together, E2BIG): pass them in a response file (@file), which gcc and nvcc read");
  }
}

// Where a problem is reported: the manifest key, or the flag when the
// command line set the value (or there is no manifest).
struct ProblemOrigin {
  const Manifest& m;
  [[noreturn]] void fail(const char* key, const char* flag, bool set_by_command_line, const std::string& problem) const {
    if (m.manifest_path.empty() || set_by_command_line) throw ManifestError(kCommandLine, flag, problem);
    throw ManifestError(m.manifest_path, std::string("/") + key, problem);
  }
};

// Which of the combined values the command line set.
struct SetByCommandLine {
  bool functions = false, emit = false, compiler = false, kernel_names = false, embed = false, backend = false,
       arch = false;

  explicit SetByCommandLine(const CommandLineInputs* cli) {
    if (!cli) return;
    functions = !cli->functions.empty();
    emit = cli->emit.has_value();
    compiler = cli->compiler.has_value();
    kernel_names = !cli->kernel_names.empty();
    embed = !cli->embed_cubin.empty();
    backend = cli->backend.has_value();
    arch = !cli->arch.empty();
  }
};

// The module's source files by kind.
struct SourceCounts {
  size_t cxx = 0, c = 0, cuda = 0, hip = 0, objects = 0;

  explicit SourceCounts(const Manifest& m) {
    for (const auto& s : m.sources) {
      std::string ext = util::extension(s);
      if (ext == ".cu") ++cuda;
      else if (ext == ".c") ++c;
      else if (ext == ".o") ++objects;
      else ++cxx;
      hip += ext == ".hip" ? 1 : 0;
    }
  }
};

bool is_device_emit(EmitKind emit) {
  return emit == EmitKind::kCubin || emit == EmitKind::kFatbin || emit == EmitKind::kPtx;
}

void check_has_sources(const Manifest& m, const ProblemOrigin& r) {
  if (!m.sources.empty() || !m.cpp_sources.empty() || !m.cuda_sources.empty()) return;
  if (m.manifest_path.empty())
    throw ManifestError(kCommandLine, "",
                        "nothing to build: give source files (tvmffi-jit build kernel.cu) or a manifest "
                        "(tvmffi-jit build -m manifest.json); see tvmffi-jit build --help");
  r.fail("sources", "", false,
         "no source: give \"sources\", \"cpp_sources\" or \"cuda_sources\" (or source files on the command line)");
}

// What the emit kind allows: a device format is one CUDA source and nothing
// exported or embedded; a module or object exports from a C++ or CUDA source.
void check_emit(const Manifest& m, const SetByCommandLine& cli, const SourceCounts& n, const ProblemOrigin& r) {
  const std::string emit = emit_kind_name(m.emit);
  if (!is_device_emit(m.emit)) {
    if (!m.functions.empty() && !m.has_inline_cpp() && !m.has_inline_cuda() && !n.cxx && !n.cuda)
      r.fail("functions", "--function", cli.functions, "exporting functions needs a C++ or CUDA source (.c files and objects cannot hold the exports)");
    return;
  }
  if (!m.functions.empty())
    r.fail("functions", "--function", cli.functions, "functions are exported only by emit module or object (emit is " + emit + ")");
  if (m.has_inline_cpp() || n.cxx || n.c || n.objects)
    r.fail("emit", "--emit", cli.emit, "emit " + emit + " compiles CUDA kernel sources only; drop the C/C++ sources and objects");
  if (n.cuda + (m.has_inline_cuda() ? 1 : 0) != 1)
    r.fail("emit", "--emit", cli.emit, "emit " + emit + " needs exactly one CUDA source (one .cu file or cuda_sources), got " +
                        std::to_string(n.cuda + (m.has_inline_cuda() ? 1 : 0)));
  if (!m.embed_cubin.empty()) r.fail("embed_cubin", "--embed-cubin", cli.embed, "embedding needs emit module or object (emit is " + emit + ")");
}

// Backend hip (given, or implied by a .hip source: make_plan's rule) builds
// modules and objects with no CUDA part; backend cuda compiles no .hip file.
void check_backend(const Manifest& m, const CommandLineInputs* cli_inputs, const SetByCommandLine& cli,
                   const SourceCounts& n, const ProblemOrigin& r) {
  if (m.backend == GpuBackend::kCuda) {
    if (n.hip)
      r.fail("backend", "--backend", cli.backend, ".hip sources are compiled by hipcc: set \"backend\": \"hip\" (--backend hip)");
    return;
  }
  const bool hip = m.backend == GpuBackend::kHip || (!m.backend && n.hip);
  if (!hip) return;
  if (is_device_emit(m.emit))
    r.fail("backend", "--backend", cli.backend,
           "emit " + std::string(emit_kind_name(m.emit)) +
               " is a CUDA format; backend hip builds modules and objects (hipcc embeds the code objects)");
  for (const auto& e : m.embed_cubin)
    if (e.compile_from_cuda())
      r.fail("embed_cubin", "--embed-cubin", cli.embed,
             "embed_cubin \"" + e.name + "\" compiles a .cu file to a CUDA cubin, which needs backend cuda; embed a "
             "prebuilt file instead");
  if (!m.cuda_arch.empty() || !m.command_line_arch.empty())
    r.fail(m.command_line_arch.empty() ? "cuda_arch" : "backend", m.command_line_arch.empty() ? "--backend" : "--arch",
           !m.command_line_arch.empty() || cli.backend,
           "CUDA architectures are for backend cuda; backend hip takes ROCm targets (\"rocm_arch\", --arch gfx90a or "
           "TVM_FFI_ROCM_ARCH_LIST)");
  if (m.cuda_runtime || m.cuda_driver) {
    const bool from_cli = cli_inputs && (cli_inputs->cuda_runtime || cli_inputs->cuda_driver);
    r.fail(m.cuda_runtime ? "cuda_runtime" : "cuda_driver", m.cuda_runtime ? "--cuda-runtime" : "--cuda-driver",
           from_cli, "the CUDA runtime and driver are for backend cuda; backend hip links the HIP runtime itself");
  }
}

void check_rocm_arch(const Manifest& m, const SetByCommandLine& cli, const SourceCounts& n, const ProblemOrigin& r) {
  if (m.backend != GpuBackend::kHip && (!m.rocm_arch.empty() || !m.command_line_rocm_arch.empty()) &&
      (m.backend || !n.hip)) {
    const bool from_cli = !m.command_line_rocm_arch.empty();
    r.fail(from_cli ? "backend" : "rocm_arch", from_cli ? "--arch" : "--backend", from_cli || cli.backend || cli.arch,
           "ROCm architectures (gfx...) need backend hip: set \"backend\": \"hip\" (--backend hip)");
  }
}

// NVRTC compiles cubins and PTX only, and only it lowers name expressions.
void check_device_compiler(const Manifest& m, const SetByCommandLine& cli, const ProblemOrigin& r) {
  if (m.compiler == DeviceCompiler::kNvrtc && m.emit != EmitKind::kCubin && m.emit != EmitKind::kPtx)
    r.fail("compiler", "--compiler", cli.compiler,
           "nvrtc compiles only for emit cubin or ptx (emit is " + std::string(emit_kind_name(m.emit)) + "); use nvcc");
  if (!m.kernel_names.empty() && m.compiler != DeviceCompiler::kNvrtc)
    r.fail("kernel_names", "--kernel-name", cli.kernel_names, "kernel name expressions are lowered by NVRTC: set \"compiler\": \"nvrtc\" (--compiler nvrtc)");
}

}  // namespace

void check_combination(const Manifest& m, const CommandLineInputs* cli) {
  const ProblemOrigin r{m};
  const SetByCommandLine set(cli);
  check_has_sources(m, r);
  const SourceCounts n(m);
  check_emit(m, set, n, r);
  check_backend(m, cli, set, n, r);
  check_rocm_arch(m, set, n, r);
  check_device_compiler(m, set, r);
  check_command_line_length(m, cli, r);
}


void check_manifest(const Manifest& m) { check_combination(m, nullptr); }

}  // namespace tvmffi_jit::compile
