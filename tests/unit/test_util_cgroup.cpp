// util::read_cgroup_limits against fake cgroup trees (v2 and v1): the -j
// default and the memory budget must fit a container's limits.
#include <catch2/catch.hpp>

#include "tvmffi_jit/util/cgroup.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;

namespace {

struct FakeRoot {
  util::TempDir dir;
  void put(const std::string& rel, const std::string& text) {
    const std::string p = util::join_path(dir.path(), rel);
    util::make_directories(util::parent_path(p));
    util::write_file(p, text);
  }
};

constexpr const char* kV2Mount =
    "22 1 0:21 / /sys rw - sysfs sysfs rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

}  // namespace

TEST_CASE("cgroup v2: cpu.max and the tighter of memory.max and memory.high, along the path", "[util][cgroup]") {
  FakeRoot r;
  r.put("proc/self/cgroup", "0::/ci/job7\n");
  r.put("proc/self/mountinfo", kV2Mount);
  r.put("sys/fs/cgroup/ci/job7/cpu.max", "400000 100000\n");
  r.put("sys/fs/cgroup/ci/job7/memory.max", "max\n");
  r.put("sys/fs/cgroup/ci/job7/memory.high", "17179869184\n");
  r.put("sys/fs/cgroup/ci/job7/memory.current", "1073741824\n");
  r.put("sys/fs/cgroup/ci/memory.max", "8589934592\n");  // the parent's 8 GiB binds the child
  r.put("sys/fs/cgroup/ci/cpu.max", "max 100000\n");
  util::CgroupLimits l = util::read_cgroup_limits(r.dir.path());
  REQUIRE(l.cpus);
  CHECK(*l.cpus == Approx(4.0));
  REQUIRE(l.memory_bytes);
  CHECK(*l.memory_bytes == (8ull << 30));
  CHECK(l.memory_source.find("ci/memory.max") != std::string::npos);
  REQUIRE(l.memory_usage);
  CHECK(*l.memory_usage == (1ull << 30));
  CHECK(util::cgroup_cpu_slots(l, 64) == 4);
  CHECK(util::cgroup_cpu_slots(l, 2) == 2);
}

TEST_CASE("cgroup v2: a fractional quota rounds up, no limits are none", "[util][cgroup]") {
  FakeRoot r;
  r.put("proc/self/cgroup", "0::/\n");
  r.put("proc/self/mountinfo", kV2Mount);
  r.put("sys/fs/cgroup/cpu.max", "150000 100000\n");
  util::CgroupLimits l = util::read_cgroup_limits(r.dir.path());
  CHECK(util::cgroup_cpu_slots(l, 64) == 2);
  CHECK_FALSE(l.memory_bytes);
  r.put("sys/fs/cgroup/cpu.max", "max 100000\n");
  l = util::read_cgroup_limits(r.dir.path());
  CHECK_FALSE(l.cpus);
  CHECK(util::cgroup_cpu_slots(l, 64) == 64);
}

TEST_CASE("cgroup v2: a namespaced mount shows the process's own cgroup at its root", "[util][cgroup]") {
  FakeRoot r;
  // Inside a container: /proc/self/cgroup names the host path, the mount's root is that path.
  r.put("proc/self/cgroup", "0::/kubepods/pod1/c2\n");
  r.put("proc/self/mountinfo",
        "30 22 0:26 /kubepods/pod1/c2 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n");
  r.put("sys/fs/cgroup/cpu.max", "200000 100000\n");
  r.put("sys/fs/cgroup/memory.max", "4294967296\n");
  util::CgroupLimits l = util::read_cgroup_limits(r.dir.path());
  CHECK(util::cgroup_cpu_slots(l, 64) == 2);
  REQUIRE(l.memory_bytes);
  CHECK(*l.memory_bytes == (4ull << 30));
}

TEST_CASE("cgroup v1: cfs quota over period, memory.limit_in_bytes, no limit as a huge value", "[util][cgroup]") {
  FakeRoot r;
  r.put("proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n");
  r.put("proc/self/mountinfo",
        "40 30 0:35 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "41 30 0:36 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  r.put("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
  r.put("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  r.put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  r.put("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "536870912\n");
  r.put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  util::CgroupLimits l = util::read_cgroup_limits(r.dir.path());
  CHECK(util::cgroup_cpu_slots(l, 64) == 3);
  REQUIRE(l.memory_bytes);
  CHECK(*l.memory_bytes == (2ull << 30));
  CHECK(*l.memory_usage == (512ull << 20));
  r.put("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  CHECK_FALSE(util::read_cgroup_limits(r.dir.path()).cpus);
}

TEST_CASE("cgroup: missing or garbled files are no limit, never an error", "[util][cgroup]") {
  FakeRoot r;
  CHECK_FALSE(util::read_cgroup_limits(r.dir.path()).cpus);
  r.put("proc/self/cgroup", "0::/../../etc\n");
  r.put("proc/self/mountinfo", kV2Mount);
  r.put("sys/fs/cgroup/cpu.max", "lots 100000\n");
  r.put("sys/fs/cgroup/memory.max", "-5\n");
  util::CgroupLimits l = util::read_cgroup_limits(r.dir.path());
  CHECK_FALSE(l.cpus);
  CHECK_FALSE(l.memory_bytes);
}
