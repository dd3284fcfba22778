#include "tvmffi_jit/cache/headers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <unordered_map>
#include <unordered_set>

#include "tvmffi_jit/cache/proof.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/parallel.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_under(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  std::string d = dir.back() == '/' ? dir : dir + "/";
  return util::starts_with(path, d);
}

}  // namespace

std::vector<HeaderRecord> hash_headers(const std::vector<std::string>& paths, const std::string& base_dir,
                                       const std::vector<std::string>& exclude_dirs,
                                       const std::vector<std::string>& exclude_files, const DigestMemo& memo) {
  std::vector<HeaderRecord> out;
  std::unordered_set<std::string> seen;
  std::unordered_set<std::string> excluded_files;
  for (const auto& f : exclude_files) excluded_files.insert(util::opened_path(f));
  for (const auto& p : paths) {
    // The file the compiler opened: "/p/link/../h.h" is not /p/h.h (util::opened_path).
    std::string abs = util::opened_path(p.empty() || p[0] != '/' ? util::join_path(base_dir, p) : p);
    if (excluded_files.count(abs) || !seen.insert(abs).second) continue;
    bool skip = false;
    for (const auto& d : exclude_dirs) skip = skip || is_under(abs, d);
    if (skip) continue;
    Expected<HashedFile> hashed = hash_file_stamped(abs, true);
    if (!hashed)
      throw io_error("cannot read " + abs + ", which the compiler reported reading (was it removed during the build?)");
    HeaderRecord r;
    r.path = abs;
    r.size = hashed->size;
    r.sha256 = std::move(hashed->sha256);
    r.stat = std::move(hashed->stat);
    remember_digest(memo, abs, r.stat, r.size, r.sha256);
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// One record: a value when it still holds, else what changed. A file
// re-hashed and found equal gets its new settled stamp in `h.stat` when
// `restamp` (counted in `rehashed`).
Expected<void> check_one(HeaderRecord& h, bool restamp, const DigestMemo& memo, Rehashed* rehashed) {
  for (const auto& s : h.shadows) {
    // Any kind of file: the compiler would have tried to open it first.
    struct stat st;
    if (::lstat(s.c_str(), &st) == 0) return Unexpected{s + " now shadows " + h.path};
  }
  FileCheckOptions how;
  how.memo = memo;
  Rehashed counted;
  FileCheck c = check_recorded_file(h.path, h.size, h.sha256, h.stat, how, &counted);
  if (!restamp) counted.restamped = 0;
  if (rehashed) rehashed->add(counted);
  switch (c.problem) {
    case FileProblem::kNone: break;
    case FileProblem::kMissing: return Unexpected{h.path + " is gone"};
    case FileProblem::kNotRegular: return Unexpected{h.path + " is not a regular file"};
    case FileProblem::kSize: return Unexpected{h.path + " changed (size)"};
    case FileProblem::kContent: return Unexpected{h.path + " changed"};
    case FileProblem::kUnreadable: return Unexpected{h.path + " cannot be read"};
  }
  if (restamp && !c.new_stat.empty()) h.stat = c.new_stat;
  return {};
}

}  // namespace

Expected<void> check_and_stamp_headers(std::vector<HeaderRecord>& headers, const DigestMemo& memo, Rehashed* rehashed,
                                       int workers) {
  if (workers <= 1 || headers.size() < 2 * static_cast<size_t>(workers)) {
    for (auto& h : headers)
      if (auto held = check_one(h, true, memo, rehashed); !held) return held;
    return {};
  }
  // Slices of consecutive records, one per job: each its own counts and its
  // first mismatch, read back in order.
  const size_t slices = static_cast<size_t>(workers) * 4;
  const size_t per = (headers.size() + slices - 1) / slices;
  std::vector<Expected<void>> held(slices);
  std::vector<Rehashed> counted(slices);
  std::atomic<bool> failed{false};
  util::parallel_for(slices, workers, [&](size_t i) {
    util::OneMountTablePoll one_poll;  // per slice: its own thread's
    for (size_t k = i * per; k < std::min(headers.size(), (i + 1) * per) && !failed.load(); ++k)
      if (!(held[i] = check_one(headers[k], true, memo, &counted[i]))) {
        failed = true;
        return;
      }
  });
  for (size_t i = 0; i < slices; ++i) {
    if (rehashed) rehashed->add(counted[i]);
    if (!held[i]) return held[i];
  }
  // A slice stopped by another's mismatch reports nothing; the mismatch is above.
  return {};
}

Expected<void> check_headers(const std::vector<HeaderRecord>& headers, const DigestMemo& memo, Rehashed* rehashed) {
  for (const auto& h : headers) {
    HeaderRecord copy = h;  // checked, never restamped
    if (auto held = check_one(copy, false, memo, rehashed); !held) return held;
  }
  return {};
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
