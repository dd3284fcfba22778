#include "tvmffi_jit/cache/headers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <unordered_set>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_under(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  std::string d = dir.back() == '/' ? dir : dir + "/";
  return util::starts_with(path, d);
}

int64_t ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

std::string stat_text(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(ns(st.st_mtim)) + ":" +
         std::to_string(ns(st.st_ctim));
}

// The stat worth recording for a file: empty when it changed too recently to
// rule out a same-tick write after the hash.
std::string trusted_stat(const struct stat& st) {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t newest = std::max(ns(st.st_mtim), ns(st.st_ctim));
  if (ns(now) - newest < kTrustedStatAgeSeconds * 1000000000LL) return "";
  return stat_text(st);
}

// Hashes one file through a single open (size and stat from the same fstat),
// so they and the hash describe the same file even if it is replaced meanwhile.
bool hash_one(const std::string& path, uint64_t* size, std::string* hex, std::string* stat = nullptr) {
  int fd;
  try {
    fd = util::open_for_reading(path);  // a header replaced by a FIFO must not block the lookup
  } catch (const Error&) {
    return false;
  }
  if (stat) {
    struct stat st;
    *stat = ::fstat(fd, &st) == 0 ? trusted_stat(st) : "";
  }
  util::Sha256 sha;
  char buf[1 << 16];
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    sha.update(buf, static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  *size = total;
  *hex = sha.hex_digest();
  return true;
}

}  // namespace

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

std::vector<HeaderRecord> hash_headers(const std::vector<std::string>& paths, const std::string& base_dir,
                                       const std::vector<std::string>& exclude_dirs,
                                       const std::vector<std::string>& exclude_files) {
  std::vector<HeaderRecord> out;
  std::unordered_set<std::string> seen;
  std::unordered_set<std::string> excluded_files;
  for (const auto& f : exclude_files) excluded_files.insert(util::absolute_path(f));
  for (const auto& p : paths) {
    std::string abs = p.empty() || p[0] != '/' ? util::absolute_path(util::join_path(base_dir, p)) : util::absolute_path(p);
    if (excluded_files.count(abs) || !seen.insert(abs).second) continue;
    bool skip = false;
    for (const auto& d : exclude_dirs) skip = skip || is_under(abs, d);
    if (skip) continue;
    HeaderRecord r;
    r.path = abs;
    if (!hash_one(abs, &r.size, &r.sha256, &r.stat))
      throw io_error("cannot read " + abs + ", which the compiler reported reading (was it removed during the build?)");
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> check_headers(const std::vector<HeaderRecord>& headers) {
  for (const auto& h : headers) {
    struct stat st;
    if (::stat(h.path.c_str(), &st) != 0) return h.path + " is gone";
    // Never open a FIFO or device: entries may come from a remote store.
    if (!S_ISREG(st.st_mode)) return h.path + " is not a regular file";
    // A size difference is decisive on its own; equal sizes still re-hash.
    if (static_cast<uint64_t>(st.st_size) != h.size) return h.path + " changed (size)";
    if (!h.stat.empty() && h.stat == stat_text(st)) continue;  // the very file that was hashed
    uint64_t size = 0;
    std::string hex;
    if (!hash_one(h.path, &size, &hex)) return h.path + " cannot be read";
    if (size != h.size || hex != h.sha256) return h.path + " changed";
  }
  return std::nullopt;
}

namespace {
constexpr uint64_t kMaxDigestMemoBytes = 8u << 20;
constexpr size_t kMaxDigestMemoRecords = 20000;  // ~55 toolkits' worth of headers
}  // namespace

// One line per header: "<sha256> <size> <stat> <path>" (the path last: it may
// hold spaces; one with a newline is not memoised).
void HeaderDigestMemo::load() {
  loaded_ = true;
  auto text = util::read_small_file(path_, kMaxDigestMemoBytes);
  if (!text) return;
  for (const auto& line : util::split_any(*text, "\n")) {
    size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1),
           c = b == std::string::npos ? b : line.find(' ', b + 1);
    if (c == std::string::npos || a != 64 || c + 1 >= line.size() || line[c + 1] != '/') continue;
    HeaderRecord r;
    r.sha256 = line.substr(0, a);
    r.size = std::strtoull(line.c_str() + a + 1, nullptr, 10);
    r.stat = line.substr(b + 1, c - b - 1);
    r.path = line.substr(c + 1);
    records_.push_back(std::move(r));
  }
  std::sort(records_.begin(), records_.end(), [](const auto& x, const auto& y) { return x.path < y.path; });
}

const HeaderRecord* HeaderDigestMemo::find(const std::string& path) {
  if (!loaded_) load();
  auto it = std::lower_bound(records_.begin(), records_.end(), path,
                             [](const HeaderRecord& r, const std::string& p) { return r.path < p; });
  return it != records_.end() && it->path == path ? &*it : nullptr;
}

void HeaderDigestMemo::remember(const std::vector<HeaderRecord>& headers) {
  if (!loaded_) load();
  bool changed = false;
  for (const auto& h : headers) {
    if (h.stat.empty() || h.path.find('\n') != std::string::npos) continue;
    auto it = std::lower_bound(records_.begin(), records_.end(), h.path,
                               [](const HeaderRecord& r, const std::string& p) { return r.path < p; });
    if (it != records_.end() && it->path == h.path) {
      if (it->stat == h.stat && it->sha256 == h.sha256 && it->size == h.size) continue;
      *it = h;
    } else {
      records_.insert(it, h);
    }
    changed = true;
  }
  if (!changed) return;
  if (records_.size() > kMaxDigestMemoRecords) {  // start over from these headers rather than grow without end
    records_.clear();
    for (const auto& h : headers)
      if (!h.stat.empty() && h.path.find('\n') == std::string::npos) records_.push_back(h);
    std::sort(records_.begin(), records_.end(), [](const auto& x, const auto& y) { return x.path < y.path; });
  }
  std::string text;
  for (const auto& r : records_)
    text += r.sha256 + " " + std::to_string(r.size) + " " + r.stat + " " + r.path + "\n";
  try {
    util::make_directories(util::parent_path(path_), 0700);
    util::write_file_atomic(path_, text, 0600);
  } catch (const Error&) {
    // A memo: the next adoption hashes again.
  }
}

std::optional<std::string> verify_headers_recording_stats(std::vector<HeaderRecord>& headers, HeaderDigestMemo* memo) {
  for (auto& h : headers) {
    h.stat.clear();
    struct stat st;
    if (::stat(h.path.c_str(), &st) != 0) return h.path + " is gone";
    if (!S_ISREG(st.st_mode)) return h.path + " is not a regular file";
    if (static_cast<uint64_t>(st.st_size) != h.size) return h.path + " changed (size)";
    if (memo) {
      const HeaderRecord* known = memo->find(h.path);
      if (known && !known->stat.empty() && known->stat == stat_text(st) && known->size == h.size &&
          known->sha256 == h.sha256) {
        h.stat = known->stat;  // the very file that was hashed (and trusted) here
        continue;
      }
    }
    uint64_t size = 0;
    std::string hex, hashed_stat;
    if (!hash_one(h.path, &size, &hex, &hashed_stat)) return h.path + " cannot be read";
    if (size != h.size || hex != h.sha256) return h.path + " changed";
    h.stat = std::move(hashed_stat);
  }
  return std::nullopt;
}

void merge_headers(std::vector<HeaderRecord>& into, const std::vector<HeaderRecord>& more) {
  std::unordered_set<std::string> seen;
  for (const auto& h : into) seen.insert(h.path);
  for (const auto& h : more)
    if (seen.insert(h.path).second) into.push_back(h);
}

}  // namespace tvmffi_jit::cache
