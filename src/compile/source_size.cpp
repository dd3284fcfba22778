#include "compile/source_size.h"

#include <sys/stat.h>

#include <unordered_set>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// A header larger than this is counted by its size, not scanned further.
constexpr uint64_t kMaxScanBytes = 8ull << 20;

}  // namespace

std::vector<std::string> include_dirs_of(const std::vector<std::string>& flags) {
  std::vector<std::string> dirs;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    for (const char* opt : {"-isystem", "--system-include", "--include-path", "-I"}) {
      const std::string o = opt;
      if (f == o && i + 1 < flags.size()) {
        dirs.push_back(flags[++i]);
        break;
      }
      if (util::starts_with(f, o) && f.size() > o.size()) {
        std::string rest = f.substr(o.size());
        if (rest[0] == '=') rest = rest.substr(1);
        if (!rest.empty()) dirs.push_back(rest);
        break;
      }
    }
  }
  return dirs;
}

std::vector<std::pair<bool, std::string>> scan_includes(std::string_view text) {
  std::vector<std::pair<bool, std::string>> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] != '#') continue;
    ++i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (line.substr(i, 7) != "include") continue;
    i += 7;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || (line[i] != '"' && line[i] != '<')) continue;
    const char close = line[i] == '"' ? '"' : '>';
    const size_t stop = line.find(close, i + 1);
    if (stop == std::string_view::npos || stop == i + 1) continue;
    out.emplace_back(close == '"', std::string(line.substr(i + 1, stop - i - 1)));
  }
  return out;
}

const SourceSizer::File& SourceSizer::file(const std::string& path) {
  auto [it, inserted] = files_.try_emplace(path);
  if (!inserted) return it->second;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return it->second;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  it->second.bytes = size;
  it->second.ok = true;
  if (size <= kMaxScanBytes)
    if (auto text = util::try_read_file(path)) it->second.includes = scan_includes(*text);
  return it->second;
}

uint64_t SourceSizer::closure_bytes(const CompileStep& step) {
  const std::vector<std::string> dirs = include_dirs_of(step.flags);
  const std::string dirs_key = util::join(dirs, "\n");
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = 0;
  std::vector<std::pair<std::string, std::vector<std::pair<bool, std::string>>>> stack;  // (dir, includes)
  if (step.generated_text) {
    total += step.generated_text->size();
    stack.emplace_back("", scan_includes(*step.generated_text));
  } else {
    const File& f = file(step.input_path);
    if (!f.ok) return 0;
    total += f.bytes;
    stack.emplace_back(util::parent_path(step.input_path), f.includes);
  }
  std::unordered_set<std::string> seen;
  if (!step.generated_text) seen.insert(step.input_path);
  while (!stack.empty() && seen.size() < kMaxFiles) {
    auto [from, includes] = std::move(stack.back());
    stack.pop_back();
    for (const auto& [quoted, name] : includes) {
      const std::string key = dirs_key + '\0' + (quoted ? from : std::string()) + '\0' + name;
      auto r = resolved_.find(key);
      if (r == resolved_.end()) {
        std::string found;
        auto look = [&](const std::string& dir) {
          if (!found.empty() || dir.empty()) return;
          const std::string candidate = name[0] == '/' ? name : util::join_path(dir, name);
          struct stat st {};
          if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) found = candidate;
        };
        if (quoted) look(from);
        for (const auto& d : dirs) look(d);
        r = resolved_.emplace(key, found).first;
      }
      const std::string& path = r->second;
      if (path.empty() || !seen.insert(path).second) continue;
      const File& f = file(path);
      if (!f.ok) continue;
      total += f.bytes;
      if (!f.includes.empty()) stack.emplace_back(util::parent_path(path), f.includes);
    }
  }
  return total;
}

}  // namespace tvmffi_jit::compile
