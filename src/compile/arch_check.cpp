#include "tvmffi_jit/compile/arch_check.h"

#include <algorithm>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/toolchain/compiler_identity.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

constexpr uint64_t kMaxMemoBytes = 64 << 10;
constexpr uint64_t kMaxListBytes = 64 << 10;

std::vector<int> parse_arch_list_output(const std::string& text) {
  std::vector<int> out;
  for (const auto& line : util::split_lines(text)) {
    std::string_view l = util::trim(line);
    if (!util::starts_with(l, "compute_")) continue;
    l.remove_prefix(8);
    int n = 0;
    size_t i = 0;
    for (; i < l.size() && i < 4 && l[i] >= '0' && l[i] <= '9'; ++i) n = n * 10 + (l[i] - '0');
    if (i > 0) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> list_archs(const std::string& nvcc) {
  util::ProcessOptions po;
  po.timeout_seconds = 60;
  util::ProcessResult r = util::run_process({nvcc, "--list-gpu-arch"}, po);
  if (!r.ok() || r.out.size() > kMaxListBytes) {
    spdlog::debug("{} --list-gpu-arch: {}; archs are not checked before the build", nvcc, r.status_text());
    return {};
  }
  return parse_arch_list_output(r.out);
}

std::string arch_text(int n) { return std::to_string(n / 10) + "." + std::to_string(n % 10); }

}  // namespace

std::vector<int> nvcc_supported_archs(const std::string& nvcc, const std::string& cache_dir, bool use_cache) {
  // A batch plans every module through here: one answer per nvcc per process.
  static std::mutex mutex;
  static std::map<std::string, std::vector<int>> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = seen.find(nvcc); it != seen.end()) return it->second;
  std::string memo;
  std::string identity;
  if (use_cache && !cache_dir.empty()) {
    try {
      const std::string& root = cache_dir;
      toolchain::IdentifyOptions io;
      io.memo_dir = util::join_path(root, "compilers");
      io.memo_writable = false;  // the build itself writes identities; only read them here
      identity = toolchain::identify_compiler("nvcc", nvcc, io).identity;
      memo = util::join_path(util::join_path(root, "toolchain"), "nvcc-archs-" + util::sha256_hex(nvcc).substr(0, 16) + ".json");
      if (auto text = util::read_small_file(memo, kMaxMemoBytes)) {
        auto j = nlohmann::json::parse(*text, nullptr, false);
        if (j.is_object() && j.value("identity", "") == identity && j.contains("archs") && j["archs"].is_array()) {
          std::vector<int> archs;
          for (const auto& a : j["archs"])
            if (a.is_number_integer()) archs.push_back(a.get<int>());
          if (!archs.empty()) return seen[nvcc] = archs;
        }
      }
    } catch (const Error& e) {
      spdlog::debug("nvcc arch list not memoised: {}", e.what());
      memo.clear();
    }
  }
  std::vector<int> archs = list_archs(nvcc);
  if (!memo.empty() && !archs.empty()) {
    try {
      const std::string& root = cache_dir;
      cache::CacheRoot r = cache::open_root(root, true);
      if (r.writable) {
        util::make_directories(util::join_path(root, "toolchain"), 0700);
        nlohmann::json j = {{"nvcc", nvcc}, {"identity", identity}, {"archs", archs}};
        util::write_file_atomic(memo, util::dump_json(j, 2) + "\n", 0600);
      }
    } catch (const Error& e) {
      spdlog::debug("nvcc arch list not memoised: {}", e.what());
    }
  }
  return seen[nvcc] = archs;
}

void check_supported_archs(const BuildPlan& plan, const toolchain::Toolchain& tc, const std::string& cache_dir,
                           bool use_cache) {
  if (plan.archs.empty() || !tc.cuda) return;
  bool runs_nvcc = false;
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& s : *steps) runs_nvcc = runs_nvcc || s.language == Language::kCuda;
  if (!runs_nvcc) return;
  const std::vector<int> supported = nvcc_supported_archs(tc.cuda->nvcc, cache_dir, use_cache);
  if (supported.empty()) return;
  std::vector<std::string> bad;
  for (const auto& a : plan.archs)
    if (!std::binary_search(supported.begin(), supported.end(), a.major * 10 + a.minor)) bad.push_back(a.text());
  if (bad.empty()) return;
  std::vector<std::string> names;
  for (int n : supported) names.push_back(arch_text(n));
  const std::string source = plan.arch_source.empty() ? "the arch list" : plan.arch_source;
  throw usage_error(source + ": " + tc.cuda->nvcc + " cannot compile for " + util::join(bad, ", ") +
                    "; it supports " + util::join(names, " ") +
                    " (nvcc --list-gpu-arch). Pick from those, or use a CUDA toolkit that knows " + util::join(bad, ", "));
}

}  // namespace tvmffi_jit::compile
