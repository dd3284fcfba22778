// The path and directory functions of util/fs.h: tests, directories made,
// listed and removed, paths made absolute, resolved, split and joined, the
// current directory.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace fs = std::filesystem;

namespace tvmffi_jit::util {

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void make_directories(const std::string& path, unsigned mode) {
  if (path.empty() || is_directory(path)) return;
  std::string parent = parent_path(path);
  if (!parent.empty() && parent != path) make_directories(parent, mode);
  if (::mkdir(path.c_str(), mode) != 0) {
    int e = errno;
    if (e == EEXIST && is_directory(path)) return;  // another thread or process made it first
    throw io_error(errno_message("cannot create directory " + path, e == EEXIST ? ENOTDIR : e));
  }
}

std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(fs::path(path), ec);  // does not follow symlinks
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw io_error("cannot remove " + path + ": " + ec.message());
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return fs::path(path).lexically_normal().string();
  return (fs::path(current_directory()) / path).lexically_normal().string();
}

Expected<std::string> real_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (!r) return Unexpected{std::strerror(errno)};
  std::string s(r);
  std::free(r);
  return s;
}

std::string opened_path(const std::string& path) {
  const std::string lexical = absolute_path(path);
  const fs::path given = !path.empty() && path[0] == '/' ? fs::path(path) : fs::path(current_directory()) / path;
  std::vector<fs::path> parts(given.begin(), given.end());
  size_t last = parts.size();  // the last ".." component
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i] == "..") last = i;
  if (last == parts.size()) return lexical;
  fs::path head, tail;
  for (size_t i = 0; i <= last; ++i) head /= parts[i];
  for (size_t i = last + 1; i < parts.size(); ++i) tail /= parts[i];
  auto physical = real_path(head.string());
  if (!physical) return lexical;
  // The lexical folder is the same one: keep the path as it was written.
  if (auto same = real_path(head.lexically_normal().string()); same && *same == *physical) return lexical;
  return tail.empty() ? *physical : (fs::path(*physical) / tail).lexically_normal().string();
}

std::string canonical_path(const std::string& path) {
  return real_path(path).value_or_throw(
      [&](const std::string& why) { return io_error("cannot resolve " + path + ": " + why); });
}

std::string parent_path(const std::string& path) {
  std::string p = fs::path(path).parent_path().string();
  return p;
}

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

std::string extension(const std::string& path) { return to_lower(fs::path(path).extension().string()); }

std::string join_path(const std::string& a, const std::string& b) { return (fs::path(a) / b).string(); }

bool is_path_under(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

Expected<std::string> find_current_directory() {
  std::error_code ec;
  fs::path p = fs::current_path(ec);
  if (ec)
    return Unexpected{"cannot resolve a relative path: the current directory is unavailable (" + ec.message() +
                      "; it may have been deleted): cd to an existing directory or give absolute paths"};
  return p.string();
}

std::string current_directory() { return find_current_directory().value_or_throw(io_error); }

}  // namespace tvmffi_jit::util
