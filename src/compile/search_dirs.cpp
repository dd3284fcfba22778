#include "compile/search_dirs.h"

#include <initializer_list>
#include <optional>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// The value of a keyed variable, or "" when unset.
std::string env_value(const std::vector<cache::ModuleKeyInputs::EnvVar>& env, const std::string& name) {
  for (const auto& v : env)
    if (v.name == name && v.set) return v.value;
  return "";
}

}  // namespace

std::vector<std::string> include_search_dirs(const CompileStep& step, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> quote, angle, cpath, system, env_system, after;
  const bool nvcc = step.language == Language::kCuda;
  // "-Ifoo", "-I foo", and nvcc's "--include-path=foo" / "--include-path foo".
  auto option_value = [&](size_t& i, const std::string& flag, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const std::string name = n;
      if (flag == name && i + 1 < step.flags.size()) return std::optional<std::string>(step.flags[++i]);
      const bool long_option = util::starts_with(name, "--");
      if (long_option && util::starts_with(flag, name + "=")) return std::optional<std::string>(flag.substr(name.size() + 1));
      if (!long_option && flag.size() > name.size() && util::starts_with(flag, name))
        return std::optional<std::string>(flag.substr(name.size()));
    }
    return std::optional<std::string>();
  };
  for (size_t i = 0; i < step.flags.size(); ++i) {
    const std::string& f = step.flags[i];
    if (nvcc && (f == "-Xcompiler" || f == "--compiler-options")) {
      ++i;  // the host compiler's own options: not searched by cudafe
      continue;
    }
    // Longer names first: "-isystem" must not be read as "-i" + "system".
    if (auto v = option_value(i, f, {"-iquote"})) quote.push_back(*v);
    else if (auto v2 = option_value(i, f, {"-isystem", "--system-include"})) system.push_back(*v2);
    else if (auto v3 = option_value(i, f, {"-idirafter"})) after.push_back(*v3);
    else if (auto v4 = option_value(i, f, {"-I", "--include-path"})) angle.push_back(*v4);
  }
  // (An empty element means the current directory to gcc: the build dir, where nothing new can appear.)
  cpath = util::split_any(env_value(env, "CPATH"), ":");
  env_system = util::split_any(env_value(env, step.language == Language::kC ? "C_INCLUDE_PATH" : "CPLUS_INCLUDE_PATH"), ":");

  std::vector<std::string> out;
  if (!step.generated_text && !step.input_path.empty()) out.push_back(util::parent_path(util::absolute_path(step.input_path)));
  for (const auto* group : {&quote, &angle, &cpath, &system, &env_system, &after})
    for (const auto& d : *group) out.push_back(d[0] == '/' ? d : util::join_path(build_dir, d));
  return out;
}

std::vector<std::string> library_search_dirs(const LinkStep& link, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> dirs;
  for (size_t i = 0; i < link.flags.size(); ++i) {
    const std::string& f = link.flags[i];
    if (f == "-L" && i + 1 < link.flags.size()) dirs.push_back(link.flags[++i]);
    else if (f.size() > 2 && util::starts_with(f, "-L")) dirs.push_back(f.substr(2));
  }
  for (const auto& d : util::split_any(env_value(env, "LIBRARY_PATH"), ":")) dirs.push_back(d);
  for (auto& d : dirs)
    if (d[0] != '/') d = util::join_path(build_dir, d);
  return dirs;
}

}  // namespace tvmffi_jit::compile
