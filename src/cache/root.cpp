#include "tvmffi_jit/cache/root.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <pwd.h>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::cache {

namespace {

std::string home_directory() {
  const char* h = std::getenv("HOME");
  if (h && *h) return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  throw io_error("cannot find the home directory for the cache root; set TVMFFI_JIT_CACHE_DIR or pass --cache-dir");
}

// mkdir -p with 0700 for every directory we create; returns errno or 0.
int make_private_directories(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  std::string parent = util::parent_path(path);
  if (!parent.empty() && parent != path) {
    int e = make_private_directories(parent);
    if (e) return e;
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  return 0;
}

bool probe_writable(const std::string& dir, std::string* why) {
  // access(W_OK) is not enough: root passes it on an immutable directory, and
  // it says nothing about a full disk. Create and remove a real file.
  std::string probe = util::join_path(dir, ".write-probe." + std::to_string(::getpid()));
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *why = errno_message("cannot write in " + dir, errno);
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

}  // namespace

std::string resolve_root_path(const std::string& cli_value) {
  if (!cli_value.empty()) return util::absolute_path(cli_value);
  if (const char* v = std::getenv("TVMFFI_JIT_CACHE_DIR"); v && *v) return util::absolute_path(v);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x && x[0] == '/')
    return util::absolute_path(util::join_path(x, "tvmffi-jit"));
  return util::absolute_path(util::join_path(util::join_path(home_directory(), ".cache"), "tvmffi-jit"));
}

CacheRoot open_root(const std::string& path, bool create, bool probe_write) {
  CacheRoot root;
  root.path = util::absolute_path(path);
  struct stat st;
  if (::stat(root.path.c_str(), &st) != 0) {
    int e = errno;
    if (!create) {
      root.unwritable_why = errno_message("cache root " + root.path, e);
      root.write_probed = true;  // the failure above says why
      return root;
    }
    e = make_private_directories(root.path);
    if (e) {
      root.unwritable_why = errno_message("cannot create the cache root " + root.path, e);
      root.write_probed = true;  // the failure above says why
      return root;
    }
    ::chmod(root.path.c_str(), 0700);  // the umask may have narrowed, never widened, but be explicit
    if (::stat(root.path.c_str(), &st) != 0) {
      root.unwritable_why = errno_message("cannot stat the cache root " + root.path, errno);
      root.write_probed = true;  // the failure above says why
      return root;
    }
  }
  if (!S_ISDIR(st.st_mode)) throw io_error("cache root " + root.path + " is not a directory");
  if (st.st_uid != ::geteuid())
    throw io_error("refusing cache root " + root.path + ": owned by uid " + std::to_string(st.st_uid) +
                   ", not by you (uid " + std::to_string(::geteuid()) +
                   "); use --cache-dir or TVMFFI_JIT_CACHE_DIR to pick a directory of your own");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw io_error("refusing cache root " + root.path + ": mode " + mode +
                   " lets group or others write into it (another user could plant artifacts); run "
                   "'chmod go-w " + root.path + "' or pick another --cache-dir");
  }
  root.writable = true;
  if (probe_write) probe_root_writable(root);
  return root;
}

void probe_root_writable(CacheRoot& root) {
  root.unwritable_why.clear();
  root.writable = probe_writable(root.path, &root.unwritable_why);
  root.write_probed = true;
}

bool is_valid_entry_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxEntryNameLength || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

void check_entry_name(std::string_view name) {
  if (!is_valid_entry_name(name))
    throw usage_error("invalid module name '" + std::string(name) +
                      "' for the cache: use 1-128 characters from [A-Za-z0-9_.-], not starting with '.'");
}

}  // namespace tvmffi_jit::cache
