#include "tvmffi_jit/toolchain/cuda_arch.h"

#include <algorithm>
#include <cctype>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

namespace {

const char* kArchForms = "expected X.Y, X.Ya or X.Yf, optionally followed by +PTX (e.g. 8.0, 9.0a, 10.0f, 9.0+PTX)";

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::optional<CudaArch> parse_entry(std::string_view entry) {
  CudaArch a;
  std::string lower = util::to_lower(entry);
  std::string_view s = lower;
  if (util::ends_with(s, "+ptx")) {
    a.ptx = true;
    s.remove_suffix(4);
  }
  size_t dot = s.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view major = s.substr(0, dot);
  std::string_view rest = s.substr(dot + 1);
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    a.suffix = rest.back();
    rest.remove_suffix(1);
  }
  // Compute capabilities have a one- or two-digit major and a one-digit minor
  // (sm_90, sm_100, sm_121); anything else is a typo such as "90" or "9.00".
  if (!all_digits(major) || major.size() > 2 || !all_digits(rest) || rest.size() != 1) return std::nullopt;
  a.major = std::stoi(std::string(major));
  a.minor = rest[0] - '0';
  if (a.major == 0) return std::nullopt;
  return a;
}

void add_unique(std::vector<CudaArch>& list, const CudaArch& a) {
  for (auto& existing : list) {
    if (existing.major == a.major && existing.minor == a.minor && existing.suffix == a.suffix) {
      existing.ptx = existing.ptx || a.ptx;
      return;
    }
  }
  list.push_back(a);
}

}  // namespace

std::string CudaArch::text() const {
  std::string t = std::to_string(major) + "." + std::to_string(minor);
  if (suffix) t += suffix;
  if (ptx) t += "+PTX";
  return t;
}

std::string CudaArch::sm() const {
  std::string t = "sm_" + std::to_string(major) + std::to_string(minor);
  if (suffix) t += suffix;
  return t;
}

std::string CudaArch::compute() const {
  std::string t = "compute_" + std::to_string(major) + std::to_string(minor);
  if (suffix) t += suffix;
  return t;
}

Expected<std::vector<CudaArch>> try_parse_arch_list(std::string_view text) {
  std::vector<CudaArch> list;
  for (const auto& entry : util::split_any(text, " \t\n,;")) {
    std::optional<CudaArch> a = parse_entry(entry);
    if (!a) return Unexpected{"bad CUDA architecture \"" + entry + "\": " + kArchForms};
    add_unique(list, *a);
  }
  if (list.empty()) return Unexpected{std::string("empty CUDA architecture list: ") + kArchForms};
  return list;
}

std::vector<CudaArch> parse_arch_list(std::string_view text, const std::string& origin) {
  return try_parse_arch_list(text).value_or_throw(
      [&](const std::string& problem) { return usage_error(origin + ": " + problem); });
}

void merge_arch_lists(std::vector<CudaArch>& a, const std::vector<CudaArch>& b) {
  for (const auto& x : b) add_unique(a, x);
}

std::string gencode_flag(const CudaArch& arch, GencodeCode code) {
  return "-gencode=arch=" + arch.compute() + ",code=" + (code == GencodeCode::kSass ? arch.sm() : arch.compute());
}

std::vector<std::string> gencode_flags(const std::vector<CudaArch>& archs) {
  std::vector<std::string> flags;
  for (const auto& a : archs) {
    flags.push_back(gencode_flag(a, GencodeCode::kSass));
    if (a.ptx) flags.push_back(gencode_flag(a, GencodeCode::kPtx));
  }
  return flags;
}

ArchResolution resolve_archs(const std::vector<CudaArch>& command_line,
                             const std::vector<CudaArch>& manifest,
                             const std::optional<std::string>& env_arch_list,
                             const DetectGpus& detect) {
  if (!command_line.empty()) return {command_line, "--arch"};
  if (!manifest.empty()) return {manifest, "manifest"};
  if (env_arch_list && !util::trim(*env_arch_list).empty())
    return {parse_arch_list(*env_arch_list, "TVM_FFI_CUDA_ARCH_LIST"), "TVM_FFI_CUDA_ARCH_LIST"};
  std::string why = "no GPU detection available";
  if (detect) {
    DetectedGpus gpus = detect();
    if (gpus.available && !gpus.capabilities.empty()) {
      std::vector<CudaArch> archs;
      for (const auto& [major, minor] : gpus.capabilities) {
        CudaArch a;
        a.major = major;
        a.minor = minor;
        add_unique(archs, a);
      }
      return {archs, "driver"};
    }
    why = gpus.available ? "the CUDA driver sees no GPU" : "CUDA driver: " + gpus.reason;
  }
  throw missing_tool_error(
      "cannot choose a CUDA architecture (" + why +
      "): pass --arch (e.g. --arch 9.0), set \"cuda_arch\" in the manifest, or set "
      "TVM_FFI_CUDA_ARCH_LIST (e.g. TVM_FFI_CUDA_ARCH_LIST=\"8.0 9.0\")");
}

Expected<std::vector<std::string>> try_parse_rocm_arch_list(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& word : util::split_any(std::string(text), " \t\n,;")) {
    if (word.empty()) continue;
    // gfx<hex digits>, then :feature+ / :feature- items (xnack, sramecc, ...).
    bool ok = word.size() > 3 && word.compare(0, 3, "gfx") == 0;
    size_t i = 3;
    for (; ok && i < word.size() && word[i] != ':'; ++i)
      ok = std::isdigit(static_cast<unsigned char>(word[i])) || (word[i] >= 'a' && word[i] <= 'f');
    ok = ok && i > 3;
    while (ok && i < word.size()) {
      size_t end = word.find(':', i + 1);
      std::string feature = word.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      ok = feature.size() >= 2 && (feature.back() == '+' || feature.back() == '-');
      for (size_t k = 0; ok && k + 1 < feature.size(); ++k) ok = std::islower(static_cast<unsigned char>(feature[k]));
      i = end == std::string::npos ? word.size() : end;
    }
    if (!ok)
      return Unexpected{"invalid ROCm architecture " + quote_for_message(word) +
                        " (expected gfx<id> with optional :feature+/- items, e.g. gfx90a, gfx942, gfx90a:xnack-)"};
    merge_rocm_arch_lists(out, {word});
  }
  return out;
}

void merge_rocm_arch_lists(std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const auto& x : b)
    if (std::find(a.begin(), a.end(), x) == a.end()) a.push_back(x);
}

RocmArchResolution resolve_rocm_archs(const std::vector<std::string>& command_line,
                                      const std::vector<std::string>& manifest,
                                      const std::optional<std::string>& env_arch_list,
                                      const std::vector<std::string>& extra_cuda_cflags) {
  if (!command_line.empty()) return {command_line, "--arch"};
  if (!manifest.empty()) return {manifest, "manifest"};
  if (env_arch_list && !util::trim(*env_arch_list).empty()) {
    auto archs = try_parse_rocm_arch_list(*env_arch_list).value_or_throw(
        [](const std::string& problem) { return usage_error("TVM_FFI_ROCM_ARCH_LIST: " + problem); });
    if (!archs.empty()) return {archs, "TVM_FFI_ROCM_ARCH_LIST"};
  }
  for (const auto& f : extra_cuda_cflags)
    if (util::starts_with(f, "--offload-arch")) return {{}, "extra_cuda_cflags"};
  throw missing_tool_error(
      "cannot choose a ROCm GPU architecture for the HIP sources (tvmffi-jit does not probe AMD GPUs): set "
      "TVM_FFI_ROCM_ARCH_LIST (e.g. TVM_FFI_ROCM_ARCH_LIST=\"gfx90a gfx942\"; from Python too), or from Python pass "
      "extra_cuda_cflags=[\"--offload-arch=gfx90a\"]; on the command line --arch gfx90a or \"rocm_arch\" in the "
      "manifest");
}

}  // namespace tvmffi_jit::toolchain
