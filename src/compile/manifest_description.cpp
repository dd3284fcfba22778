// What a module description is, apart from how it is read
// (compile/manifest.cpp) and checked (compile/manifest_checks.cpp): the names
// of its kinds, what its sources need, its error.
#include "tvmffi_jit/compile/manifest.h"

#include <optional>
#include <string>
#include <string_view>

#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

const char* emit_kind_name(EmitKind k) {
  switch (k) {
    case EmitKind::kModule: return "module";
    case EmitKind::kObject: return "object";
    case EmitKind::kCubin: return "cubin";
    case EmitKind::kFatbin: return "fatbin";
    case EmitKind::kPtx: return "ptx";
  }
  return "module";
}

std::optional<EmitKind> parse_emit_kind(std::string_view s) {
  for (EmitKind k : {EmitKind::kModule, EmitKind::kObject, EmitKind::kCubin, EmitKind::kFatbin, EmitKind::kPtx})
    if (s == emit_kind_name(k)) return k;
  return std::nullopt;
}

const char* device_compiler_name(DeviceCompiler c) { return c == DeviceCompiler::kNvrtc ? "nvrtc" : "nvcc"; }

const char* gpu_backend_name(GpuBackend b) { return b == GpuBackend::kHip ? "hip" : "cuda"; }

std::optional<GpuBackend> parse_gpu_backend(std::string_view s) {
  if (s == "cuda") return GpuBackend::kCuda;
  if (s == "hip") return GpuBackend::kHip;
  return std::nullopt;
}

std::optional<DeviceCompiler> parse_device_compiler(std::string_view s) {
  if (s == "nvcc") return DeviceCompiler::kNvcc;
  if (s == "nvrtc") return DeviceCompiler::kNvrtc;
  return std::nullopt;
}

bool EmbedSpec::compile_from_cuda() const { return util::extension(path) == ".cu"; }

bool Manifest::has_gpu_sources() const {
  if (has_inline_cuda()) return true;
  for (const auto& s : sources) {
    std::string ext = util::extension(s);
    if (ext == ".cu" || ext == ".hip") return true;
  }
  return false;
}

bool Manifest::needs_cuda() const {
  // Backend hip compiles the GPU sources with hipcc (a .hip source, and no
  // backend given, means hip too); device emits are CUDA formats either way.
  if (emit == EmitKind::kCubin || emit == EmitKind::kFatbin || emit == EmitKind::kPtx) return true;
  if (backend == GpuBackend::kHip) return false;
  for (const auto& s : sources)
    if (!backend && util::extension(s) == ".hip") return false;
  if (has_inline_cuda()) return true;
  for (const auto& s : sources)
    if (util::extension(s) == ".cu") return true;
  for (const auto& e : embed_cubin)
    if (e.compile_from_cuda()) return true;
  return false;
}

ManifestError::ManifestError(std::string where, std::string pointer, std::string problem)
    : Error(ExitCode::kUsage, where + ": " + (pointer.empty() ? "" : pointer + ": ") + problem),
      where_(std::move(where)),
      pointer_(std::move(pointer)),
      problem_(std::move(problem)) {}

}  // namespace tvmffi_jit::compile
