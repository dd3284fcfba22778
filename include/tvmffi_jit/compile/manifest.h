// The build manifest: a JSON file whose keys mirror tvm_ffi.cpp.build_inline
// (so a load_inline call moves over unchanged), plus the command-line
// equivalent. The accepted grammar is specified in docs/manifest.md.
//
// Parsing validates everything that can be checked without a compiler (key
// names, types, identifiers, that every file exists and is readable, arch
// syntax) and throws ManifestError (exit 2) on the first problem, before
// anything is written.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::compile {

enum class EmitKind { kModule, kObject, kCubin, kFatbin, kPtx };
enum class DeviceCompiler { kNvcc, kNvrtc };

const char* emit_kind_name(EmitKind k);           // "module", "object", ...
std::optional<EmitKind> parse_emit_kind(std::string_view s);
const char* device_compiler_name(DeviceCompiler c);  // "nvcc", "nvrtc"
std::optional<DeviceCompiler> parse_device_compiler(std::string_view s);

// What GPU sources (.cu, .hip, inline CUDA) are compiled for: CUDA with nvcc,
// or ROCm with hipcc (tvm_ffi.cpp's `backend`).
enum class GpuBackend { kCuda, kHip };
const char* gpu_backend_name(GpuBackend b);  // "cuda", "hip"
std::optional<GpuBackend> parse_gpu_backend(std::string_view s);

// One entry of "embed_cubin" / --embed-cubin: a device binary linked into the
// module under TVM_FFI_EMBED_CUBIN(name). A .cu path is compiled to a cubin
// first (nvcc, the single arch of the build).
struct EmbedSpec {
  std::string name;  // [A-Za-z_][A-Za-z0-9_]*
  std::string path;  // absolute
  bool compile_from_cuda() const;  // path ends in .cu
};

struct Manifest {
  std::string manifest_path;  // absolute path of the JSON file; empty for a command-line-only build
  std::string name;
  std::vector<std::string> sources;       // absolute paths, in the given order
  std::vector<std::string> cpp_sources;   // inline C++ pieces (joined with "\n" as load_inline does)
  std::vector<std::string> cuda_sources;  // inline CUDA pieces
  std::vector<std::pair<std::string, std::string>> functions;  // name -> docstring, in order
  std::vector<std::string> extra_cflags;
  std::vector<std::string> extra_cuda_cflags;
  std::vector<std::string> extra_ldflags;
  std::vector<std::string> extra_include_paths;  // absolute; -I
  // "system_include_paths" / --isystem: absolute; -isystem (the compiler
  // does not warn inside them, as for every header a kernel library passes
  // that way). Their headers are keyed and recorded like any other (-MD).
  std::vector<std::string> system_include_paths;
  // "cuda_runtime" / --cuda-runtime: C/C++ units get the CUDA toolkit's
  // include directory and the module links the runtime (-lcudart), with no
  // CUDA source. "cuda_driver" / --cuda-driver: the same include directory,
  // and the module links the driver API (-lcuda) against the toolkit's stub
  // library (lib64/stubs), as a module that calls cu* functions needs on a
  // machine without a GPU driver. Neither needs CPATH or LIBRARY_PATH.
  bool cuda_runtime = false;
  bool cuda_driver = false;
  std::vector<toolchain::CudaArch> cuda_arch;    // "cuda_arch"; empty: not given
  std::vector<toolchain::CudaArch> command_line_arch;  // --arch; wins over cuda_arch when given
  // "backend" / --backend. Absent: resolved by make_plan() (hip for .hip
  // sources; else $TVM_FFI_GPU_BACKEND; else hip when only hipcc is installed;
  // else cuda), as tvm_ffi.cpp does when it is not given.
  std::optional<GpuBackend> backend;
  std::vector<std::string> rocm_arch;               // "rocm_arch": gfx targets ("gfx90a", "gfx942:xnack-")
  std::vector<std::string> command_line_rocm_arch;  // --arch gfx...; wins over rocm_arch when given
  EmitKind emit = EmitKind::kModule;
  DeviceCompiler compiler = DeviceCompiler::kNvcc;
  std::vector<std::string> kernel_names;
  std::vector<EmbedSpec> embed_cubin;
  // "cxx_launcher" / "cuda_launcher" (--cxx-launcher / --cuda-launcher
  // replace them): an argv prefix for compile steps, never the link. Absent:
  // the environment decides (PlanOptions); present and empty: no launcher.
  // Not part of any cache key (docs/farm.md).
  std::optional<std::vector<std::string>> cxx_launcher;
  std::optional<std::vector<std::string>> cuda_launcher;
  std::string cxx_launcher_source;   // "manifest" or "--cxx-launcher"
  std::string cuda_launcher_source;  // "manifest" or "--cuda-launcher"

  bool has_inline_cpp() const { return !cpp_sources.empty(); }
  bool has_inline_cuda() const { return !cuda_sources.empty(); }
  bool needs_cuda() const;  // any .cu file, inline CUDA, a .cu embed or a device emit kind
  // needs_cuda(), or cuda_runtime / cuda_driver: the CUDA toolkit must be found
  // (archs are resolved only for needs_cuda()).
  bool needs_cuda_toolkit() const { return needs_cuda() || cuda_runtime || cuda_driver; }
  bool has_gpu_sources() const;  // any .cu or .hip file, or inline CUDA (what backend hip compiles with hipcc)
};

// A manifest problem: `where` is the manifest path (or "command line"),
// `pointer` a JSON pointer ("/extra_cflags/2") or an option name
// ("--function"), `problem` the text after it. what() is the one-line
// "<where>: <pointer>: <problem>" the user sees ("<where>: <problem>" when
// the pointer is empty, i.e. the whole document). Exit code 2.
class ManifestError : public Error {
 public:
  ManifestError(std::string where, std::string pointer, std::string problem);
  const std::string& where() const { return where_; }
  const std::string& pointer() const { return pointer_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string where_, pointer_, problem_;
};

// The accepted top-level keys, in documentation order.
const std::vector<std::string>& manifest_keys();

// Parses manifest text. Relative paths resolve against `base_dir`;
// `display_path` names the manifest in messages. Checks files exist and are
// readable.
Manifest parse_manifest_text(std::string_view text, const std::string& display_path, const std::string& base_dir);

// Reads and parses a manifest file (exit 2 if it is missing or unreadable).
Manifest load_manifest(const std::string& path);

// Values given on the command line; each extends (lists) or replaces
// (scalars) the manifest's. Paths resolve against the current directory.
struct CommandLineInputs {
  std::vector<std::string> sources;
  std::optional<std::string> name;
  std::vector<std::string> functions;  // "f" or "f=doc"
  std::vector<std::string> cflags, cuda_cflags, ldflags, include_paths;
  std::vector<std::string> system_include_paths;  // --isystem
  bool cuda_runtime = false;                      // --cuda-runtime
  bool cuda_driver = false;                       // --cuda-driver
  std::vector<std::string> arch;  // each a list ("8.0,9.0"); replaces the manifest's
  std::optional<std::string> emit;
  std::optional<std::string> compiler;
  std::vector<std::string> kernel_names;
  std::vector<std::string> embed_cubin;  // "NAME=FILE"
  std::optional<std::string> cxx_launcher;   // whitespace-separated words; "" = none
  std::optional<std::string> cuda_launcher;
  std::optional<std::string> backend;  // --backend cuda|hip
};

// Applies the command line onto `m` (a parsed manifest or an empty one) and
// checks the combination: a name (defaulting to the first source's stem when
// that is an identifier), at least one source, no duplicate functions, the
// emit/compiler/kernel-name/embed rules of docs/manifest.md. Throws
// ManifestError (exit 2).
void apply_command_line(Manifest& m, const CommandLineInputs& cli);

// The checks of apply_command_line() that concern the combination of keys,
// for a manifest used without command-line additions.
void check_manifest(const Manifest& m);

bool is_identifier(std::string_view s);

// The longest module name: the files made from it (<name>.fatbin.d, the link's
// temporary .<name>.so.tmp.<pid>) must fit one file-name component of the
// file system (NAME_MAX, 255 bytes on Linux). A cache entry directory is
// shortened when the name is longer than its rule allows (cache/root.h);
// the artifact keeps the name as given.
constexpr size_t kMaxModuleNameLength = 223;

}  // namespace tvmffi_jit::compile
