#include "compile/search_dirs.h"

#include <sys/stat.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <unordered_set>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// The value of a keyed variable, or "" when unset.
std::string env_value(const std::vector<ModuleKeyInputs::EnvVar>& env, const std::string& name) {
  for (const auto& v : env)
    if (v.name == name && v.set) return v.value;
  return "";
}

// A directory as the compiler or linker searches it: relative ones are
// relative to the build dir it runs in (left relative when that is not
// given), and the folder "-I/p/link/.." names is beside link's target
// (util::opened_path), where the files it finds and probes are.
std::string searched(const std::string& d, const std::string& build_dir) {
  const std::string joined = !d.empty() && d[0] == '/' ? d : util::join_path(build_dir, d);
  return !joined.empty() && joined[0] == '/' ? util::opened_path(joined) : joined;
}

}  // namespace

std::vector<std::string> include_search_dirs(const CompileStep& step, const std::string& build_dir,
                                             const std::vector<ModuleKeyInputs::EnvVar>& env) {
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
  if (!step.generated_text && !step.input_path.empty()) out.push_back(util::parent_path(util::opened_path(step.input_path)));
  for (const auto* group : {&quote, &angle, &cpath, &system, &env_system, &after})
    for (const auto& d : *group) out.push_back(searched(d, build_dir));
  return out;
}

std::vector<std::string> library_search_dirs(const LinkStep& link, const std::string& build_dir,
                                             const std::vector<ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> dirs;
  for (size_t i = 0; i < link.flags.size(); ++i) {
    const std::string& f = link.flags[i];
    if (f == "-L" && i + 1 < link.flags.size()) dirs.push_back(link.flags[++i]);
    else if (f.size() > 2 && util::starts_with(f, "-L")) dirs.push_back(f.substr(2));
  }
  for (const auto& d : util::split_any(env_value(env, "LIBRARY_PATH"), ":")) dirs.push_back(d);
  for (auto& d : dirs) d = searched(d, build_dir);
  return dirs;
}

namespace {

bool is_under(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  std::string d = dir.back() == '/' ? dir : dir + "/";
  return util::starts_with(path, d);
}

// Directories normalised as record_shadows compares them: absolute, no
// trailing slash, first occurrence only (compilers and ld drop repeats too).
std::vector<std::string> normal_dirs(const std::vector<std::string>& given) {
  std::vector<std::string> dirs;
  for (const auto& d : given) {
    if (d.empty()) continue;
    std::string n = util::opened_path(d);
    while (n.size() > 1 && n.back() == '/') n.pop_back();
    if (std::find(dirs.begin(), dirs.end(), n) == dirs.end()) dirs.push_back(std::move(n));
  }
  return dirs;
}

void add_shadow_if_absent(cache::HeaderRecord& h, std::unordered_set<std::string>& have, std::string candidate) {
  struct stat st;
  if (candidate == h.path || ::lstat(candidate.c_str(), &st) == 0) return;
  if (have.insert(candidate).second) h.shadows.push_back(std::move(candidate));
}

}  // namespace

void record_shadows(std::vector<cache::HeaderRecord>& headers, const std::vector<std::string>& search_dirs) {
  const std::vector<std::string> dirs = normal_dirs(search_dirs);
  for (auto& h : headers) {
    std::unordered_set<std::string> have(h.shadows.begin(), h.shadows.end());
    for (size_t i = 1; i < dirs.size(); ++i) {
      if (!is_under(h.path, dirs[i])) continue;
      const std::string name = h.path.substr(dirs[i].size() + (dirs[i] == "/" ? 0 : 1));
      for (size_t j = 0; j < i; ++j) add_shadow_if_absent(h, have, util::join_path(dirs[j], name));
    }
  }
}

void record_library_shadows(std::vector<cache::HeaderRecord>& libraries, const std::vector<std::string>& library_dirs) {
  const std::vector<std::string> dirs = normal_dirs(library_dirs);
  for (auto& h : libraries) {
    const std::string name = util::file_name(h.path);
    const bool archive = util::ends_with(name, ".a");
    if (!util::starts_with(name, "lib") || (!archive && !util::ends_with(name, ".so"))) continue;
    const std::string stem = name.substr(0, name.size() - (archive ? 2 : 3));
    auto at = std::find(dirs.begin(), dirs.end(), util::parent_path(h.path));
    if (at == dirs.end()) continue;  // not found through -L (a crt file, a path given whole)
    std::unordered_set<std::string> have(h.shadows.begin(), h.shadows.end());
    for (auto it = dirs.begin(); it != at; ++it)
      for (const char* ext : {".so", ".a"}) add_shadow_if_absent(h, have, util::join_path(*it, stem + ext));
    if (archive) add_shadow_if_absent(h, have, util::join_path(*at, stem + ".so"));
  }
}

}  // namespace tvmffi_jit::compile
