// util/stamp.h and util/fork_safe.h: full stamps, the per-process memo of
// proven digests, and locks a fork never leaves held in the child.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/stamp.h"

using namespace tvmffi_jit;

TEST_CASE("a full stamp changes with ctime alone (chmod), and is settled only when mtime and ctime are old",
          "[util][stamp]") {
  util::TempDir dir(util::temp_root(), "stamp-");
  const std::string f = util::join_path(dir.path(), "f");
  util::write_file(f, "x");
  auto before = util::full_stamp(f);
  REQUIRE(before);
  ::usleep(20000);
  REQUIRE(::chmod(f.c_str(), 0644) == 0);
  auto after = util::full_stamp(f);
  REQUIRE(after);
  CHECK(after->mtime_ns == before->mtime_ns);
  CHECK(*after != *before);  // the mtime-only FileStamp would call them equal
  CHECK_FALSE(util::stamp_is_settled(*after));
  CHECK(util::stamp_is_settled(*after, after->ctime_ns + util::kSettledNs));
  util::FullStamp old_mtime = *after;
  old_mtime.mtime_ns -= 10 * util::kSettledNs;  // mtime set back (touch -d): ctime still fresh
  CHECK_FALSE(util::stamp_is_settled(old_mtime, after->ctime_ns + util::kSettledNs / 2));
}

TEST_CASE("proven digests are kept only under a settled stamp, and only for that exact stamp", "[util][stamp]") {
  util::ProvenDigests memo;
  util::FullStamp fresh{1, 2, 3, util::realtime_now_ns(), util::realtime_now_ns()};
  memo.remember("/p", fresh, "aa");
  CHECK_FALSE(memo.find("/p", fresh));
  util::FullStamp settled = fresh;
  settled.mtime_ns -= 3 * util::kSettledNs;
  settled.ctime_ns -= 3 * util::kSettledNs;
  memo.remember("/p", settled, "bb");
  CHECK(memo.find("/p", settled) == std::optional<std::string>("bb"));
  util::FullStamp chmodded = settled;
  chmodded.ctime_ns += 1;
  CHECK_FALSE(memo.find("/p", chmodded));
  CHECK_FALSE(memo.find("/q", settled));
}

TEST_CASE("a child forked while another thread holds a fork-safe lock can take it", "[util][fork]") {
  util::ForkSafeMutex engine(util::ForkSafeMutex::kEngineRank);
  util::ForkSafeMutex memo;
  std::mutex m;
  std::condition_variable cv;
  bool holding = false;
  std::atomic<bool> release{false};
  std::thread holder([&] {
    std::lock_guard<util::ForkSafeMutex> e(engine);
    std::lock_guard<util::ForkSafeMutex> g(memo);
    {
      std::lock_guard<std::mutex> l(m);
      holding = true;
    }
    cv.notify_all();
    // Releases once the fork has started waiting: the fork must wait for it.
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return holding; });
  }
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  pid_t pid = ::fork();
  if (pid == 0) {
    // The only thread here: both locks must be free.
    bool ok = engine.try_lock() && memo.try_lock();
    ::_exit(ok ? 0 : 1);
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  holder.join();
  releaser.join();
  // And the parent's locks work as before.
  CHECK(engine.try_lock());
  engine.unlock();
}

TEST_CASE("a filesystem mounted where another was, with the same device number, is asked about again",
          "[util][stamp]") {
  util::TempDir d;
  const std::string mnt = util::join_path(d.path(), "mnt");
  util::make_directories(mnt);
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A mount namespace of our own (in a user namespace where that is how it is permitted).
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(77);
    try {
      util::write_file("/proc/self/setgroups", "deny");
      util::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
      util::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
    } catch (...) {
      ::_exit(77);
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(77);
    const std::string file = util::join_path(mnt, "f");
    auto stat_of_new_file = [&](struct stat& st) {
      util::write_file(file, "x");
      return ::stat(file.c_str(), &st) == 0;
    };
    struct stat on_tmpfs, on_ramfs;
    if (::mount("none", mnt.c_str(), "tmpfs", 0, nullptr) != 0 || !stat_of_new_file(on_tmpfs)) ::_exit(77);
    if (!util::stamps_are_trusted(on_tmpfs, file)) ::_exit(1);  // tmpfs: trusted, and remembered
    if (::umount(mnt.c_str()) != 0 || ::mount("none", mnt.c_str(), "ramfs", 0, nullptr) != 0 ||
        !stat_of_new_file(on_ramfs))
      ::_exit(77);
    if (on_ramfs.st_dev != on_tmpfs.st_dev) ::_exit(78);  // the number was not reused: nothing to prove
    ::_exit(util::stamps_are_trusted(on_ramfs, file) ? 2 : 0);  // ramfs is not trusted
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    WARN("skipped: no mount namespace here (unshare(CLONE_NEWUSER|CLONE_NEWNS) or mount refused)");
    return;
  }
  if (WEXITSTATUS(status) == 78) {
    WARN("skipped: the kernel gave the ramfs another device number than the tmpfs before it");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
}
