#include "compile/include_probes.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

namespace {

constexpr uint64_t kMaxScannedFileBytes = 16ull << 20;

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

}  // namespace

void add_has_include_probes(const std::string& file, const std::string& t, const std::vector<std::string>& search_dirs,
                            const std::string& build_dir, IncludeProbes& out) {
  static const char kWord[] = "__has_include";
  for (size_t at = t.find(kWord); at != std::string::npos; at = t.find(kWord, at + 1)) {
    if (at > 0 && is_ident(t[at - 1])) continue;
    size_t i = at + std::strlen(kWord);
    if (t.compare(i, 5, "_next") == 0) i += 5;
    if (i < t.size() && is_ident(t[i])) continue;  // another identifier
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
    if (i >= t.size() || t[i] != '(') continue;  // `#ifdef __has_include`, `defined(__has_include)`
    ++i;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
    const char open = i < t.size() ? t[i] : '\0';
    const char close = open == '<' ? '>' : open == '"' ? '"' : '\0';
    size_t end = close ? t.find(close, i + 1) : std::string::npos;
    if (!close || end == std::string::npos || t.find('\n', i) < end) {
      if (!out.unkeyable) {
        const size_t line = 1 + static_cast<size_t>(std::count(t.begin(), t.begin() + static_cast<long>(at), '\n'));
        out.unkeyable = "__has_include with an operand that is not a literal header name at " + file + ":" +
                        std::to_string(line) + " (what it probes cannot be keyed)";
      }
      continue;
    }
    add_candidates(t.substr(i + 1, end - i - 1), open == '"' ? util::parent_path(file) : std::string(), search_dirs,
                   build_dir, out);
  }
}

void add_candidates(const std::string& name, const std::string& own_dir, const std::vector<std::string>& search_dirs,
                    const std::string& build_dir, IncludeProbes& out) {
  auto add = [](std::vector<std::string>& v, const std::string& p) {
    if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
  };
  std::vector<std::string> dirs;
  if (!name.empty() && name[0] == '/') dirs.push_back("");
  else {
    if (!own_dir.empty()) dirs.push_back(own_dir);
    dirs.insert(dirs.end(), search_dirs.begin(), search_dirs.end());
  }
  for (const auto& d : dirs) {
    const std::string candidate = util::opened_path(d.empty() ? name : util::join_path(d, name));
    if (!build_dir.empty() && (candidate == build_dir || util::is_path_under(candidate, build_dir))) continue;
    if (exists(candidate)) {
      add(out.found, candidate);
      return;
    }
    add(out.absent, candidate);
  }
}

IncludeProbes has_include_probes(const std::vector<std::string>& files, const std::vector<std::string>& search_dirs,
                                 const std::vector<std::string>& skip_roots, const std::string& build_dir) {
  IncludeProbes out;
  for (const auto& file : files) {
    if (std::any_of(skip_roots.begin(), skip_roots.end(), [&](const std::string& r) { return util::is_path_under(file, r); }))
      continue;
    auto text = util::read_small_file(file, kMaxScannedFileBytes);
    if (!text) continue;  // hashed as a header already: a file that went away misses there
    add_has_include_probes(file, *text, search_dirs, build_dir, out);
  }
  return out;
}

}  // namespace tvmffi_jit::compile
