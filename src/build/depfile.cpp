#include "tvmffi_jit/build/depfile.h"

#include <unordered_set>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::build {

namespace {

// Appends `items` not seen before, keeping the first occurrence's position.
void append_unique(std::vector<std::string>& out, std::unordered_set<std::string>& seen,
                   const std::vector<std::string>& items) {
  for (const auto& item : items) {
    if (!item.empty() && seen.insert(item).second) out.push_back(item);
  }
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

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

std::vector<DepfileRule> parse_depfile(std::string_view text, const std::string& origin) {
  std::vector<DepfileRule> rules;
  DepfileRule rule;
  bool after_colon = false;
  bool rule_has_tokens = false;
  std::string token;
  bool in_token = false;
  size_t line = 1;

  auto end_token = [&] {
    if (!in_token) return;
    (after_colon ? rule.prerequisites : rule.targets).push_back(token);
    token.clear();
    in_token = false;
    rule_has_tokens = true;
  };
  auto end_rule = [&] {
    end_token();
    if (rule_has_tokens && !after_colon) {
      throw io_error(origin + ":" + std::to_string(line) + ": not a depfile (expected 'target: prerequisites')");
    }
    if (rule_has_tokens) rules.push_back(std::move(rule));
    rule = DepfileRule{};
    after_colon = false;
    rule_has_tokens = false;
  };

  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '\\') {
      size_t run = 0;
      while (i + run < n && text[i + run] == '\\') ++run;
      const size_t next = i + run;
      const char after = next < n ? text[next] : '\0';
      if (after == '\n' || (after == '\r' && next + 1 < n && text[next + 1] == '\n')) {
        // Line continuation: the last backslash joins the lines; any others are literal.
        if (run > 1) {
          token.append(run - 1, '\\');
          in_token = true;
        }
        end_token();
        i = after == '\r' ? next + 1 : next;
        ++line;
        continue;
      }
      if (after == ' ' || after == '\t' || after == '#') {
        token.append(run / 2, '\\');
        in_token = true;
        if (run % 2 == 1) {
          token.push_back(after);  // escaped: part of the path
          i = next;
        } else {
          i = next - 1;  // the blank (or '#') is seen again by the loop and ends the token
        }
        continue;
      }
      token.append(run, '\\');
      in_token = true;
      i = next - 1;
      continue;
    }
    if (c == '$' && i + 1 < n && text[i + 1] == '$') {
      token.push_back('$');
      in_token = true;
      ++i;
      continue;
    }
    if (c == '\n' || c == '\r') {
      if (c == '\n') ++line;
      end_rule();
      continue;
    }
    if (is_blank(c)) {
      end_token();
      continue;
    }
    if (c == '#' && !in_token) {
      // A comment runs to the end of the line.
      while (i + 1 < n && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == ':' && !after_colon) {
      const char after = i + 1 < n ? text[i + 1] : '\n';
      if (is_blank(after) || after == '\n' || after == '\r') {
        end_token();
        after_colon = true;
        rule_has_tokens = true;
        continue;
      }
    }
    token.push_back(c);
    in_token = true;
  }
  end_rule();
  return rules;
}

std::vector<std::string> depfile_prerequisites(std::string_view text, const std::string& origin) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& rule : parse_depfile(text, origin)) append_unique(out, seen, rule.prerequisites);
  return out;
}

}  // namespace tvmffi_jit::build
