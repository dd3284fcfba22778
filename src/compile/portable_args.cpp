#include "compile/portable_args.h"

#include <cctype>

#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

using cache::BaseDir;

std::string portable_arg(const BaseDir& base, const std::string& arg) {
  if (base.empty() || arg.empty()) return arg;
  if (arg[0] == '/') return base.portable_path(arg);
  if (arg[0] != '-') return arg;
  // "-I/base/x", "-isystem/base/x", "--include-path=/base/x": letters (and
  // dashes) of an option name, an optional '=', then the path.
  size_t i = 1;
  while (i < arg.size() && (std::isalpha(static_cast<unsigned char>(arg[i])) || arg[i] == '-' || arg[i] == '_')) ++i;
  if (i < arg.size() && arg[i] == '=' && util::starts_with(arg, "--")) ++i;
  if (i >= arg.size() || arg[i] != '/') return arg;
  return arg.substr(0, i) + base.portable_path(arg.substr(i));
}

std::string portable_text(const BaseDir& base, const std::string& text) {
  if (base.empty()) return text;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t end = eol == std::string::npos ? text.size() : eol + 1;
    std::string line = text.substr(pos, end - pos);
    const std::string directive = "#include \"";
    if (util::starts_with(line, directive) && line.size() > directive.size() && line[directive.size()] == '/') {
      size_t close = line.find('"', directive.size());
      if (close != std::string::npos) {
        std::string path = line.substr(directive.size(), close - directive.size());
        line = directive + base.portable_path(path) + line.substr(close);
      }
    }
    out += line;
    pos = end;
  }
  return out;
}

std::string portable_label(const BaseDir& base, const std::string& label) {
  std::string out = label;
  for (const std::string* prefix : {&base.path(), &base.canonical()}) {
    if (prefix->empty()) continue;
    size_t pos = 0;
    while ((pos = out.find(*prefix, pos)) != std::string::npos) {
      size_t end = pos + prefix->size();
      if (end == out.size() || out[end] == '/' || out[end] == ' ') {
        out.replace(pos, prefix->size(), cache::kBaseMarker);
        pos += std::char_traits<char>::length(cache::kBaseMarker);
      } else {
        pos = end;
      }
    }
  }
  return out;
}

}  // namespace tvmffi_jit::compile
