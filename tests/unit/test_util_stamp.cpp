// util/stamp.h and util/fork_safe.h: full stamps, the per-process memo of
// proven digests, and locks a fork never leaves held in the child.
#include <catch2/catch.hpp>

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
