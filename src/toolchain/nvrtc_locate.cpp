#include "tvmffi_jit/toolchain/nvrtc_locate.h"

#include <dirent.h>

#include <algorithm>
#include <optional>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

namespace {

// "libnvrtc.so.13" -> 13; anything else (libnvrtc.so, libnvrtc.so.13.0.88,
// libnvrtc-builtins.so.13.0, libnvrtc.alt.so.13) -> nullopt. Only the soname
// link is wanted: the fully versioned file is what it points to anyway.
std::optional<int> soname_major(const std::string& name) {
  static const std::string prefix = "libnvrtc.so.";
  if (!util::starts_with(name, prefix) || name.size() == prefix.size()) return std::nullopt;
  int major = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    major = major * 10 + (name[i] - '0');
    if (major > 1000) return std::nullopt;
  }
  return major;
}

// libnvrtc files in one directory, in the order they should be tried.
std::vector<std::string> nvrtc_files_in(const std::string& dir) {
  std::vector<std::pair<int, std::string>> versioned;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (auto major = soname_major(name)) versioned.emplace_back(*major, name);
    }
    ::closedir(d);
  }
  std::sort(versioned.begin(), versioned.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> files;
  for (const auto& [major, name] : versioned) files.push_back(util::join_path(dir, name));
  std::string unversioned = util::join_path(dir, "libnvrtc.so");
  if (util::is_regular_file(unversioned)) files.push_back(unversioned);
  return files;
}

}  // namespace

NvrtcSearch nvrtc_search(const EnvLookup& env) {
  NvrtcSearch search;
  std::string forced = env("TVMFFI_JIT_LIBNVRTC").value_or("");
  if (!forced.empty()) {
    search.forced = true;
    search.looked_in.push_back(forced + " (TVMFFI_JIT_LIBNVRTC)");
    search.candidates.push_back({util::absolute_path(forced), "TVMFFI_JIT_LIBNVRTC"});
    return search;
  }

  std::vector<std::pair<std::string, std::string>> homes;  // (toolkit root, origin)
  if (auto v = non_empty(env, "CUDA_HOME")) homes.emplace_back(*v, "CUDA_HOME");
  if (auto v = non_empty(env, "CUDA_PATH")) homes.emplace_back(*v, "CUDA_PATH");
  if (auto nvcc = util::find_program("nvcc")) {
    homes.emplace_back(util::parent_path(util::parent_path(util::absolute_path(*nvcc))), "nvcc on PATH");
  }
  homes.emplace_back("/usr/local/cuda", "/usr/local/cuda");

  std::vector<std::string> seen_dirs;
  for (const auto& [home, origin] : homes) {
    for (const char* sub : {"lib64", "lib"}) {
      std::string dir = util::join_path(util::absolute_path(home), sub);
      if (std::find(seen_dirs.begin(), seen_dirs.end(), dir) != seen_dirs.end()) continue;
      seen_dirs.push_back(dir);
      search.looked_in.push_back(dir + " (" + origin + ")");
      for (auto& file : nvrtc_files_in(dir)) search.candidates.push_back({file, origin});
    }
  }
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    search.looked_in.push_back(std::string(soname) + " (dynamic loader search path)");
    search.candidates.push_back({soname, "dynamic loader"});
  }
  return search;
}

std::vector<std::string> cuda_include_dirs_for_library(const std::string& library_path) {
  std::vector<std::string> lib_dirs = {util::parent_path(util::absolute_path(library_path))};
  // A dangling link does not resolve: the lexical directory is all there is.
  if (auto real = util::real_path(library_path)) lib_dirs.push_back(util::parent_path(*real));
  std::vector<std::string> dirs;
  std::vector<std::string> canonical_seen;
  auto add = [&](const std::string& dir) {
    if (!util::is_directory(dir)) return;
    std::string canon = util::canonical_path(dir);
    if (std::find(canonical_seen.begin(), canonical_seen.end(), canon) != canonical_seen.end()) return;
    canonical_seen.push_back(canon);
    dirs.push_back(dir);
  };
  for (const auto& lib_dir : lib_dirs) {
    std::string include = util::join_path(util::parent_path(lib_dir), "include");
    // A toolkit include dir has the CUDA headers NVRTC programs use; a bare
    // "include" next to some unrelated lib/ is not one.
    if (!util::is_regular_file(util::join_path(include, "cuda_fp16.h")) &&
        !util::is_regular_file(util::join_path(include, "nvrtc.h"))) {
      continue;
    }
    add(include);
    add(util::join_path(include, "cccl"));
  }
  return dirs;
}

}  // namespace tvmffi_jit::toolchain
