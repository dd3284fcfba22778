#include "tvmffi_jit/cache/proof.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/scoped_fd.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

std::string memo_path(const DigestMemo& memo, const std::string& path) {
  return util::join_path(memo.dir, util::sha256_hex(path).substr(0, 32));
}

}  // namespace

Expected<HashedFile> hash_file_stamped(const std::string& path, bool follow_symlinks) {
  auto fail = [](const std::string& why) { return Unexpected{why}; };
  util::ScopedFd d;
  uint64_t ignored = 0;
  try {
    // Never blocks on a FIFO put in a file's place; refuses anything but a
    // regular file. An Error caught to become an answer: the lookup decides.
    d.fd = util::open_for_reading(path, &ignored, follow_symlinks);
  } catch (const Error& e) {
    return fail(e.what());
  }
  struct stat st;
  if (::fstat(d.fd, &st) != 0) return fail(std::strerror(errno));
  // The stamp of what is about to be read, taken before reading: a write
  // after this moves ctime, so the stamp can only be older than the content.
  const util::FullStamp stamp = util::full_stamp_of(st);
  util::Sha256 h;
  std::vector<char> buf(1 << 17);
  uint64_t total = 0;
  for (;;) {
    auto n = util::read_some(d.fd, buf.data(), buf.size());
    if (!n) return fail(n.why());
    if (*n == 0) break;
    h.update(buf.data(), *n);
    total += *n;
  }
  HashedFile f;
  f.size = total;
  f.sha256 = h.hex_digest();
  f.stat = util::stamp_is_settled(stamp) && util::stamps_are_trusted(st, path) ? util::stamp_text(stamp) : "";
  if (!f.stat.empty()) util::ProvenDigests::global().remember(path, stamp, f.sha256);
  return f;
}

std::string memo_digest(const DigestMemo& memo, const std::string& path, const std::string& stat, uint64_t size) {
  if (memo.dir.empty() || stat.empty() || size < kMemoMinBytes) return "";
  auto text = util::read_small_file(memo_path(memo, path), 4096);
  if (!text) return "";
  std::vector<std::string> lines = util::split_lines(*text);
  if (lines.size() != 4 || lines[0] != path || lines[1] != stat || lines[2] != std::to_string(size)) return "";
  return lines[3];
}

void remember_digest(const DigestMemo& memo, const std::string& path, const std::string& stat, uint64_t size,
                     const std::string& sha256) {
  if (!memo.writable || memo.dir.empty() || stat.empty() || size < kMemoMinBytes) return;
  try {
    util::make_directories(memo.dir, 0700);
    util::write_file_atomic(memo_path(memo, path),
                            path + "\n" + stat + "\n" + std::to_string(size) + "\n" + sha256 + "\n", 0600);
  } catch (const Error&) {
    // A memo is an optimisation: a full disk or a read-only root costs a re-hash later.
  }
}

FileCheck check_recorded_file(const std::string& path, uint64_t size, const std::string& sha256,
                              const std::string& recorded_stat, const FileCheckOptions& options, Rehashed* rehashed) {
  FileCheck c;
  struct stat st;
  if ((options.follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    c.problem = FileProblem::kMissing;
    return c;
  }
  // Never open a FIFO or device: entries may come from a remote store.
  if (!S_ISREG(st.st_mode)) {
    c.problem = FileProblem::kNotRegular;
    return c;
  }
  if (static_cast<uint64_t>(st.st_size) != size) {
    c.problem = FileProblem::kSize;
    c.found_size = static_cast<uint64_t>(st.st_size);
    return c;
  }
  const bool trusted = options.use_stamps && util::stamps_are_trusted(st, path);
  if (trusted) {
    const util::FullStamp now = util::full_stamp_of(st);
    const std::string now_text = util::stamp_text(now);
    if (!recorded_stat.empty() && recorded_stat == now_text) return c;  // the very file that was hashed
    std::string known;
    if (auto proven = util::ProvenDigests::global().find(path, now)) known = *proven;
    else known = memo_digest(options.memo, path, now_text, size);
    if (!known.empty()) {
      if (known != sha256) {
        c.problem = FileProblem::kContent;
        return c;
      }
      c.new_stat = now_text;  // settled when remembered, unchanged since
      if (rehashed) rehashed->restamped += 1;
      return c;
    }
  }
  Expected<HashedFile> hashed = hash_file_stamped(path, options.follow_symlinks);
  if (!hashed) {
    c.problem = FileProblem::kUnreadable;
    c.detail = hashed.why();
    return c;
  }
  const uint64_t got_size = hashed->size;
  const std::string& got = hashed->sha256;
  const std::string& stamped = hashed->stat;
  if (rehashed) {
    rehashed->files += 1;
    rehashed->bytes += got_size;
  }
  if (got_size != size || got != sha256) {
    c.problem = got_size != size ? FileProblem::kSize : FileProblem::kContent;
    c.found_size = got_size;
    return c;
  }
  remember_digest(options.memo, path, stamped, got_size, got);
  if (options.use_stamps && !stamped.empty() && stamped != recorded_stat) {
    c.new_stat = stamped;
    if (rehashed) rehashed->restamped += 1;
  }
  return c;
}

}  // namespace tvmffi_jit::cache
