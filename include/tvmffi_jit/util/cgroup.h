// The CPU and memory limits of the cgroup this process runs in (cgroup v2
// and v1), so that `-j` and the job gate's memory budget fit a container: a
// CI job with 4 CPUs and 8 GiB on a 64-core host must not start 64 nvcc.
//
// Read from <root>/proc/self/cgroup (which cgroup) and
// <root>/proc/self/mountinfo (where each hierarchy is mounted, and which part
// of it the mount shows), then the limit files of that cgroup and of every
// ancestor up to the mount (a parent's limit binds its children too):
//   v2: cpu.max ("QUOTA PERIOD" or "max PERIOD"), memory.max, memory.high
//       ("max" or bytes), memory.current;
//   v1: cpu.cfs_quota_us / cpu.cfs_period_us (-1: none),
//       memory.limit_in_bytes (a huge value: none), memory.usage_in_bytes.
// `root` is "/" normally; tests point it at a fake tree (the CLI takes it
// from $TVMFFI_JIT_CGROUP_ROOT). Every file is read with a size cap; what
// cannot be read or parsed is no limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tvmffi_jit::util {

struct CgroupLimits {
  std::optional<double> cpus;             // quota / period, the tightest along the path
  std::optional<uint64_t> memory_bytes;   // min(memory.max, memory.high) (v1: limit_in_bytes)
  std::optional<uint64_t> memory_usage;   // memory.current (v1: usage_in_bytes) of the process's own cgroup
  std::string cpu_source;                 // the file that set `cpus` (for logs)
  std::string memory_source;              // the file that set `memory_bytes`
};

CgroupLimits read_cgroup_limits(const std::string& root = "/");

// Whole CPUs a quota allows: ceil(cpus), at least 1; `cores` when no quota or
// when the quota exceeds it.
int cgroup_cpu_slots(const CgroupLimits& limits, int cores);

}  // namespace tvmffi_jit::util
