#include "tvmffi_jit/toolchain/tvm_ffi.h"

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
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

// Checks what a program printed (three directories) and turns it into a location.
std::optional<TvmFfiLocation> from_directories(const std::vector<std::string>& lines, const std::string& found_by,
                                               std::string* why) {
  if (lines.size() < 3) {
    *why = found_by + " printed " + std::to_string(lines.size()) + " lines, expected 3";
    return std::nullopt;
  }
  TvmFfiLocation loc{std::string(util::trim(lines[0])), std::string(util::trim(lines[1])),
                     std::string(util::trim(lines[2])), found_by};
  if (!has_tvm_headers(loc.include_dir)) *why = found_by + ": no tvm/ffi/function.h in " + loc.include_dir;
  else if (!has_dlpack_headers(loc.dlpack_include_dir)) *why = found_by + ": no dlpack/dlpack.h in " + loc.dlpack_include_dir;
  else if (!has_library(loc.lib_dir)) *why = found_by + ": no libtvm_ffi.so in " + loc.lib_dir;
  else return loc;
  return std::nullopt;
}

std::optional<TvmFfiLocation> ask_program(const std::vector<std::string>& argv, const std::string& found_by,
                                          std::string* why) {
  util::ProcessOptions options;
  options.timeout_seconds = 60;
  util::ProcessResult r;
  try {
    r = util::run_process(argv, options);
  } catch (const Error& e) {
    *why = found_by + ": " + e.what();
    return std::nullopt;
  }
  if (!r.ok()) {
    std::vector<std::string> err = util::split_lines(r.err);
    *why = found_by + " failed (" + r.status_text() + (err.empty() ? "" : ": " + err.back()) + ")";
    return std::nullopt;
  }
  return from_directories(util::split_lines(r.out), found_by, why);
}

}  // namespace

std::optional<TvmFfiLocation> tvm_ffi_from_root(const std::string& root, std::string* why) {
  if (!util::is_directory(root)) {
    *why = root + " is not a directory";
    return std::nullopt;
  }
  std::string abs = util::absolute_path(root);
  TvmFfiLocation loc;
  // An installed prefix or a wheel's package folder keep everything under
  // include/ and lib/; a source checkout has dlpack in 3rdparty/ and the
  // library in build/lib/.
  std::string inc = util::join_path(abs, "include");
  if (!has_tvm_headers(inc)) {
    *why = "no include/tvm/ffi/function.h under " + abs;
    return std::nullopt;
  }
  loc.include_dir = inc;
  for (const std::string& d : {inc, util::join_path(abs, "3rdparty/dlpack/include")}) {
    if (has_dlpack_headers(d)) {
      loc.dlpack_include_dir = d;
      break;
    }
  }
  if (loc.dlpack_include_dir.empty()) {
    *why = "no dlpack/dlpack.h under " + abs + "/include or " + abs + "/3rdparty/dlpack/include";
    return std::nullopt;
  }
  for (const char* sub : {"lib", "lib64", "build/lib"}) {
    std::string d = util::join_path(abs, sub);
    if (has_library(d)) {
      loc.lib_dir = d;
      break;
    }
  }
  if (loc.lib_dir.empty()) {
    *why = "no libtvm_ffi.so in " + abs + "/lib, lib64 or build/lib";
    return std::nullopt;
  }
  return loc;
}

TvmFfiLocation find_tvm_ffi(const TvmFfiSearch& search) {
  std::string why;
  if (search.root) {
    if (auto loc = tvm_ffi_from_root(*search.root, &why)) {
      loc->found_by = "--tvm-ffi-root";
      return *loc;
    }
    throw missing_tool_error("--tvm-ffi-root " + *search.root + ": " + why + "; " + kInstallHint);
  }
  if (auto root = non_empty(search.env, "TVM_FFI_ROOT")) {
    if (auto loc = tvm_ffi_from_root(*root, &why)) {
      loc->found_by = "TVM_FFI_ROOT";
      return *loc;
    }
    throw missing_tool_error("TVM_FFI_ROOT=" + *root + ": " + why + "; " + kInstallHint);
  }
  std::vector<std::string> tried = {"--tvm-ffi-root not given", "TVM_FFI_ROOT unset"};
  if (util::find_program(search.config_program)) {
    if (auto loc = ask_program({search.config_program, "--includedir", "--dlpack-includedir", "--libdir"},
                               "tvm-ffi-config", &why))
      return *loc;
    tried.push_back(why);
  } else {
    tried.push_back(search.config_program + " not on PATH");
  }
  if (util::find_program(search.python_program)) {
    const char* script =
        "import os, tvm_ffi.libinfo as l\n"
        "print(l.find_include_path())\n"
        "print(l.find_dlpack_include_path())\n"
        "print(os.path.dirname(l.find_libtvm_ffi()))\n";
    if (auto loc = ask_program({search.python_program, "-c", script}, "python3", &why)) return *loc;
    tried.push_back(why);
  } else {
    tried.push_back(search.python_program + " not on PATH");
  }
  throw missing_tool_error("tvm-ffi not found (" + util::join(tried, "; ") + "): " + kInstallHint);
}

}  // namespace tvmffi_jit::toolchain
