#include "compile/freshness.h"

#include <sys/stat.h>

#include <ctime>

namespace tvmffi_jit::compile {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool changed_since(const std::string& path, int64_t start_ns) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return true;
  int64_t c = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  int64_t m = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return c >= start_ns || m >= start_ns;
}

std::optional<std::string> header_changed_during_build(const std::vector<cache::HeaderRecord>& headers,
                                                       int64_t start_ns) {
  for (const auto& h : headers)
    if (changed_since(h.path, start_ns)) return h.path;
  return std::nullopt;
}

}  // namespace tvmffi_jit::compile
