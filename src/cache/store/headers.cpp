#include "tvmffi_jit/cache/headers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <unordered_map>
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
    auto n = util::read_some(fd, buf, sizeof buf);
    if (!n) {
      ::close(fd);
      return false;
    }
    if (*n == 0) break;
    sha.update(buf, *n);
    total += *n;
  }
  ::close(fd);
  *size = total;
  *hex = sha.hex_digest();
  return true;
}

std::string memo_path(const DigestMemo& memo, const std::string& path) {
  return util::join_path(memo.dir, util::sha256_hex(path).substr(0, 32));
}

// The remembered digest of `path` when its stat is still `stat` (and was
// trusted when remembered); empty otherwise. Format: path, stat, size,
// sha256, one per line; the path line guards against a name collision.
std::string memo_digest(const DigestMemo& memo, const std::string& path, const std::string& stat, uint64_t size) {
  if (memo.dir.empty() || size < kMemoMinBytes) return "";
  auto text = util::read_small_file(memo_path(memo, path), 4096);
  if (!text) return "";
  std::vector<std::string> lines = util::split_lines(*text);
  if (lines.size() != 4 || lines[0] != path || lines[1] != stat || lines[2] != std::to_string(size)) return "";
  return lines[3];
}

void remember_digest(const DigestMemo& memo, const std::string& path, const std::string& trusted,
                     uint64_t size, const std::string& sha256) {
  if (!memo.writable || memo.dir.empty() || trusted.empty() || size < kMemoMinBytes) return;
  try {
    util::make_directories(memo.dir, 0700);
    util::write_file_atomic(memo_path(memo, path), path + "\n" + trusted + "\n" + std::to_string(size) + "\n" + sha256 + "\n",
                            0600);
  } catch (const Error&) {
    // A memo is an optimisation: a full disk or a read-only root costs a re-hash later.
  }
}

}  // namespace

std::vector<HeaderRecord> hash_headers(const std::vector<std::string>& paths, const std::string& base_dir,
                                       const std::vector<std::string>& exclude_dirs,
                                       const std::vector<std::string>& exclude_files, const DigestMemo& memo) {
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
    remember_digest(memo, abs, r.stat, r.size, r.sha256);
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// One record: nullopt when it still holds. `stamp`: the stat of a file
// re-hashed and found equal, when old enough to trust (else unchanged).
std::optional<std::string> check_one(const HeaderRecord& h, std::string* stamp, const DigestMemo& memo) {
  for (const auto& s : h.shadows) {
    // Any kind of file: the compiler would have tried to open it first.
    struct stat st;
    if (::lstat(s.c_str(), &st) == 0) return s + " now shadows " + h.path;
  }
  struct stat st;
  if (::stat(h.path.c_str(), &st) != 0) return h.path + " is gone";
  // Never open a FIFO or device: entries may come from a remote store.
  if (!S_ISREG(st.st_mode)) return h.path + " is not a regular file";
  // A size difference is decisive on its own; equal sizes still re-hash.
  if (static_cast<uint64_t>(st.st_size) != h.size) return h.path + " changed (size)";
  const std::string now = stat_text(st);
  if (!h.stat.empty() && h.stat == now) return std::nullopt;  // the very file that was hashed
  if (std::string known = memo_digest(memo, h.path, now, h.size); !known.empty()) {
    if (known != h.sha256) return h.path + " changed";
    if (stamp) *stamp = now;  // trusted when remembered, unchanged since
    return std::nullopt;
  }
  uint64_t size = 0;
  std::string hex, hashed_stat;
  if (!hash_one(h.path, &size, &hex, &hashed_stat)) return h.path + " cannot be read";
  if (size != h.size || hex != h.sha256) return h.path + " changed";
  remember_digest(memo, h.path, hashed_stat, size, hex);
  if (stamp && !hashed_stat.empty()) *stamp = hashed_stat;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_and_stamp_headers(std::vector<HeaderRecord>& headers, const DigestMemo& memo) {
  for (auto& h : headers)
    if (auto why = check_one(h, &h.stat, memo)) return why;
  return std::nullopt;
}

std::optional<std::string> check_headers(const std::vector<HeaderRecord>& headers, const DigestMemo& memo) {
  for (const auto& h : headers)
    if (auto why = check_one(h, nullptr, memo)) return why;
  return std::nullopt;
}

void merge_headers(std::vector<HeaderRecord>& into, const std::vector<HeaderRecord>& more) {
  std::unordered_map<std::string, size_t> at;
  for (size_t i = 0; i < into.size(); ++i) at.emplace(into[i].path, i);
  for (const auto& h : more) {
    auto [it, added] = at.emplace(h.path, into.size());
    if (added) {
      into.push_back(h);
      continue;
    }
    std::vector<std::string>& shadows = into[it->second].shadows;
    for (const auto& s : h.shadows)
      if (std::find(shadows.begin(), shadows.end(), s) == shadows.end()) shadows.push_back(s);
  }
}

}  // namespace tvmffi_jit::cache
