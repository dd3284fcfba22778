#include "tvmffi_jit/compile/nvrtc_includes.h"

#include <optional>
#include <set>
#include <string_view>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// Source text with line splices joined and comments replaced by a space,
// line structure kept (a removed splice or a comment's newlines are
// re-emitted after the logical line), so reported line numbers stay right.
// String and character literals are copied verbatim so that "/*" inside one
// is not a comment.
std::string strip_comments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pending_newlines = 0;  // physical newlines swallowed inside the current logical line
  auto newline = [&] {
    out += '\n';
    out.append(pending_newlines, '\n');
    pending_newlines = 0;
  };
  size_t i = 0;
  const size_t n = text.size();
  auto splice_at = [&](size_t k) { return text[k] == '\\' && k + 1 < n && text[k + 1] == '\n'; };
  while (i < n) {
    if (splice_at(i)) {
      ++pending_newlines;
      i += 2;
      continue;
    }
    char c = text[i];
    if (c == '\n') {
      newline();
      ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      // To the end of the logical line (a spliced // comment continues).
      while (i < n && text[i] != '\n') {
        if (splice_at(i)) {
          ++pending_newlines;
          ++i;
        }
        ++i;
      }
      out += ' ';
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      i += 2;
      while (i < n && !(text[i] == '*' && i + 1 < n && text[i + 1] == '/')) {
        if (text[i] == '\n') ++pending_newlines;
        ++i;
      }
      i = i < n ? i + 2 : n;
      out += ' ';
    } else if (c == '"' || c == '\'') {
      out += c;
      ++i;
      while (i < n && text[i] != c && text[i] != '\n') {
        if (splice_at(i)) {
          ++pending_newlines;
          i += 2;
        } else if (text[i] == '\\' && i + 1 < n) {
          out += text[i];
          out += text[i + 1];
          i += 2;
        } else {
          out += text[i++];
        }
      }
      if (i < n && text[i] == c) out += text[i++];
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct Directive {
  enum class Kind { kQuote, kAngle, kComputed } kind;
  std::string name;
  bool next = false;  // #include_next
  size_t line = 0;
};

// The #include directives of comment-free text.
std::vector<Directive> include_directives(const std::string& text) {
  std::vector<Directive> found;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    std::string_view s = util::trim(line);
    if (s.empty() || s[0] != '#') {
      if (end == text.size()) break;
      continue;
    }
    s = util::trim(s.substr(1));
    Directive d;
    d.line = line_no;
    if (util::starts_with(s, "include_next")) {
      d.next = true;
      s = s.substr(12);
    } else if (util::starts_with(s, "include")) {
      s = s.substr(7);
    } else {
      if (end == text.size()) break;
      continue;
    }
    // "#includefoo" is not an include directive; "#include<x>" and "#include\"x\"" are.
    if (!s.empty() && s[0] != ' ' && s[0] != '\t' && s[0] != '"' && s[0] != '<') {
      if (end == text.size()) break;
      continue;
    }
    s = util::trim(s);
    char open = s.empty() ? 0 : s[0];
    char close = open == '"' ? '"' : open == '<' ? '>' : 0;
    size_t close_at = close ? s.find(close, 1) : std::string_view::npos;
    if (close && close_at != std::string_view::npos && close_at > 1) {
      d.kind = open == '"' ? Directive::Kind::kQuote : Directive::Kind::kAngle;
      d.name = std::string(s.substr(1, close_at - 1));
    } else {
      d.kind = Directive::Kind::kComputed;
    }
    found.push_back(std::move(d));
    if (end == text.size()) break;
  }
  return found;
}

bool under(const std::string& path, const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    if (path.size() > d.size() && util::starts_with(path, d) && path[d.size()] == '/') return true;
  }
  return false;
}

class Scanner {
 public:
  Scanner(const std::vector<std::string>& include_dirs, const std::vector<std::string>& system_dirs) {
    for (const auto& d : include_dirs) {
      if (!d.empty()) include_dirs_.push_back(util::opened_path(d));
    }
    for (const auto& d : system_dirs) {
      if (d.empty()) continue;
      system_dirs_.push_back(util::opened_path(d));
      if (util::is_directory(d)) system_canonical_.push_back(util::canonical_path(d));
    }
  }

  void scan(const std::string& text, const std::string& path) {
    std::string dir = util::parent_path(util::opened_path(path));
    for (const Directive& d : include_directives(strip_comments(text))) {
      std::string where = path + ":" + std::to_string(d.line);
      if (d.kind == Directive::Kind::kComputed) {
        result_.computed.push_back(where);
        continue;
      }
      std::optional<std::string> found = resolve(d, dir);
      if (!found) {
        result_.unresolved.push_back(where + ": " + d.name);
        continue;
      }
      if (found->empty()) continue;  // a toolkit header
      if (!seen_.insert(*found).second) continue;
      result_.files.push_back(*found);
      std::optional<std::string> header = util::try_read_file(*found);
      if (!header) throw io_error("cannot read " + *found + " (included from " + where + ")");
      scan(*header, *found);
    }
  }

  IncludeScan take() {
    result_.include_dirs = include_dirs_;
    return std::move(result_);
  }

 private:
  // The header's absolute path, "" for one in a system dir, nullopt if none.
  std::optional<std::string> resolve(const Directive& d, const std::string& including_dir) const {
    std::vector<const std::string*> order;
    if (d.kind == Directive::Kind::kQuote) order.push_back(&including_dir);
    for (const auto& dir : include_dirs_) order.push_back(&dir);
    for (const auto& dir : system_dirs_) order.push_back(&dir);
    // #include_next: the search resumes after the directory that held the
    // including file; following both is a superset, so start from the top.
    for (const std::string* dir : order) {
      std::string candidate = util::opened_path(util::join_path(*dir, d.name));
      if (!util::is_regular_file(candidate)) continue;
      if (under(candidate, system_dirs_)) return std::string();
      std::string canonical = util::canonical_path(candidate);
      if (under(canonical, system_canonical_)) return std::string();
      return candidate;
    }
    return std::nullopt;
  }

  std::vector<std::string> include_dirs_;
  std::vector<std::string> system_dirs_;
  std::vector<std::string> system_canonical_;
  std::set<std::string> seen_;
  IncludeScan result_;
};

}  // namespace

IncludeScan scan_includes(const std::string& source, const std::string& source_path,
                          const std::vector<std::string>& include_dirs, const std::vector<std::string>& system_dirs) {
  Scanner scanner(include_dirs, system_dirs);
  scanner.scan(source, source_path);
  return scanner.take();
}

IncludeScan nvrtc_includes(const NvrtcRequest& request) {
  std::vector<std::string> include_dirs = request.include_paths;
  std::vector<std::string> pre_includes;
  const auto& opts = request.options;
  for (size_t i = 0; i < opts.size(); ++i) {
    const std::string& o = opts[i];
    auto value_of = [&](std::string_view spelled) -> std::optional<std::string> {
      if (o == spelled && i + 1 < opts.size()) return opts[++i];
      std::string with_eq = std::string(spelled) + "=";
      if (util::starts_with(o, with_eq)) return o.substr(with_eq.size());
      return std::nullopt;
    };
    if (util::starts_with(o, "-I") && o.size() > 2) {
      include_dirs.push_back(o.substr(2));
    } else if (auto v = value_of("-I")) {
      include_dirs.push_back(*v);
    } else if (auto v = value_of("--include-path")) {
      include_dirs.push_back(*v);
    } else if (auto v = value_of("--pre-include")) {
      pre_includes.push_back(*v);
    } else if (auto v = value_of("-include")) {
      pre_includes.push_back(*v);
    }
  }
  // A pre-included header is read as if the source began with #include "it".
  std::string prologue;
  for (const auto& h : pre_includes) prologue += "#include \"" + h + "\"\n";
  std::string source_name = request.source_name.empty() ? "source.cu" : request.source_name;
  IncludeScan scan = scan_includes(prologue + request.source, source_name, include_dirs, nvrtc_toolkit_include_dirs());
  if (!prologue.empty()) {
    // Line numbers in messages refer to the text with the prologue; say so.
    for (auto& u : scan.unresolved) u += " (with " + std::to_string(pre_includes.size()) + " pre-include lines)";
  }
  return scan;
}

}  // namespace tvmffi_jit::compile
