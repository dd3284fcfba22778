#include "tvmffi_jit/compile/depfile.h"

#include <unordered_set>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

namespace {

// Appends `items` not seen before, keeping the first occurrence's position.
void append_unique(std::vector<std::string>& out, std::unordered_set<std::string>& seen,
                   const std::vector<std::string>& items) {
  for (const auto& item : items) {
    if (!item.empty() && seen.insert(item).second) out.push_back(item);
  }
}

}  // namespace

std::string escape_depfile_path(std::string_view path) {
  std::string out;
  out.reserve(path.size() + 8);
  size_t backslashes = 0;  // the run of backslashes just copied
  for (char c : path) {
    if (c == '\n' || c == '\r') {
      throw usage_error("cannot write a depfile for a path containing a newline: " + std::string(path));
    }
    if (c == ' ' || c == '\t' || c == '#') {
      // gcc's rule: the backslashes before an escaped character are doubled,
      // so the reader can tell "a\ b" (one path) from "a\\ b" (two).
      out.append(backslashes, '\\');
      out.push_back('\\');
      out.push_back(c);
      backslashes = 0;
      continue;
    }
    if (c == '$') {
      out.append("$$");
    } else {
      out.push_back(c);
    }
    backslashes = c == '\\' ? backslashes + 1 : 0;
  }
  // The path is followed by a separator, so a trailing run is doubled too.
  out.append(backslashes, '\\');
  return out;
}

std::string format_depfile(const std::vector<std::string>& targets, const std::vector<std::string>& prerequisites) {
  if (targets.empty()) throw usage_error("a depfile needs at least one target");
  std::unordered_set<std::string> seen(targets.begin(), targets.end());
  std::vector<std::string> deps;
  append_unique(deps, seen, prerequisites);

  std::string text;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (i) text.push_back(' ');
    text.append(escape_depfile_path(targets[i]));
  }
  text.push_back(':');
  for (const auto& dep : deps) {
    text.append(" \\\n  ");
    text.append(escape_depfile_path(dep));
  }
  text.push_back('\n');
  for (const auto& dep : deps) {
    text.append(escape_depfile_path(dep));
    text.append(":\n");
  }
  return text;
}

void write_depfile(const std::string& path, const std::vector<std::string>& targets,
                   const std::vector<std::string>& prerequisites) {
  const std::string text = format_depfile(targets, prerequisites);
  const std::string dir = util::parent_path(util::absolute_path(path));
  if (!dir.empty()) util::make_directories(dir);
  util::write_file_atomic(path, text);
}

std::vector<std::string> build_inputs(const Manifest& manifest, const BuildResult& result,
                                      const std::vector<std::string>& recorded_headers) {
  std::vector<std::string> inputs;
  std::unordered_set<std::string> seen;
  const std::string generated_prefix = result.build_dir.empty() ? "" : result.build_dir + "/";
  auto add = [&](const std::string& path) {
    if (path.empty()) return;
    if (!generated_prefix.empty() && path.compare(0, generated_prefix.size(), generated_prefix) == 0) return;
    if (seen.insert(path).second) inputs.push_back(path);
  };
  add(manifest.manifest_path);
  for (const auto& source : manifest.sources) add(source);
  for (const auto& embed : manifest.embed_cubin) add(embed.path);
  for (const auto* units : {&result.device_units, &result.units}) {
    for (const auto& unit : *units) {
      for (const auto& dep : unit.dependencies) add(dep);
    }
  }
  if (result.link_dependencies)
    for (const auto& dep : *result.link_dependencies) add(dep);
  for (const auto& header : recorded_headers) add(header);
  return inputs;
}

std::vector<std::string> parse_depfile(std::string_view text) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  std::string word;
  bool in_prereqs = false;  // after the first unescaped ':' of a rule
  auto flush = [&] {
    if (word.empty()) return;
    if (in_prereqs) {
      if (seen.insert(word).second) out.push_back(word);
    } else if (word.back() == ':') {
      in_prereqs = true;  // "target:" glued to its colon
    }
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      char n = text[i + 1];
      if (n == '\n') { flush(); ++i; continue; }
      if (n == '\r' && i + 2 < text.size() && text[i + 2] == '\n') { flush(); i += 2; continue; }
      if (n == ' ' || n == '#' || n == '\\') { word += n; ++i; continue; }
      word += c;
      continue;
    }
    if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') { word += '$'; ++i; continue; }
    if (c == '\n' || c == '\r') {
      flush();
      in_prereqs = false;  // a new rule starts on the next line
      continue;
    }
    if (c == ' ' || c == '\t') { flush(); continue; }
    if (c == ':' && !in_prereqs) {
      // "target: dep" — the colon ends the target list. A colon followed by a
      // non-space is part of a path (none on Linux is common, but keep it).
      if (i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\t' || text[i + 1] == '\n' ||
          text[i + 1] == '\r' || text[i + 1] == '\\') {
        word.clear();
        in_prereqs = true;
        continue;
      }
    }
    word += c;
  }
  flush();
  return out;
}

}  // namespace tvmffi_jit::compile
