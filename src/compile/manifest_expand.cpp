#include "tvmffi_jit/compile/manifest_expand.h"

#include <dirent.h>
#include <glob.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

using json = nlohmann::ordered_json;

// A modules manifest may list modules manifests; deeper than this is a cycle
// or a mistake.
constexpr int kMaxModulesDepth = 8;

bool is_glob_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The *.json files of a directory, sorted by name (hidden files skipped).
std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw usage_error(errno_message("cannot list the manifest directory " + dir, errno));
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || util::extension(name) != ".json") continue;
    std::string path = util::join_path(dir, name);
    if (util::is_regular_file(path)) out.push_back(path);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (util::is_regular_file(g.gl_pathv[i])) out.push_back(util::absolute_path(g.gl_pathv[i]));
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

class Expander {
 public:
  ExpandedManifests result;
  bool keep_going = false;

  // One -m argument, or one string entry of a modules manifest (`where` and
  // `pointer` name it in messages).
  void add_argument(const std::string& given, const std::string& base_dir, const std::string& where,
                    const std::string& pointer, int depth) {
    const std::string path = given.empty() || given[0] == '/' ? given : util::join_path(base_dir, given);
    auto fail = [&](const std::string& problem) -> void {
      if (where.empty()) throw usage_error("-m " + given + ": " + problem);
      throw ManifestError(where, pointer, problem);
    };
    if (given.empty()) fail("empty path");
    if (util::is_directory(path)) {
      result.batch = true;
      std::vector<std::string> files = json_files_in(path);
      if (files.empty()) fail("the directory " + path + " holds no *.json manifest");
      for (const auto& f : files) add_file(f, depth);
    } else if (!util::path_exists(path) && is_glob_pattern(given)) {
      result.batch = true;
      std::vector<std::string> files = glob_files(path);
      if (files.empty()) fail("the pattern " + given + " matches no file");
      for (const auto& f : files) add_file(f, depth);
    } else {
      add_file(path, depth);
    }
  }

 private:
  std::set<std::string> files_seen_;
  std::map<std::string, std::string> origin_of_name_;

  void add_module(BatchInput in) {
    auto [it, fresh] = origin_of_name_.emplace(in.manifest.name, in.origin);
    if (!fresh)
      throw usage_error("two modules are named \"" + in.manifest.name + "\": " + it->second + " and " + in.origin +
                        " (names identify a batch's artifacts: rename one)");
    result.modules.push_back(std::move(in));
  }

  void add_file(const std::string& path_in, int depth) {
    // load_manifest's checks and messages for what cannot be read.
    const std::string path = util::absolute_path(path_in);
    if (!files_seen_.insert(path).second) return;  // a glob and a name that overlap
    if (!util::is_regular_file(path)) {
      load_manifest(path_in);  // throws the usual "manifest: no such file" (exit 2)
      throw usage_error("manifest " + path_in + " is not a regular file");
    }
    std::string text;
    try {
      text = util::read_file(path);
    } catch (const Error& e) {
      throw usage_error(std::string("manifest: ") + e.what());
    }
    // A list of modules needs the word (or an escape that spells it): a
    // one-module manifest, the in-process hit's, is then parsed once, not twice.
    if (text.find("modules") != std::string::npos || text.find("\\u") != std::string::npos) {
      json doc = json::parse(text, nullptr, false);
      if (doc.is_object() && doc.contains("modules")) {
        add_modules_manifest(doc, path_in, util::parent_path(path), depth);
        return;
      }
    }
    try {
      add_module({path_in, parse_manifest_text(text, path_in, util::parent_path(path)), ""});
    } catch (const ManifestError& e) {
      if (!keep_going) throw;
      std::string stem = util::file_name(path);
      stem = stem.substr(0, stem.rfind('.'));
      add_failed(path_in, stem, e.what());
    }
  }

  // A module whose manifest is bad, kept in the batch as a failure (--keep-going).
  void add_failed(const std::string& origin, const std::string& name, const std::string& error) {
    BatchInput in;
    in.origin = origin;
    in.manifest.name = name;
    in.error = error;
    result.modules.push_back(std::move(in));
  }

  void add_modules_manifest(const json& doc, const std::string& where, const std::string& base_dir, int depth) {
    result.batch = true;
    if (depth >= kMaxModulesDepth)
      throw ManifestError(where, "/modules", "modules manifests nest more than " + std::to_string(kMaxModulesDepth) +
                                                 " deep (does one list itself?)");
    for (auto it = doc.begin(); it != doc.end(); ++it)
      if (it.key() != "modules" && it.key() != "$schema")
        throw ManifestError(where, "/" + it.key(),
                            "unknown key in a modules manifest (it holds only \"modules\"; module keys go in each module)");
    const json& list = doc["modules"];
    if (!list.is_array()) throw ManifestError(where, "/modules", std::string("expected an array, got ") + list.type_name());
    if (list.empty()) throw ManifestError(where, "/modules", "empty: list manifest paths, globs or inline manifests");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string pointer = "/modules/" + std::to_string(i);
      const json& entry = list[i];
      if (entry.is_string()) {
        add_argument(entry.get<std::string>(), base_dir, where, pointer, depth + 1);
      } else if (entry.is_object()) {
        Manifest m;
        try {
          m = parse_manifest_text(entry.dump(), where, base_dir);
        } catch (const ManifestError& e) {
          ManifestError located(e.where(), pointer + e.pointer(), e.problem());
          if (!keep_going) throw located;
          const json* name = entry.contains("name") && entry["name"].is_string() ? &entry["name"] : nullptr;
          add_failed(where + "#" + pointer, name ? name->get<std::string>() : "modules_" + std::to_string(i), located.what());
          continue;
        }
        add_module({where + "#" + pointer, std::move(m), ""});
      } else {
        throw ManifestError(where, pointer,
                            std::string("expected a manifest path, a glob or an inline manifest object, got ") +
                                entry.type_name());
      }
    }
  }
};

}  // namespace

ExpandedManifests expand_manifest_arguments(const std::vector<std::string>& arguments, bool keep_going) {
  Expander e;
  e.keep_going = keep_going;
  e.result.batch = arguments.size() > 1;
  const std::string cwd = util::current_directory();
  for (const auto& a : arguments) e.add_argument(a, cwd, "", "", 0);
  if (e.result.modules.empty())
    throw usage_error("the manifests given with -m list no module (a modules manifest that only lists itself?)");
  return std::move(e.result);
}

}  // namespace tvmffi_jit::compile
