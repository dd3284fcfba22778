// Validation of GPU code through the CUDA driver, crash-isolated.
//
// The offline report (devcode::inspect_file) is the gate: a file whose
// structure is invalid never reaches the driver. Everything else is loaded in
// a child process (a re-exec of this binary, `tvmffi-jit __driver-probe`)
// with a timeout, because on driver 580 a truncated cubin kills the process
// that loads it with SIGSEGV or never returns. The child loads each image
// with cuLibraryLoadFromFile and JIT log buffers, lists and resolves its
// kernels under the device's primary context and reads their attributes; the
// parent compares that with the offline report and decides.
//
// Why cuLibraryLoadFromFile's CUDA_SUCCESS is not a verdict: the same driver
// returns it for random bytes, host .so files, wrong-arch cubins and broken
// PTX. Valid means every step succeeded, the driver's kernel count equals the
// offline count, and the JIT error log is empty.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/devcode/report.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"

namespace tvmffi_jit::driver {

// Test hook, read by the CLI into ValidateOptions::ungated: offline-invalid
// cubin/fatbin/PTX files are loaded anyway (verdict still invalid), to show
// crash isolation on a real driver.
inline constexpr const char* kUngatedEnv = "TVMFFI_JIT_VALIDATE_UNGATED";

struct ValidateOptions {
  int device = 0;               // --device N
  double timeout_seconds = 60;  // per child process (--timeout)
  // The binary re-executed as the child; empty = /proc/self/exe.
  std::string self_exe;
  // Where extracted images go; empty = a fresh directory under $TMPDIR.
  std::string temp_parent;
  // libtvm_ffi.so to load before dlopen'ing a TVM FFI module
  // ($TVMFFI_JIT_TVM_FFI_LIB, for machines with only the library copied
  // beside the modules); empty = located with toolchain::find_tvm_ffi and
  // `tvm_ffi_search` when a module needs it.
  std::string tvm_ffi_library;
  toolchain::TvmFfiSearch tvm_ffi_search;
  bool ungated = false;  // kUngatedEnv
};

// CUfunction_attribute values read per kernel (-1 where the driver refused).
struct KernelAttributes {
  int max_threads_per_block = -1;   // 0
  int shared_size_bytes = -1;       // 1  (static shared, without the sm_90+ 1 KiB base)
  int const_size_bytes = -1;        // 2  (module __constant__ data)
  int local_size_bytes = -1;        // 3  (per-thread stack frame + local)
  int num_regs = -1;                // 4
  int ptx_version = -1;             // 5
  int binary_version = -1;          // 6
  int max_dynamic_shared_bytes = -1;  // 8
  int cluster_width = -1, cluster_height = -1, cluster_depth = -1;  // 11..13 (0 = none)
};

// A driver figure that disagrees with the offline parse after the documented
// conversions (e.g. the 1 KiB shared-memory base of sm_90+ ET_EXEC cubins).
struct AttributeMismatch {
  std::string kernel;
  std::string attribute;  // "registers", "shared", "local", "const", "max_threads", "binary_version", "cluster"
  long long driver = 0;
  long long offline = 0;
};

struct DriverKernel {
  std::string name;
  bool resolved = false;        // cuLibraryGetKernel succeeded under the context
  std::string resolve_error;    // CUresult name when not
  bool enumerated = false;      // listed by cuLibraryEnumerateKernels (false: offline name only)
  bool attributes_read = false;
  KernelAttributes attributes;
};

// One loadable image: the file itself (cubin/fatbin/PTX) or, for a host ELF,
// one fatbin container or embedded cubin, extracted to a temporary file.
struct ImageVerdict {
  int entry = 0;            // 1-based, as in messages ("while loading entry 2")
  std::string source;       // "file", ".nv_fatbin container at 0x8f9b0", "__tvm_ffi__cubin_k"
  std::string loaded_path;  // the path handed to cuLibraryLoadFromFile
  // What the driver should have picked (fatbins: the entry compatible with
  // the device; nullopt when none is or the file has no offline entries).
  std::optional<int> offline_entry;       // devcode Entry::index
  std::string offline_arch;
  size_t offline_kernel_count = 0;
  std::optional<unsigned> driver_kernel_count;  // nullopt: driver older than 12.4
  std::vector<DriverKernel> kernels;
  std::string error_log;
  std::string info_log;
  // The first failing step ("cuLibraryLoadFromFile", "cuLibraryGetKernelCount",
  // "cuLibraryGetModule", "cuLibraryGetKernel(add)", ...), empty when all
  // succeeded, and what it returned.
  std::string failed_step;
  std::string result;  // CUresult name of failed_step ("CUDA_SUCCESS" if none)
  bool crashed = false;  // the child died or hung while on this image
  std::vector<AttributeMismatch> mismatches;
  bool valid = false;
  std::string problem;  // why not valid
};

// dlopen of a TVM FFI module in the child and dlsym of every declared function.
struct ModuleLoadVerdict {
  bool checked = false;
  bool loaded = false;
  std::string error;  // dlerror() or the crash
  std::string tvm_ffi_library;
  std::vector<std::pair<std::string, bool>> symbols;  // (__tvm_ffi_<f>, resolved)
};

enum class Verdict { kValid, kInvalid, kNoDriver };
const char* to_string(Verdict v);  // "valid", "invalid", "no-driver"

struct DriverInfo {
  bool available = false;
  std::string library;
  std::string reason;           // why not available / no device
  int driver_version = 0;       // 13000
  int device = 0;
  std::string device_name;
  int cc_major = 0, cc_minor = 0;
  std::string load_mode;        // "lazy", "eager", "unknown"
  bool library_api = false;     // cuLibrary* present (CUDA 12.0+)
  bool kernel_enumeration = false;  // cuLibraryGetKernelCount/EnumerateKernels (12.4+)
};

struct FileVerdict {
  std::string path;
  Verdict verdict = Verdict::kInvalid;
  std::string message;  // one line: "valid: 4 kernels", "driver crashed with SIGSEGV while loading entry 2 ..."
  bool offline_valid = true;
  DriverInfo driver;
  std::vector<ImageVerdict> images;
  ModuleLoadVerdict module;
  std::vector<std::string> notes;  // things skipped, with why
};

// Validates each file (reports[i] is the offline report of paths[i]); all
// images of all files go through one child process, restarted after a crash
// or hang with the images that remain. Never throws for bad input files;
// throws Error(kIo) only if the child cannot be started at all.
std::vector<FileVerdict> validate_files(const std::vector<devcode::FileReport>& reports,
                                        const ValidateOptions& options);
FileVerdict validate_file(const std::string& path, const devcode::FileReport& offline,
                          const ValidateOptions& options);

// The `driver` object of --json output (docs/driver.md).
nlohmann::json to_json(const FileVerdict& verdict);
// Readable block for text output.
std::string format_text(const FileVerdict& verdict);

// Exit code for a set of verdicts: 3 if any is invalid, else 4 if any saw no
// driver (callers that tolerate that check first), else 0.
int exit_code_for(const std::vector<FileVerdict>& verdicts);

// The child side: reads the request (JSON) from stdin, writes one JSON line
// per result to stdout and progress markers to stderr. Returns the exit code.
// `libcuda`: the library to dlopen, resolved by the child's own CLI from the
// environment it inherited (as query_driver's).
int run_driver_probe(const std::string& libcuda);

}  // namespace tvmffi_jit::driver
