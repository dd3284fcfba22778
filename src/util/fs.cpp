// The file functions of util/fs.h: descriptor I/O, files read and written
// (atomically too), temp dirs, mapped files, stamps. Paths and directories
// are util/paths.cpp.
#include "tvmffi_jit/util/fs.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace fs = std::filesystem;

namespace tvmffi_jit::util {

namespace {

// A /proc or /sys file: regular, size 0, and yet it reads data.
bool is_pseudo_file(int fd, const struct stat& st) {
  if (!S_ISREG(st.st_mode) || st.st_size != 0) return false;
  char c;
  return ::pread(fd, &c, 1, 0) == 1;
}

const char* kPseudoFileProblem =
    "is a pseudo-file (its size reads 0 but it has content, as /proc and /sys files do), not a file with real "
    "content: copy it to a regular file first";

// What a non-regular file is, for "not a regular file (...)" messages.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

IoFailure errno_failure(int err) { return IoFailure{std::errc(err), std::strerror(err)}; }

}  // namespace

Expected<size_t, IoFailure> read_some(int fd, void* buf, size_t size) {
  for (;;) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Unexpected{errno_failure(errno)};
  }
}

Expected<size_t, IoFailure> pread_some(int fd, void* buf, size_t size, uint64_t offset) {
  for (;;) {
    ssize_t n = ::pread(fd, buf, size, static_cast<off_t>(offset));
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Unexpected{errno_failure(errno)};
  }
}

Expected<void, IoFailure> write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unexpected{errno_failure(errno)};
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

FileWriter::FileWriter(FileWriter&& other) noexcept : fd_(other.release()), path_(std::move(other.path_)) {}

FileWriter& FileWriter::operator=(FileWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
    path_ = std::move(other.path_);
  }
  return *this;
}

void FileWriter::write(std::string_view data) {
  if (auto written = write_all(fd_, data); !written) throw io_error("cannot write " + path_ + ": " + written.why());
}

void FileWriter::close() {
  if (::close(release()) != 0) {
    int e = errno;
    throw io_error(errno_message("cannot write " + path_, e));
  }
}

int FileWriter::release() { return std::exchange(fd_, -1); }

Expected<FileWriter, IoFailure> create_new_file(const std::string& path, unsigned mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Unexpected{errno_failure(errno)};
  return FileWriter(fd, path);
}

int open_for_reading(const std::string& path, uint64_t* size, bool follow_symlinks) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer,
  // forever if none comes. It is cleared again for regular files, where it
  // has no effect on reads anyway.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    int e = errno;
    throw io_error(errno_message("cannot open " + path, e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw io_error(errno_message("cannot stat " + path, e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw io_error("cannot open " + path + ": not a regular file (" + file_type_name(st.st_mode) + ")");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

namespace {

std::string read_all(int fd, const std::string& path) {
  std::string out;
  char buf[65536];
  for (;;) {
    auto n = read_some(fd, buf, sizeof buf);
    if (!n) {
      ::close(fd);
      throw io_error("cannot read " + path + ": " + n.why());
    }
    if (*n == 0) break;
    out.append(buf, *n);
  }
  ::close(fd);
  return out;
}

}  // namespace

Expected<std::string> read_small_file(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Unexpected{std::strerror(errno)};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Unexpected{"is not a regular file"};
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Unexpected{"has " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                      " allowed"};
  }
  // The file may grow between fstat and read: read at most one byte past the
  // cap, and refuse if that byte exists.
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, max_bytes + 1 - out.size()));
    auto n = read_some(fd, buf, want);
    if (!n) {
      ::close(fd);
      return Unexpected{n.why()};
    }
    if (*n == 0) break;
    out.append(buf, *n);
    if (out.size() > max_bytes) {
      ::close(fd);
      return Unexpected{"grew past the " + std::to_string(max_bytes) + " bytes allowed while being read"};
    }
  }
  ::close(fd);
  return out;
}

std::optional<std::string> try_read_file(const std::string& path) {
  try {
    return read_all(open_for_reading(path), path);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string read_file(const std::string& path) {
  try {
    return read_all(open_for_reading(path), path);
  } catch (const Error& e) {
    // "cannot read PATH: ..." as before, for callers that match on it.
    std::string what = e.what();
    if (what.rfind("cannot open ", 0) == 0) what.replace(0, 12, "cannot read ");
    throw io_error(what);
  }
}

void write_file(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    throw io_error(errno_message("cannot create " + path, e));
  }
  FileWriter file(fd, path);
  file.write(content);
  file.close();
}

std::string unique_name_suffix() {
  uint64_t r = 0;
  // getrandom() of 8 bytes never blocks once the pool is initialised (it is
  // after boot); a short read leaves part of r zero, still unique by pid.tid.
  ssize_t ignored = ::getrandom(&r, sizeof r, 0);
  (void)ignored;
  return std::to_string(::getpid()) + "." + std::to_string(::syscall(SYS_gettid)) + "." +
         hex_encode(reinterpret_cast<const uint8_t*>(&r), sizeof r);
}

AtomicFile::AtomicFile(std::string path, unsigned mode) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + unique_name_suffix();
  auto created = create_new_file(tmp_, mode);
  if (!created) throw io_error("cannot create " + tmp_ + ": " + created.why());
  file_ = std::move(created).value();
}

AtomicFile::~AtomicFile() {
  file_ = FileWriter();  // closed before the unlink
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(std::string_view data) { file_.write(data); }

void AtomicFile::sync() {
  if (::fsync(file_.fd()) != 0) {
    int e = errno;
    throw io_error(errno_message("cannot write " + tmp_, e));
  }
}

void AtomicFile::commit() {
  // Not file_.close(): a failed close is reported for `path`, as the rename is.
  int rc = ::close(file_.release());
  if (rc != 0 || ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    throw io_error(errno_message("cannot write " + path_, e));
  }
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view content, unsigned mode) {
  AtomicFile f(path, mode);
  f.write(content);
  f.commit();
}

Expected<void> can_read_content(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) return Unexpected{"no such file"};
    return Unexpected{to_lower(std::strerror(e))};
  }
  if (S_ISDIR(st.st_mode)) return Unexpected{"is a directory, not a file"};
  if (!S_ISREG(st.st_mode)) return Unexpected{std::string("is not a regular file (") + file_type_name(st.st_mode) + ")"};
  // O_NONBLOCK: the file may have been replaced by a FIFO since stat().
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Unexpected{to_lower(std::strerror(errno))};
  std::string problem;
  if (::fstat(fd, &st) != 0) problem = to_lower(std::strerror(errno));
  else if (S_ISDIR(st.st_mode)) problem = "is a directory, not a file";
  else if (!S_ISREG(st.st_mode)) problem = std::string("is not a regular file (") + file_type_name(st.st_mode) + ")";
  else if (is_pseudo_file(fd, st)) problem = kPseudoFileProblem;
  ::close(fd);
  if (!problem.empty()) return Unexpected{std::move(problem)};
  return {};
}

uint64_t random_seed() {
  uint64_t seed = 0;
  // getrandom() of 8 bytes does not block once the pool is initialised and
  // is not cut short; the clock is the fallback for a kernel without it.
  if (::getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed))
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return seed;
}

namespace {
// Set once by the CLI before any command runs; read by every thread that makes a temp dir.
std::mutex temp_root_mutex;
std::string temp_root_dir;
}  // namespace

std::string temp_root() {
  std::lock_guard<std::mutex> lock(temp_root_mutex);
  return temp_root_dir.empty() ? std::string("/tmp") : temp_root_dir;
}

void set_temp_root(std::string dir) {
  std::lock_guard<std::mutex> lock(temp_root_mutex);
  temp_root_dir = std::move(dir);
}

TempDir::TempDir(const std::string& parent, const std::string& prefix) {
  std::string base = parent.empty() ? temp_root() : parent;
  std::string templ = join_path(base, prefix + "XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    int e = errno;
    throw io_error(errno_message("cannot create a temporary directory in " + base, e));
  }
  path_ = buf.data();
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)), keep_(other.keep_) {
  other.path_.clear();
}

TempDir::~TempDir() {
  if (!keep_ && !path_.empty()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  uint64_t file_size = 0;
  int fd = open_for_reading(path, &file_size);
  struct stat st;
  if (::fstat(fd, &st) == 0 && is_pseudo_file(fd, st)) {
    ::close(fd);
    throw io_error(path + " " + kPseudoFileProblem);
  }
  size_ = static_cast<size_t>(file_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw io_error(errno_message("cannot map " + path, e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  fd_ = fd;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

void MappedFile::release(const uint8_t* begin, const uint8_t* end) const {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (begin < data_) begin = data_;
  if (end > data_ + size_) end = data_ + size_;
  uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) & ~(page - 1);
  uintptr_t last = reinterpret_cast<uintptr_t>(end) & ~(page - 1);
  // The mapping is private and never written, so MADV_DONTNEED discards
  // nothing but the page-table entries; a failure only leaves pages resident.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::optional<FileStamp> file_stamp(const std::string& path, bool follow_symlinks) {
  struct stat st;
  if ((follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return std::nullopt;
  FileStamp s;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.inode = st.st_ino;
  s.device = st.st_dev;
  return s;
}

}  // namespace tvmffi_jit::util
