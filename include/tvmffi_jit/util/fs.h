// File-system helpers. Every failure throws Error(kIo) naming the path,
// except the descriptor-level ones below, whose callers word the message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::util {

// A failed read(2)/write(2): the errno as the kind (a caller branches on
// std::errc::resource_unavailable_try_again for a non-blocking descriptor)
// and strerror() as the message, so "cannot write " + path + ": " + why()
// reads as errno_message() did.
using IoFailure = Failure<std::errc>;

// The one EINTR loop of each system call: read(2) once, retried on EINTR.
// The count read, 0 at end of file.
Expected<size_t, IoFailure> read_some(int fd, void* buf, size_t size);
// pread(2) at `offset` once, retried on EINTR.
Expected<size_t, IoFailure> pread_some(int fd, void* buf, size_t size, uint64_t offset);
// write(2) until all of `data` is written: retried on EINTR and after a
// short write. Not for a non-blocking descriptor (EAGAIN ends it, and how
// much was written is lost).
Expected<void, IoFailure> write_all(int fd, std::string_view data);

// An open descriptor of a file being written, owned: write() writes all of
// the data, close() checks close(2) (where a deferred write error surfaces);
// both throw "cannot write PATH: <errno text>". The destructor closes a
// descriptor still open (an exception unwinding) without a check.
class FileWriter {
 public:
  FileWriter() = default;
  FileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FileWriter();
  FileWriter(FileWriter&& other) noexcept;
  FileWriter& operator=(FileWriter&& other) noexcept;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void write(std::string_view data);
  void close();
  // The descriptor, no longer owned (for a caller that words its own close
  // failure); -1 when none is open.
  int release();
  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Creates `path` for writing with O_CREAT|O_EXCL|O_NOFOLLOW and `mode`:
// whatever is planted at the name (a symlink to a victim's file, an older
// file) makes it fail instead of being written through or over. The failure
// is the errno, for the caller to word ("cannot create ...", "already exists").
Expected<FileWriter, IoFailure> create_new_file(const std::string& path, unsigned mode);

// Opens `path` read-only for reading its bytes: the one place files are opened
// for reading (read_file, try_read_file, MappedFile and the hashers use it).
// The type is checked on the open descriptor before any read, and the open
// itself cannot block: a FIFO, socket, device or directory is refused with
// "cannot open PATH: not a regular file (a FIFO)" instead of hanging. Returns
// the descriptor (the caller closes it) and, in `size`, the fstat size.
// !follow_symlinks: a symlink at `path` is refused too (O_NOFOLLOW).
int open_for_reading(const std::string& path, uint64_t* size = nullptr, bool follow_symlinks = true);
std::string read_file(const std::string& path);  // "cannot read PATH: ..." on failure
std::optional<std::string> try_read_file(const std::string& path);  // nullopt on any failure
// A small file the tool wrote itself (cache metadata, memos, journals), read
// as hostile input: opened without following a final symlink and without
// blocking (a FIFO planted in its place), accepted only as a regular file of
// at most `max_bytes`. Otherwise why not: "is not a regular file", "has
// 3221225472 bytes, more than the 16777216 allowed", "No such file or
// directory". Most callers treat any failure as "no memo" and ignore why.
Expected<std::string> read_small_file(const std::string& path, uint64_t max_bytes);
void write_file(const std::string& path, std::string_view content);
// Writes to a unique temp file in the same directory (AtomicFile), fsyncs
// nothing (the cache's correctness rests on rename atomicity, not
// durability), then renames over `path`, so readers see the old or the new
// content, never a mix.
void write_file_atomic(const std::string& path, std::string_view content, unsigned mode = 0644);

// A name no other thread or process of any user picks: "<pid>.<tid>.<16 hex
// from getrandom>". For temp files beside user paths (a guessable name lets
// another user plant a symlink there first) and for probe files that several
// threads of one batch create in one directory at once.
std::string unique_name_suffix();

// A file written beside `path` under "<path>.tmp.<unique_name_suffix()>",
// created with O_CREAT|O_EXCL|O_NOFOLLOW: whatever is planted at that name
// (a symlink to the victim's file) makes the open fail instead of being
// written through. commit() renames it over `path`; until then the
// destructor removes it (an exception or a termination signal unwinding).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, unsigned mode = 0644);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(std::string_view data);
  // fsync before the rename (an export is kept, a cache file is not).
  void sync();
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  FileWriter file_;
  bool committed_ = false;
};

bool path_exists(const std::string& path);   // lstat: a dangling symlink exists
bool is_directory(const std::string& path);  // stat (follows links)
bool is_regular_file(const std::string& path);
// Whether the file at `path` can be read for its content, or why not:
// "no such file", "permission denied" (the errno text of what failed),
// "is a directory, not a file", "is not a regular file (a FIFO)" (opened
// without blocking, never read), or "is a pseudo-file ..." for a /proc or /sys
// file whose size reads 0 although it has content (a compiler would read
// whatever it holds at that moment). Follows symlinks.
Expected<void> can_read_content(const std::string& path);
// mkdir -p. Safe against other threads and processes creating the same tree
// at once: EEXIST is success when what exists is a directory (followed
// through a symlink, as mkdir -p does), and an error naming the path when it
// is a file.
void make_directories(const std::string& path, unsigned mode = 0755);
// Removes a file or a tree without following symlinks; missing is fine.
void remove_all(const std::string& path);
// The names in `dir` (no "." or ".."), sorted; empty when it cannot be
// opened (missing, not a directory, no permission).
std::vector<std::string> list_directory(const std::string& dir);

// Lexically normalised, not resolved; only a relative path needs the current directory.
std::string absolute_path(const std::string& path);
// realpath(3), or why not (the errno text): for callers to whom a path that
// does not resolve is an answer (a dangling link, a vanished file).
Expected<std::string> real_path(const std::string& path);
std::string canonical_path(const std::string& path);  // real_path; throws "cannot resolve PATH: ..."
// The file the kernel opens for `path`, as an absolute, lexically normal
// path: absolute_path(), except where a ".." follows a symlink. The kernel
// takes ".." after following the link ("/p/link/../h.h" is h.h beside the
// link's target, not /p/h.h), so the part up to the last ".." is resolved
// (realpath) when its lexical form names another folder; the rest is kept as
// written. A part that does not resolve (a missing folder) stays lexical.
std::string opened_path(const std::string& path);
std::string parent_path(const std::string& path);
std::string file_name(const std::string& path);
std::string extension(const std::string& path);  // ".cu", lower-cased
std::string join_path(const std::string& a, const std::string& b);
// Lexically: `path` is strictly below directory `dir` ("/a/b" is under "/a"
// and "/", not under "/a/b" or "/ab"). Both are taken as written: compare
// lexically normal paths.
bool is_path_under(const std::string& path, const std::string& dir);
// The current directory, or why not: it was deleted under a running shell
// (the reason says so and what to do). current_directory() throws that as
// Error(kIo); find_current_directory() is for callers that go on without it.
Expected<std::string> find_current_directory();
std::string current_directory();
// Where temporary directories go: the directory set_temp_root() was given,
// else /tmp. The CLI sets it once, from TMPDIR in the environment it
// resolved (cli/environment.h), before any command runs.
std::string temp_root();
void set_temp_root(std::string dir);  // "" means /tmp

// 64 random bits from the kernel (getrandom), to seed unique temp names.
// Not std::random_device: libstdc++ 12 implements it with arc4random, a
// GLIBC_2.36 symbol that alone would raise the wheel's manylinux tag from
// 2_34 to 2_36 (docs/python.md).
uint64_t random_seed();

// A fresh private (0700) directory, removed with its contents on destruction
// unless keep() was called.
class TempDir {
 public:
  explicit TempDir(const std::string& parent = "", const std::string& prefix = "tvmffi-jit-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&& other) noexcept;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// Read-only memory map of a whole file (empty files map to size 0).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }
  // The open descriptor of the mapped file (valid for the object's lifetime),
  // for pread of ranges that should not be faulted into the mapping.
  int fd() const { return fd_; }
  // Drops this process's pages of the whole pages inside [begin, end) (a range
  // of data()). Reading them again re-maps them from the page cache, so this
  // only lowers resident memory, never changes what is read.
  void release(const uint8_t* begin, const uint8_t* end) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// Identity of a file for memoisation (never as the only freshness check).
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  bool operator==(const FileStamp& o) const {
    return size == o.size && mtime_ns == o.mtime_ns && inode == o.inode && device == o.device;
  }
};
// follow_symlinks=false: a symlink's own stamp (lstat), for files read never through one.
std::optional<FileStamp> file_stamp(const std::string& path, bool follow_symlinks = true);

}  // namespace tvmffi_jit::util
