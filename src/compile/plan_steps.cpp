// The flags and steps both of make_plan's plans build with
// (compile/plan_parts.h): the default flags and which of them the user's
// replace, include flags, an nvcc device compile, split compilation, launchers.
#include <algorithm>

#include "compile/plan_parts.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// The option a flag sets when the same option given twice is a conflict, not
// an addition: "-O3" and "-O2" are one optimisation level (nvcc warns about an
// "incompatible redefinition"), "-std=c++20" and "-std=c++17" one standard.
// Empty: the flag is not one of those.
std::string_view exclusive_option(std::string_view flag) {
  if (util::starts_with(flag, "-O") || util::starts_with(flag, "--optimize")) return "optimize";
  if (util::starts_with(flag, "-std=") || util::starts_with(flag, "--std=") || flag == "-std" || flag == "--std")
    return "std";
  return {};
}

// One default flag as nvcc may also spell it: "-Xcompiler -fPIC" is
// "-Xcompiler=-fPIC", "--compiler-options=-fPIC", "--compiler-options -fPIC".
std::vector<std::string> host_option_words(const std::vector<std::string>& flags, size_t i) {
  const std::string& f = flags[i];
  for (std::string_view opt : {"-Xcompiler", "--compiler-options"}) {
    if (f == opt && i + 1 < flags.size()) return util::split_any(flags[i + 1], ",");
    if (util::starts_with(f, std::string(opt) + "=")) return util::split_any(f.substr(opt.size() + 1), ",");
  }
  return {};
}

}  // namespace

std::vector<std::string> defaults_not_overridden(const std::vector<std::string>& defaults,
                                                 const std::vector<std::string>& user) {
  std::vector<std::string> user_host_words;
  for (size_t i = 0; i < user.size(); ++i) append_flags(user_host_words, host_option_words(user, i));
  auto given = [&](const std::string& flag) { return std::find(user.begin(), user.end(), flag) != user.end(); };
  std::vector<std::string> out;
  for (size_t i = 0; i < defaults.size(); ++i) {
    const std::string& d = defaults[i];
    if (std::vector<std::string> words = host_option_words(defaults, i); !words.empty()) {
      // "-Xcompiler -fPIC": kept unless the user passes the same host option.
      const bool same = std::all_of(words.begin(), words.end(), [&](const std::string& w) {
        return std::find(user_host_words.begin(), user_host_words.end(), w) != user_host_words.end();
      });
      if (!same) out.insert(out.end(), {d, defaults[i + 1]});
      if (d == "-Xcompiler" || d == "--compiler-options") ++i;
      continue;
    }
    if (given(d)) continue;  // the same flag again: once is enough
    std::string_view option = exclusive_option(d);
    if (!option.empty() &&
        std::any_of(user.begin(), user.end(), [&](const std::string& u) { return exclusive_option(u) == option; }))
      continue;  // the user's value replaces ours
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> default_cxx_flags() { return {"-std=c++17", "-fPIC", "-O2"}; }
std::vector<std::string> default_c_flags() { return {"-fPIC", "-O2"}; }
std::vector<std::string> default_cuda_flags() { return {"-Xcompiler", "-fPIC", "-std=c++17", "-O2"}; }
std::vector<std::string> default_hip_flags() {
  return {"-std=c++17", "-O2", "-fPIC", "-D__HIP_PLATFORM_AMD__=1", "-fno-gpu-rdc"};
}

std::vector<std::string> stripped_flags(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& f : flags) {
    std::string_view t = util::trim(f);
    if (!t.empty()) out.emplace_back(t);
  }
  return out;
}

void append_flags(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

std::vector<std::string> include_flags(const toolchain::Toolchain& tc, const Manifest& m,
                                       const std::string& backend_include) {
  std::vector<std::string> out;
  // tvm_ffi passes both default directories even when they are the same
  // (a wheel); kept so the command lines match.
  if (tc.tvm_ffi) {
    out.push_back("-I" + tc.tvm_ffi->include_dir);
    out.push_back("-I" + tc.tvm_ffi->dlpack_include_dir);
  }
  if (!backend_include.empty()) out.push_back("-I" + backend_include);
  for (const auto& p : m.extra_include_paths) out.push_back("-I" + p);
  for (const auto& p : m.system_include_paths) append_flags(out, {"-isystem", p});
  return out;
}

std::string display_path(const Manifest& m, const std::string& path, const std::string& working_directory) {
  const std::string base = m.manifest_path.empty() ? working_directory : util::parent_path(m.manifest_path);
  if (!base.empty() && util::starts_with(path, base + "/")) return path.substr(base.size() + 1);
  return path;
}

[[noreturn]] void need_one_arch(const std::string& what, const std::vector<toolchain::CudaArch>& archs,
                                const std::string& source, const std::string& suggestion) {
  std::vector<std::string> texts;
  for (const auto& a : archs) texts.push_back(a.text());
  throw usage_error(what + " is for one architecture, but " + source + " gives " + std::to_string(archs.size()) +
                    " (" + util::join(texts, " ") + "): " + suggestion);
}

void set_split_compile(CompileStep& s, int policy) {
  for (const auto& f : s.flags)
    if (util::starts_with(f, "--split-compile") || util::starts_with(f, "-split-compile")) return;
  if (policy == kSplitCompileAuto) s.split_compile = kSplitCompileAuto;
  else if (policy > 1) s.flags.push_back("--split-compile=" + std::to_string(policy));
}

CompileStep device_compile(const Manifest& m, const toolchain::Toolchain& tc, CompileOutput output,
                           const std::vector<std::string>& arch_flags, int split_compile) {
  CompileStep s;
  s.language = Language::kCuda;
  s.output = output;
  s.compiler = tc.cuda->nvcc;
  s.flags = defaults_not_overridden({"-std=c++17", "-O2"}, stripped_flags(m.extra_cuda_cflags));
  append_flags(s.flags, arch_flags);
  append_flags(s.flags, stripped_flags(m.extra_cuda_cflags));
  append_flags(s.flags, include_flags(tc, m));
  set_split_compile(s, split_compile);
  return s;
}

void set_launcher(CompileStep& s, const toolchain::Launcher& l) {
  s.launcher = l.argv;
  s.launcher_source = l.empty() ? "" : l.source;
}

}  // namespace tvmffi_jit::compile
