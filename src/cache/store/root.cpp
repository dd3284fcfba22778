#include "tvmffi_jit/cache/root.h"

#include "tvmffi_jit/util/hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <cerrno>
#include <optional>
#include <pwd.h>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

std::string home_directory(const RootEnvironment& env) {
  if (env.home && !env.home->empty()) return *env.home;
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

Expected<void> probe_writable(const std::string& dir) {
  // access(W_OK) is not enough: root passes it on an immutable directory, and
  // it says nothing about a full disk. Create and remove a real file.
  // Unique per thread, not per process: the modules of one batch probe the
  // same new root at once, and a shared name made one of them see EEXIST and
  // build without caching.
  std::string probe = util::join_path(dir, ".write-probe." + util::unique_name_suffix());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Unexpected{errno_message("cannot write in " + dir, errno)};
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

// The signature line is fixed by the Cache Directory Tagging spec
// (https://bford.info/cachedir/): tools such as tar --exclude-caches, borg and
// restic look for exactly these 43 bytes at the start of the file.
constexpr const char* kCacheDirTagSignature = "Signature: 8a477f597d28d172789f06886806bc55";
constexpr const char* kMarkerPrefix = "tvmffi-jit cache layout ";
constexpr uint64_t kMarkerMaxBytes = 4096;

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The layout number in TVMFFI_JIT_CACHE when both marker files are ours.
std::optional<int> read_markers(const std::string& root) {
  auto tag = util::read_small_file(util::join_path(root, kCacheDirTagName), kMarkerMaxBytes);
  if (!tag || !util::starts_with(*tag, kCacheDirTagSignature)) return std::nullopt;
  auto marker = util::read_small_file(util::join_path(root, kRootMarkerName), kMarkerMaxBytes);
  if (!marker || !util::starts_with(*marker, kMarkerPrefix)) return std::nullopt;
  std::string_view rest = util::trim(std::string_view(*marker).substr(std::string_view(kMarkerPrefix).size()));
  rest = rest.substr(0, rest.find('\n'));
  if (!all_digits(rest) || rest.size() > 6) return std::nullopt;
  return std::stoi(std::string(rest));
}

// "<pid>.<tid>.<hex>" as util::unique_name_suffix() writes it (and "<pid>"
// from tools before it).
bool is_unique_suffix(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '.')) return false;
  return true;
}

// Names this tool creates directly under a root (root.h's layout), with the
// temporary files of its atomic writes ("<file>.tmp.<pid>.<random>").
bool is_layout_name(const std::string& n) {
  static const char* const kDirs[] = {"objects", "compilers", "digests", "toolchain", "locks", "tmp"};
  for (const char* d : kDirs)
    if (n == d) return true;
  if (is_module_entry_dir_name(n)) return true;
  std::string base = n;
  if (size_t t = n.find(".tmp."); t != std::string::npos) base = n.substr(0, t);
  if (base == "stats.json" || base == "stats.log" || base == "stats.lock" || base == "costs.log" ||
      base == "costs.lock" || base == kCacheDirTagName ||
      base == kRootMarkerName)
    return true;
  if (util::starts_with(base, "stats.log.") && all_digits(std::string_view(base).substr(10))) return true;
  if (util::starts_with(base, ".write-probe.") && is_unique_suffix(std::string_view(base).substr(13))) return true;
  return false;
}

// The first name in `root` that this tool would not have created, if any.
std::optional<std::string> first_foreign_name(const std::string& root) {
  DIR* d = ::opendir(root.c_str());
  if (!d) return std::nullopt;  // unreadable: the build reports it when it gets there
  std::optional<std::string> foreign;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (!is_layout_name(n)) {
      foreign = n;
      break;
    }
  }
  ::closedir(d);
  return foreign;
}

bool same_directory(const struct stat& a, const std::string& other) {
  struct stat b;
  return !other.empty() && ::stat(other.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void refuse_home_directory_at(const std::string& path, const struct stat& st, const std::string& home) {
  if (same_directory(st, home))
    throw io_error("refusing cache root " + path + ": it is your home directory; pick a directory of its own, "
                   "such as " + util::join_path(util::join_path(home, ".cache"), "tvmffi-jit"));
}

// `/` and the home directory are never a cache: `--cache-dir "$UNSET/"` or
// `--cache-dir ~` are typos, and the root's names would mix with the user's.
// $HOME, which may differ from the passwd entry, is the caller's to check
// (refuse_home_directory): the CLI has the environment.
void refuse_system_directories(const std::string& path, const struct stat& st) {
  if (same_directory(st, "/"))
    throw io_error("refusing cache root " + path + ": it is the filesystem root (an empty variable in --cache-dir or "
                   "TVMFFI_JIT_CACHE_DIR?); pick a directory of its own, such as ~/.cache/tvmffi-jit");
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir) refuse_home_directory_at(path, st, pw->pw_dir);
}

}  // namespace

bool is_module_entry_dir_name(std::string_view n) {
  if (n.size() < 18 || n[n.size() - 17] != '_') return false;
  for (char c : n.substr(n.size() - 16))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return is_valid_entry_name(n.substr(0, n.size() - 17));
}

void write_root_markers(const std::string& root) {
  util::write_file_atomic(util::join_path(root, kCacheDirTagName),
                          std::string(kCacheDirTagSignature) +
                              "\n# This file is a cache directory tag created by tvmffi-jit.\n"
                              "# For information about cache directory tags, see https://bford.info/cachedir/\n",
                          0600);
  util::write_file_atomic(util::join_path(root, kRootMarkerName),
                          std::string(kMarkerPrefix) + std::to_string(kRootLayout) +
                              "\n# `tvmffi-jit cache clean|gc` delete only in directories carrying this file.\n",
                          0600);
}

bool require_marked_root(const CacheRoot& root) {
  struct stat st;
  if (::lstat(root.path.c_str(), &st) != 0 && errno == ENOENT) return false;
  if (!root.marked)
    throw io_error("refusing to delete anything in " + root.path + ": it does not carry the " +
                   std::string(kCacheDirTagName) + " and " + kRootMarkerName +
                   " files that tvmffi-jit writes into its caches, so it may not be a cache. If it is one made by an "
                   "older tvmffi-jit, run any `tvmffi-jit build --cache-dir " + root.path +
                   "` once: a build marks a root that holds nothing but cache files");
  if (root.layout != kRootLayout)
    throw io_error("refusing to delete anything in " + root.path + ": its " + kRootMarkerName + " says cache layout " +
                   std::to_string(root.layout) + ", this tvmffi-jit maintains layout " + std::to_string(kRootLayout) +
                   "; use the tvmffi-jit that wrote it");
  return true;
}

namespace {
// $XDG_CACHE_HOME, else ~/.cache.
std::string user_cache_home(const RootEnvironment& env) {
  if (env.xdg_cache_home && util::starts_with(*env.xdg_cache_home, "/")) return util::absolute_path(*env.xdg_cache_home);
  return util::absolute_path(util::join_path(home_directory(env), ".cache"));
}
}  // namespace

std::string resolve_root_path(const std::string& cli_value, const RootEnvironment& env) {
  if (!cli_value.empty()) return util::absolute_path(cli_value);
  if (env.cache_dir && !env.cache_dir->empty()) return util::absolute_path(*env.cache_dir);
  return util::join_path(user_cache_home(env), "tvmffi-jit");
}

void refuse_home_directory(const std::string& path, const std::string& home) {
  struct stat st;
  if (!home.empty() && ::stat(path.c_str(), &st) == 0) refuse_home_directory_at(path, st, home);
}

std::string user_toolchain_memo_dir(const RootEnvironment& env) {
  return util::join_path(user_cache_home(env), "tvmffi-jit-toolchain");
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
  refuse_system_directories(root.path, st);
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
  if (auto layout = read_markers(root.path)) {
    root.marked = true;
    root.layout = *layout;
  } else if (create) {
    if (auto foreign = first_foreign_name(root.path))
      throw io_error("refusing cache root " + root.path + ": it is not a tvmffi-jit cache (no " + kRootMarkerName +
                     " marker) and holds '" + *foreign +
                     "', which tvmffi-jit does not create; point --cache-dir or TVMFFI_JIT_CACHE_DIR at a new or "
                     "empty directory");
    try {
      write_root_markers(root.path);
      root.marked = true;
      root.layout = kRootLayout;
    } catch (const Error& e) {
      // A read-only root from before the markers still serves hits.
      spdlog::debug("cannot mark the cache root: {}", e.what());
    }
  }
  if (probe_write) probe_root_writable(root);
  return root;
}

void probe_root_writable(CacheRoot& root) {
  Expected<void> writable = probe_writable(root.path);
  root.writable = writable.has_value();
  root.unwritable_why = writable ? "" : writable.why();
  root.write_probed = true;
}

bool is_valid_entry_name(std::string_view name) {
  return name.size() <= kMaxEntryNameLength && is_valid_file_name(name);
}

bool is_valid_file_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxFileNameLength || name[0] == '.') return false;
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

std::string module_entry_dir_name(std::string_view name, std::string_view key_hex) {
  constexpr size_t kKeyPart = 17;  // "_" + 16 hex
  std::string key16(key_hex.substr(0, 16));
  if (name.size() + kKeyPart <= kMaxEntryNameLength) return std::string(name) + "_" + key16;
  constexpr size_t kNamePart = 16;  // hex of the name's SHA-256
  const size_t prefix = kMaxEntryNameLength - kKeyPart - 1 - kNamePart;
  return std::string(name.substr(0, prefix)) + "-" + util::sha256_hex(name).substr(0, kNamePart) + "_" + key16;
}

}  // namespace tvmffi_jit::cache
