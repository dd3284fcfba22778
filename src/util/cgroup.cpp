#include "tvmffi_jit/util/cgroup.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::util {

namespace {

// /proc/self/mountinfo of a host with thousands of mounts stays far below this.
constexpr uint64_t kMaxProcFileBytes = 4ull << 20;
// A limit file holds one short line.
constexpr uint64_t kMaxLimitFileBytes = 4096;
// v1 reports "no limit" as a page-rounded LONG_MAX; anything this large is none.
constexpr uint64_t kNoLimitAbove = 1ull << 60;

std::optional<uint64_t> parse_u64(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  return n;
}

std::optional<std::string> first_line(const std::string& path) {
  auto text = read_small_file(path, kMaxLimitFileBytes);
  if (!text) return std::nullopt;
  auto lines = split_lines(*text);
  if (lines.empty()) return std::nullopt;
  return std::string(trim(lines[0]));
}

struct Mount {
  std::string root;         // the part of the hierarchy the mount shows
  std::string mount_point;  // where, as seen by this process
};

// mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
// Mount points escape spaces as \040 (kept: cgroup mounts do not have them).
std::optional<Mount> find_mount(const std::string& mountinfo, bool v2, const std::string& controller) {
  for (const auto& line : split_lines(mountinfo)) {
    std::vector<std::string> f = split_any(line, " ");
    auto dash = std::find(f.begin(), f.end(), "-");
    if (dash == f.end() || f.size() < 5 || dash + 3 > f.end()) continue;
    const std::string& fstype = *(dash + 1);
    if (v2 && fstype != "cgroup2") continue;
    if (!v2) {
      if (fstype != "cgroup") continue;
      const std::string superopts = dash + 3 < f.end() ? *(dash + 3) : "";
      std::vector<std::string> opts = split_any(superopts, ",");
      if (std::find(opts.begin(), opts.end(), controller) == opts.end()) continue;
    }
    return Mount{f[3], f[4]};
  }
  return std::nullopt;
}

// The directory of `cgroup_path` (from /proc/self/cgroup) under `m`, and its
// ancestors up to the mount point, leaf first.
std::vector<std::string> cgroup_dirs(const std::string& root, const Mount& m, std::string cgroup_path) {
  if (m.root != "/" && starts_with(cgroup_path, m.root)) cgroup_path = cgroup_path.substr(m.root.size());
  else if (m.root != "/") cgroup_path = "/";  // a namespaced view: the mount is the process's cgroup
  // No "..": the kernel never writes one, and a fake tree must not escape the root.
  std::vector<std::string> parts;
  for (const auto& p : split_any(cgroup_path, "/"))
    if (!p.empty() && p != "." && p != "..") parts.push_back(p);
  // The mount point is absolute; under a fake root it is a path inside it.
  const std::string base = join_path(root, m.mount_point.substr(m.mount_point.find_first_not_of('/') == std::string::npos
                                                                    ? m.mount_point.size()
                                                                    : m.mount_point.find_first_not_of('/')));
  std::vector<std::string> dirs;
  for (size_t n = parts.size() + 1; n-- > 0;) {
    std::string d = base;
    for (size_t i = 0; i < n; ++i) d = join_path(d, parts[i]);
    dirs.push_back(d);
  }
  return dirs;
}

void take_cpus(CgroupLimits& out, double cpus, const std::string& source) {
  if (cpus <= 0) return;
  if (!out.cpus || cpus < *out.cpus) {
    out.cpus = cpus;
    out.cpu_source = source;
  }
}

void take_memory(CgroupLimits& out, uint64_t bytes, const std::string& source) {
  if (bytes == 0 || bytes >= kNoLimitAbove) return;
  if (!out.memory_bytes || bytes < *out.memory_bytes) {
    out.memory_bytes = bytes;
    out.memory_source = source;
  }
}

void read_v2(CgroupLimits& out, const std::vector<std::string>& dirs) {
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& d = dirs[i];
    if (auto cpu = first_line(join_path(d, "cpu.max"))) {
      std::vector<std::string> w = split_any(*cpu, " \t");
      if (w.size() == 2 && w[0] != "max") {
        auto quota = parse_u64(w[0]);
        auto period = parse_u64(w[1]);
        if (quota && period && *period > 0)
          take_cpus(out, static_cast<double>(*quota) / static_cast<double>(*period), join_path(d, "cpu.max"));
      }
    }
    for (const char* name : {"memory.max", "memory.high"})
      if (auto v = first_line(join_path(d, name)); v && *v != "max")
        if (auto bytes = parse_u64(*v)) take_memory(out, *bytes, join_path(d, name));
    if (i == 0)
      if (auto v = first_line(join_path(d, "memory.current")))
        out.memory_usage = parse_u64(*v);
  }
}

void read_v1_cpu(CgroupLimits& out, const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    auto quota = first_line(join_path(d, "cpu.cfs_quota_us"));
    auto period = first_line(join_path(d, "cpu.cfs_period_us"));
    if (!quota || !period || starts_with(*quota, "-")) continue;
    auto q = parse_u64(*quota);
    auto p = parse_u64(*period);
    if (q && p && *p > 0) take_cpus(out, static_cast<double>(*q) / static_cast<double>(*p), join_path(d, "cpu.cfs_quota_us"));
  }
}

void read_v1_memory(CgroupLimits& out, const std::vector<std::string>& dirs) {
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (auto v = first_line(join_path(dirs[i], "memory.limit_in_bytes")))
      if (auto bytes = parse_u64(*v)) take_memory(out, *bytes, join_path(dirs[i], "memory.limit_in_bytes"));
    if (i == 0)
      if (auto v = first_line(join_path(dirs[i], "memory.usage_in_bytes"))) out.memory_usage = parse_u64(*v);
  }
}

}  // namespace

CgroupLimits read_cgroup_limits(const std::string& root) {
  CgroupLimits out;
  auto cgroup = read_small_file(join_path(root, "proc/self/cgroup"), kMaxProcFileBytes);
  auto mountinfo = read_small_file(join_path(root, "proc/self/mountinfo"), kMaxProcFileBytes);
  if (!cgroup || !mountinfo) return out;
  // "HIERARCHY-ID:CONTROLLERS:PATH"; v2's line is "0::PATH".
  for (const auto& line : split_lines(*cgroup)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) {
      if (auto m = find_mount(*mountinfo, true, "")) read_v2(out, cgroup_dirs(root, *m, path));
      continue;
    }
    for (const auto& c : split_any(controllers, ",")) {
      if (c == "cpu") {
        if (auto m = find_mount(*mountinfo, false, "cpu")) read_v1_cpu(out, cgroup_dirs(root, *m, path));
      } else if (c == "memory") {
        if (auto m = find_mount(*mountinfo, false, "memory")) read_v1_memory(out, cgroup_dirs(root, *m, path));
      }
    }
  }
  return out;
}

int cgroup_cpu_slots(const CgroupLimits& limits, int cores) {
  cores = std::max(1, cores);
  if (!limits.cpus) return cores;
  const int allowed = std::max(1, static_cast<int>(std::ceil(*limits.cpus - 1e-9)));
  return std::min(cores, allowed);
}

}  // namespace tvmffi_jit::util
