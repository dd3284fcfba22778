// Between make_plan (compile/plan.cpp: what a manifest compiles for, the
// step types) and the two plans it makes: device code only
// (compile/plan_device.cpp) and a module or object (compile/plan_module.cpp),
// and below all three the flags and steps they build with
// (compile/plan_steps.cpp). Private to the compile layer.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

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

// 2a. Device code only: one kernel source -> one cubin/fatbin/PTX file,
//     through NVRTC or one nvcc step (compile/plan_device.cpp).
void plan_device_output(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options,
                        const Targets& t, BuildPlan& plan);

// 2b. A module or an object: wrapped translation units, embedded device
//     binaries, the link (compile/plan_module.cpp).
void plan_module(const Manifest& m, const toolchain::Toolchain& tc, const PlanOptions& options, const Targets& t,
                 BuildPlan& plan);

// The helpers both plans build steps with (compile/plan_steps.cpp).

// tvm_ffi strips every user flag; an entry that is empty after that adds nothing.
std::vector<std::string> stripped_flags(const std::vector<std::string>& flags);

void append_flags(std::vector<std::string>& to, const std::vector<std::string>& from);

// The -I/-isystem flags of a unit: tvm-ffi's, then `backend_include`
// (<rocm>/include for backend hip, which tvm_ffi adds to every unit's flags,
// C++ ones too; else empty), then the manifest's.
std::vector<std::string> include_flags(const toolchain::Toolchain& tc, const Manifest& m,
                                       const std::string& backend_include = "");

// `path` relative to the manifest's folder, or for a manifest given on the
// command line to the working directory (PlanOptions); else whole.
std::string display_path(const Manifest& m, const std::string& path, const std::string& working_directory);

// Exit 2: `what` needs one arch and `source` gave several.
[[noreturn]] void need_one_arch(const std::string& what, const std::vector<toolchain::CudaArch>& archs,
                                const std::string& source, const std::string& suggestion);

// --split-compile for one nvcc step: N is a flag of the command (in its
// key); auto is decided per job by the scheduler (compile/launch.cpp) and
// the key says only "auto". A user's own --split-compile wins.
void set_split_compile(CompileStep& s, int policy);

// An nvcc step compiling device code for `arch_flags` (the unit is the caller's to set).
CompileStep device_compile(const Manifest& m, const toolchain::Toolchain& tc, CompileOutput output,
                           const std::vector<std::string>& arch_flags, int split_compile);

void set_launcher(CompileStep& s, const toolchain::Launcher& l);

}  // namespace tvmffi_jit::compile
