#include "tvmffi_jit/toolchain/tvm_ffi.h"

#include <dirent.h>

#include <algorithm>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/stamp_memo.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

namespace {

const char* kInstallHint =
    "install it with `pip install apache-tvm-ffi` (which also puts tvm-ffi-config on PATH), or pass "
    "--tvm-ffi-root DIR / set TVM_FFI_ROOT to a directory holding include/tvm/ffi/ and lib/libtvm_ffi.so";

bool has_tvm_headers(const std::string& dir) {
  return util::is_regular_file(util::join_path(dir, "tvm/ffi/function.h"));
}
bool has_dlpack_headers(const std::string& dir) {
  return util::is_regular_file(util::join_path(dir, "dlpack/dlpack.h"));
}
bool has_library(const std::string& dir) { return util::path_exists(util::join_path(dir, "libtvm_ffi.so")); }

std::vector<std::string> directory_names(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Checks what a program printed (three directories) and turns it into a location.
Expected<TvmFfiLocation> from_directories(const std::vector<std::string>& lines, const std::string& found_by) {
  if (lines.size() < 3) return Unexpected{found_by + " printed " + std::to_string(lines.size()) + " lines, expected 3"};
  TvmFfiLocation loc{std::string(util::trim(lines[0])), std::string(util::trim(lines[1])),
                     std::string(util::trim(lines[2])), found_by};
  if (!has_tvm_headers(loc.include_dir)) return Unexpected{found_by + ": no tvm/ffi/function.h in " + loc.include_dir};
  if (!has_dlpack_headers(loc.dlpack_include_dir))
    return Unexpected{found_by + ": no dlpack/dlpack.h in " + loc.dlpack_include_dir};
  if (!has_library(loc.lib_dir)) return Unexpected{found_by + ": no libtvm_ffi.so in " + loc.lib_dir};
  return loc;
}

Expected<TvmFfiLocation> ask_program(const std::vector<std::string>& argv, const std::string& found_by) {
  util::ProcessOptions options;
  options.timeout_seconds = 60;
  // The answer must not depend on where tvmffi-jit was started (and a deleted
  // current directory makes pyenv's shims and Python itself fail).
  options.cwd = "/";
  util::ProcessResult r;
  try {
    r = util::run_process(argv, options);
  } catch (const Error& e) {
    // run_process throws for what stops the spawn itself (no such program,
    // no pipes); here that is one more place where tvm-ffi was not found.
    return Unexpected{found_by + ": " + e.what()};
  }
  if (!r.ok()) {
    std::vector<std::string> err = util::split_lines(r.err);
    return Unexpected{found_by + " failed (" + r.status_text() + (err.empty() ? "" : ": " + err.back()) + ")"};
  }
  return from_directories(util::split_lines(r.out), found_by);
}

}  // namespace

Expected<TvmFfiLocation> tvm_ffi_from_root(const std::string& root) {
  if (!util::is_directory(root)) {
    return Unexpected{root + " is not a directory"};
  }
  std::string abs = util::absolute_path(root);
  TvmFfiLocation loc;
  // An installed prefix or a wheel's package folder keep everything under
  // include/ and lib/; a source checkout has dlpack in 3rdparty/ and the
  // library in build/lib/.
  std::string inc = util::join_path(abs, "include");
  if (!has_tvm_headers(inc)) {
    return Unexpected{"no include/tvm/ffi/function.h under " + abs};
  }
  loc.include_dir = inc;
  for (const std::string& d : {inc, util::join_path(abs, "3rdparty/dlpack/include")}) {
    if (has_dlpack_headers(d)) {
      loc.dlpack_include_dir = d;
      break;
    }
  }
  if (loc.dlpack_include_dir.empty()) {
    return Unexpected{"no dlpack/dlpack.h under " + abs + "/include or " + abs + "/3rdparty/dlpack/include"};
  }
  for (const char* sub : {"lib", "lib64", "build/lib"}) {
    std::string d = util::join_path(abs, sub);
    if (has_library(d)) {
      loc.lib_dir = d;
      break;
    }
  }
  if (loc.lib_dir.empty()) {
    return Unexpected{"no libtvm_ffi.so in " + abs + "/lib, lib64 or build/lib"};
  }
  return loc;
}

Expected<TvmFfiLocation> find_tvm_ffi(const TvmFfiSearch& search) {
  if (search.root) {
    auto loc = tvm_ffi_from_root(*search.root);
    if (!loc) return Unexpected{"--tvm-ffi-root " + *search.root + ": " + loc.error() + "; " + kInstallHint};
    loc->found_by = "--tvm-ffi-root";
    return loc;
  }
  if (auto root = non_empty(search.env, "TVM_FFI_ROOT")) {
    auto loc = tvm_ffi_from_root(*root);
    if (!loc) return Unexpected{"TVM_FFI_ROOT=" + *root + ": " + loc.error() + "; " + kInstallHint};
    loc->found_by = "TVM_FFI_ROOT";
    return loc;
  }
  std::vector<std::string> tried = {"--tvm-ffi-root not given", "TVM_FFI_ROOT unset"};
  if (util::find_program(search.config_program)) {
    auto loc = ask_program({search.config_program, "--includedir", "--dlpack-includedir", "--libdir"}, "tvm-ffi-config");
    if (loc) return loc;
    tried.push_back(loc.error());
  } else {
    tried.push_back(search.config_program + " not on PATH");
  }
  if (util::find_program(search.python_program)) {
    // libinfo.py is loaded on its own, without importing the tvm_ffi package:
    // its __init__ loads the library and, where torch is installed, torch
    // (3.4 s on the GPU machine, during which a batch's cores sat idle).
    // Where that fails (another layout), the package is imported.
    const char* script =
        "import os, importlib.util as u\n"
        "try:\n"
        "    s = u.find_spec('tvm_ffi')\n"
        "    ls = u.spec_from_file_location('_tvmffi_jit_libinfo', os.path.join(s.submodule_search_locations[0], 'libinfo.py'))\n"
        "    l = u.module_from_spec(ls); ls.loader.exec_module(l)\n"
        "    r = (l.find_include_path(), l.find_dlpack_include_path(), os.path.dirname(l.find_libtvm_ffi()))\n"
        "except Exception:\n"
        "    import tvm_ffi.libinfo as l\n"
        "    r = (l.find_include_path(), l.find_dlpack_include_path(), os.path.dirname(l.find_libtvm_ffi()))\n"
        "print(r[0]); print(r[1]); print(r[2])\n";
    auto loc = ask_program({search.python_program, "-c", script}, "python3");
    if (loc) return loc;
    tried.push_back(loc.error());
  } else {
    tried.push_back(search.python_program + " not on PATH");
  }
  return Unexpected{"tvm-ffi not found (" + util::join(tried, "; ") + "): " + kInstallHint};
}

namespace {

Expected<std::string> header_version_of(const std::string& header) {
  auto text = util::try_read_file(header);
  if (!text) return Unexpected{"cannot read " + header};
  std::string parts[3];
  const char* names[3] = {"TVM_FFI_VERSION_MAJOR", "TVM_FFI_VERSION_MINOR", "TVM_FFI_VERSION_PATCH"};
  // Only the lines naming a version macro are split: the header is read on
  // every tvmffi-jit process's hit, and splitting each of its lines into
  // words was half of a hit's CPU time.
  const std::string& t = *text;
  for (size_t pos = t.find("TVM_FFI_VERSION_"); pos != std::string::npos; pos = t.find("TVM_FFI_VERSION_", pos)) {
    const size_t begin = t.rfind('\n', pos) == std::string::npos ? 0 : t.rfind('\n', pos) + 1;
    const size_t end = std::min(t.find('\n', pos), t.size());
    auto words = util::split_any(std::string_view(t).substr(begin, end - begin), " \t");
    pos = end;
    if (words.size() < 3 || words[0] != "#define") continue;
    for (int i = 0; i < 3; ++i)
      if (words[1] == names[i]) parts[i] = words[2];
  }
  if (parts[0].empty() || parts[1].empty()) return Unexpected{header + " has no TVM_FFI_VERSION_MAJOR/MINOR macros"};
  return parts[0] + "." + parts[1] + (parts[2].empty() ? "" : "." + parts[2]);
}

}  // namespace

Expected<std::string> tvm_ffi_header_version(const std::string& include_dir) {
  const std::string header = util::join_path(include_dir, "tvm/ffi/c_api.h");
  // Every hit keys on the version; a long-lived process (the engine library)
  // reads the header once while its stamp holds.
  static util::StampMemo<std::string> memo(8, util::StampMemo<std::string>::kSettleNs, true);
  return memo.get_or(header, [&] { return header_version_of(header); });
}

Expected<std::string> tvm_ffi_package_version(const TvmFfiLocation& location) {
  // A wheel: <site-packages>/tvm_ffi/include and <site-packages>/apache_tvm_ffi-<version>.dist-info.
  const std::string site = util::parent_path(util::parent_path(location.include_dir));
  const std::string prefix = "apache_tvm_ffi-";
  for (const auto& name : directory_names(site)) {
    if (!util::starts_with(name, prefix) || !util::ends_with(name, ".dist-info")) continue;
    // METADATA's "Version:" is the normalised version; the folder name carries the same.
    if (auto meta = util::try_read_file(util::join_path(util::join_path(site, name), "METADATA"))) {
      for (const auto& line : util::split_lines(meta->substr(0, 64 * 1024))) {
        if (util::starts_with(line, "Version:")) return std::string(util::trim(std::string_view(line).substr(8)));
      }
    }
    return name.substr(prefix.size(), name.size() - prefix.size() - std::string(".dist-info").size());
  }
  return Unexpected{"no apache_tvm_ffi-*.dist-info in " + site + " (not installed from a wheel)"};
}

}  // namespace tvmffi_jit::toolchain
