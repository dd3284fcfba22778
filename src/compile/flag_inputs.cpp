#include "compile/flag_inputs.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

constexpr uint64_t kMaxResponseFileBytes = 1ull << 20;
constexpr int kMaxResponseDepth = 16;
constexpr size_t kMaxTreeFiles = 4096;
constexpr uint64_t kMaxTreeBytes = 1ull << 30;

// libiberty's buildargv, which gcc, clang and nvcc's host compilers use:
// whitespace separates words; '...' and "..." quote; a backslash escapes
// the next character.
std::vector<std::string> response_words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      word.push_back(text[++i]);
      in_word = true;
    } else if (quote) {
      if (c == quote) quote = 0;
      else word.push_back(c);
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      if (in_word) out.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(word));
  return out;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

class Reader {
 public:
  explicit Reader(const std::vector<std::string>& include_dirs) : include_dirs_(include_dirs) {}
  FlagReads result;

  void words(const std::vector<std::string>& flags, int depth) {
    for (size_t i = 0; i < flags.size(); ++i) {
      const std::string& f = flags[i];
      auto value = [&](const std::string& name) -> std::optional<std::string> {
        if (f == name && i + 1 < flags.size()) return flags[++i];
        if (util::starts_with(f, name + "=")) return f.substr(name.size() + 1);
        return std::nullopt;
      };
      if (f.size() > 1 && f[0] == '@') {
        response_file(f.substr(1), depth);
      } else if (auto specs = value("-specs")) {
        named_file("specs", *specs);
      } else if (auto specs2 = value("--specs")) {
        named_file("specs", *specs2);
      } else if (util::starts_with(f, "-fplugin=")) {
        named_file("plugin", f.substr(9));
      } else if (f == "-B" && i + 1 < flags.size()) {
        prefix_dir(flags[++i]);
      } else if (f.size() > 2 && util::starts_with(f, "-B")) {
        prefix_dir(f.substr(2));
      } else if ((f == "-include" || f == "--pre-include") && i + 1 < flags.size()) {
        precompiled(flags[++i]);
      } else if (util::starts_with(f, "--pre-include=")) {
        precompiled(f.substr(14));
      }
    }
  }

 private:
  // The path first: the key writes it relative to the base dir when it is
  // under it (portable_arg, compile/portable_args.h), so a response file in the checkout does
  // not tie the portable key to one checkout's path.
  void key(const std::string& what, const std::string& path, const std::string& digest) {
    result.keyed.push_back({"flag_input." + what, path + " " + digest});
  }
  void unkeyable(const std::string& why) {
    if (!result.unkeyable) result.unkeyable = why;
  }
  std::string file_digest(const std::string& path) { return "sha256:" + util::sha256_file_hex(path); }

  void response_file(const std::string& name, int depth) {
    const std::string path = util::absolute_path(name);
    if (depth >= kMaxResponseDepth) return unkeyable("@" + name + ": response files nested more than 16 deep");
    // gcc passes an @FILE it cannot open on as a word: keyed as a probe.
    if (!util::is_regular_file(path)) return key("response", path, "absent");
    auto text = util::read_small_file(path, kMaxResponseFileBytes);
    if (!text) return unkeyable("@" + name + ": " + text.why());
    key("response", path, "sha256:" + util::sha256_hex(*text));
    words(response_words(*text), depth + 1);
  }

  void named_file(const std::string& what, const std::string& name) {
    const std::string path = util::absolute_path(name);
    if (util::is_regular_file(path)) return key(what, path, file_digest(path));
    if (name.find('/') == std::string::npos)
      return unkeyable(what + " file '" + name + "' is looked up in the compiler's own directories, which the key "
                       "does not cover; give its path");
    key(what, path, "absent");
  }

  void prefix_dir(const std::string& name) {
    const std::string path = util::absolute_path(name);
    if (!exists(path)) return key("prefix", path, "absent");
    if (!util::is_directory(path))
      return unkeyable("-B" + name + " is a file-name prefix, not a directory: what the driver finds through it "
                       "cannot be keyed");
    auto digest = tree_digest(path);
    if (!digest) return unkeyable("-B" + name + ": " + digest.why());
    key("prefix", path, *digest);
  }

  // -include H: gcc uses H.gch instead of H when it is valid, looking for H
  // first in its working directory, then along the include chain. Each
  // candidate's content, or its absence, is keyed.
  void precompiled(const std::string& header) {
    std::vector<std::string> dirs;
    if (!header.empty() && header[0] == '/') dirs.push_back("");
    else {
      dirs.push_back(util::current_directory());
      for (const auto& d : include_dirs_) dirs.push_back(d);
    }
    for (const auto& d : dirs) {
      const std::string gch = (d.empty() ? header : util::join_path(d, header)) + ".gch";
      if (util::is_regular_file(gch)) key("pch", gch, file_digest(gch));
      else if (util::is_directory(gch)) {
        auto digest = tree_digest(gch);
        if (!digest) return unkeyable("-include " + header + ": " + digest.why());
        key("pch", gch, *digest);
      } else {
        key("pch", gch, "absent");
      }
    }
  }

  // Every regular file and symlink under `dir` (names sorted), by content.
  Expected<std::string> tree_digest(const std::string& dir) {
    util::KeyHasher h;
    size_t files = 0;
    uint64_t bytes = 0;
    std::vector<std::string> pending = {""};
    while (!pending.empty()) {
      const std::string rel = pending.back();
      pending.pop_back();
      const std::string abs = rel.empty() ? dir : util::join_path(dir, rel);
      DIR* d = ::opendir(abs.c_str());
      if (!d) return Unexpected{"cannot list " + abs};
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      for (const auto& n : names) {
        const std::string r = rel.empty() ? n : rel + "/" + n;
        const std::string p = util::join_path(dir, r);
        struct stat st;
        if (::stat(p.c_str(), &st) != 0) continue;  // a dangling symlink: nothing to read
        if (S_ISDIR(st.st_mode)) {
          h.field("dir", r);
          pending.push_back(r);
        } else if (S_ISREG(st.st_mode)) {
          if (++files > kMaxTreeFiles || (bytes += static_cast<uint64_t>(st.st_size)) > kMaxTreeBytes)
            return Unexpected{dir + " holds more than " + std::to_string(kMaxTreeFiles) + " files or 1 GiB"};
          h.field("file", r);
          h.field("sha256", util::sha256_file_hex(p));
        }
      }
    }
    return std::string("tree:" + h.hex_digest());
  }

  const std::vector<std::string>& include_dirs_;
};

}  // namespace

FlagReads flag_reads(const std::vector<std::string>& flags, const std::vector<std::string>& include_dirs) {
  Reader r(include_dirs);
  r.words(flags, 0);
  return std::move(r.result);
}

}  // namespace tvmffi_jit::compile
