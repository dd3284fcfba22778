// CUDA architecture lists: "8.0 9.0a 10.0f 9.0+PTX" and the nvcc flags they mean.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::toolchain {

struct CudaArch {
  int major = 0;
  int minor = 0;
  char suffix = 0;   // 0, 'a' (arch-specific) or 'f' (family-specific)
  bool ptx = false;  // +PTX: also embed compute_XY PTX for JIT on newer GPUs

  std::string text() const;          // "9.0a+PTX" (the canonical input form)
  std::string sm() const;            // "sm_90a"
  std::string compute() const;       // "compute_90a"
  bool operator==(const CudaArch& o) const {
    return major == o.major && minor == o.minor && suffix == o.suffix && ptx == o.ptx;
  }
};

// Parses entries X.Y, X.Ya, X.Yf, each optionally followed by +PTX (any case),
// separated by spaces, commas or semicolons. Throws Error(kUsage) naming the
// bad entry and `origin` (e.g. "--arch", "TVM_FFI_CUDA_ARCH_LIST"); an empty
// list is an error too. Duplicates are dropped (first occurrence kept); the
// same arch with and without +PTX merges into +PTX.
std::vector<CudaArch> parse_arch_list(std::string_view text, const std::string& origin);
// The same without throwing, for callers that place the problem themselves
// (a manifest key, a flag): the list, or why not ("bad CUDA architecture
// \"9\": expected ...").
Expected<std::vector<CudaArch>> try_parse_arch_list(std::string_view text);

// Appends b's entries to a with the same de-duplication rule.
void merge_arch_lists(std::vector<CudaArch>& a, const std::vector<CudaArch>& b);

// The one place a -gencode option is written: "-gencode=arch=compute_90,code=sm_90"
// (kSass, the machine code) or "...,code=compute_90" (kPtx, for JIT on newer GPUs).
enum class GencodeCode { kSass, kPtx };
std::string gencode_flag(const CudaArch& arch, GencodeCode code);

// One -gencode per entry ("-gencode=arch=compute_90,code=sm_90"), plus
// "-gencode=arch=compute_90,code=compute_90" for +PTX entries.
std::vector<std::string> gencode_flags(const std::vector<CudaArch>& archs);

// What the driver reported: compute capabilities of the visible GPUs (or why
// there are none). Filled by the CLI from driver::query_driver(); the
// toolchain and build layers never load libcuda themselves.
struct DetectedGpus {
  bool available = false;
  std::string reason;                         // when !available or no GPUs
  std::vector<std::pair<int, int>> capabilities;  // one per GPU, in ordinal order
};
using DetectGpus = std::function<DetectedGpus()>;

struct ArchResolution {
  std::vector<CudaArch> archs;
  std::string source;  // "--arch", "manifest", "TVM_FFI_CUDA_ARCH_LIST", "driver"
};

// The first that is given: the command line, the manifest, the environment
// variable text, the GPUs the driver sees (distinct capabilities, in device
// order; `detect` is only called when nothing earlier is given). Throws
// Error(kMissingTool) saying how to set the list when nothing gives one.
ArchResolution resolve_archs(const std::vector<CudaArch>& command_line,
                             const std::vector<CudaArch>& manifest,
                             const std::optional<std::string>& env_arch_list,
                             const DetectGpus& detect);

// ROCm (backend hip) targets: "gfx90a", "gfx942", with optional target
// features ("gfx90a:xnack-", "gfx90a:sramecc+:xnack-"), as hipcc's
// --offload-arch takes them. A list is separated by spaces, commas or
// semicolons. The list without duplicates, or why not (the bad entry).
Expected<std::vector<std::string>> try_parse_rocm_arch_list(std::string_view text);
// Appends b's targets that a does not hold yet.
void merge_rocm_arch_lists(std::vector<std::string>& a, const std::vector<std::string>& b);

struct RocmArchResolution {
  std::vector<std::string> archs;
  std::string source;  // "--arch", "manifest", "TVM_FFI_ROCM_ARCH_LIST", "extra_cuda_cflags"
};

// The first that is given: --arch gfx..., the manifest's rocm_arch,
// $TVM_FFI_ROCM_ARCH_LIST (tvm_ffi's variable). When none is, flags that
// already carry --offload-arch (extra_cuda_cflags) choose the targets and the
// list is empty. Else throws Error(kMissingTool) saying how to set it, for
// command-line and Python users alike.
RocmArchResolution resolve_rocm_archs(const std::vector<std::string>& command_line,
                                      const std::vector<std::string>& manifest,
                                      const std::optional<std::string>& env_arch_list,
                                      const std::vector<std::string>& extra_cuda_cflags);

}  // namespace tvmffi_jit::toolchain
