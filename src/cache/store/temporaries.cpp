#include "cache/store/temporaries.h"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <vector>

#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_alnum(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  return !s.empty();
}

bool is_pid(const std::string& s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

bool is_abandoned_temporary(const std::string& name, int64_t age_seconds, int64_t max_age) {
  std::vector<std::string> parts = util::split_any(name, ".");
  std::string host;
  std::string pid_text;
  if (parts.size() >= 4 && parts[0] == "stage" && parts.back().size() == 6 && is_alnum(parts.back())) {
    pid_text = parts[parts.size() - 2];
    // Host names may contain dots: the pid is always second to last.
    host = util::join(std::vector<std::string>(parts.begin() + 1, parts.end() - 2), ".");
    if (name != "stage." + host + "." + pid_text + "." + parts.back()) return false;  // empty pieces
  } else if (parts.size() == 3 && parts[0] == "trash" && parts[2].size() == 8 && is_alnum(parts[2])) {
    host = util::host_name();
    pid_text = parts[1];
  } else {
    return false;  // not ours (or a write-probe in flight): leave it
  }
  if (!is_pid(pid_text)) return false;
  if (age_seconds > max_age) return true;
  long pid = std::strtol(pid_text.c_str(), nullptr, 10);
  if (host != util::host_name() || pid <= 0) return false;  // another host's: only age decides
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

size_t remove_interrupted_staging(const std::string& tmp_dir) {
  size_t removed = 0;
  try {
    for (const auto& n : util::list_directory(tmp_dir)) {
      if (!util::starts_with(n, "stage.")) continue;
      const std::string p = util::join_path(tmp_dir, n);
      struct stat st;
      if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      // Age never decides here: only a process known to be gone on this host.
      if (!is_abandoned_temporary(n, 0, std::numeric_limits<int64_t>::max())) continue;
      if (::lstat(util::join_path(p, kStagingKeptMarker).c_str(), &st) == 0) continue;
      util::remove_all(p);
      ++removed;
    }
  } catch (const Error& e) {
    spdlog::debug("removing interrupted staging dirs: {}", e.what());  // gc tries again
  }
  return removed;
}

}  // namespace tvmffi_jit::cache
