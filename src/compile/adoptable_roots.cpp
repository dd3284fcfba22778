#include "compile/adoptable_roots.h"

#include <algorithm>
#include <filesystem>

#include "compile/search_dirs.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

namespace {

// <prefix>/{include,lib,lib64,libexec} of a program in <prefix>/bin, both as
// found and with its symlinks resolved (/usr/bin/c++ -> /etc/alternatives/...).
void add_installation(std::vector<std::string>& out, const std::string& program) {
  if (program.empty() || program.front() != '/') return;
  std::vector<std::string> paths = {program};
  if (auto real = util::real_path(program)) paths.push_back(*real);
  for (const auto& p : paths) {
    const std::string bin = util::parent_path(p);
    if (util::file_name(bin) != "bin") continue;
    const std::string prefix = util::parent_path(bin);
    for (const char* sub : {"include", "lib", "lib64", "libexec"}) out.push_back(util::join_path(prefix, sub));
  }
}

// Absolute, lexically normal, sorted, each once.
std::vector<std::string> normal_roots(std::vector<std::string> out) {
  // Relative directories are the compiler's, under a staging dir: not a place a record may name.
  out.erase(std::remove_if(out.begin(), out.end(), [](const std::string& d) { return d.empty() || d.front() != '/'; }),
            out.end());
  // Records are lexically normal (cache::entry_from_json): so are the roots they are compared with.
  for (auto& d : out) {
    d = std::filesystem::path(d).lexically_normal().string();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<std::string> toolchain_roots(const BuildPlan& plan, const toolchain::Toolchain& tc) {
  std::vector<std::string> out = {"/usr/include", "/usr/lib",     "/usr/lib64",         "/usr/lib32",
                                  "/lib",         "/lib64",       "/lib32",             "/usr/libx32",
                                  "/usr/local/include", "/usr/local/lib"};
  add_installation(out, tc.host.cxx);
  add_installation(out, tc.host.cc);
  if (tc.cuda) out.push_back(tc.cuda->home);
  if (tc.rocm) out.push_back(tc.rocm->home);
  if (tc.tvm_ffi) {
    out.push_back(tc.tvm_ffi->include_dir);
    out.push_back(tc.tvm_ffi->dlpack_include_dir);
    out.push_back(tc.tvm_ffi->lib_dir);
  }
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps) add_installation(out, step.compiler);
  if (plan.link) add_installation(out, plan.link->program);
  return normal_roots(std::move(out));
}

std::vector<std::string> adoptable_roots(const BuildPlan& plan, const toolchain::Toolchain& tc,
                                         const std::string& base_dir,
                                         const std::vector<ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> out = toolchain_roots(plan, tc);
  out.push_back(base_dir);
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps)
      for (const auto& d : include_search_dirs(step, "", env)) out.push_back(d);
  if (plan.link)
    for (const auto& d : library_search_dirs(*plan.link, "", env)) out.push_back(d);
  return normal_roots(std::move(out));
}

}  // namespace tvmffi_jit::compile
