// util::FileLock as the cache uses it (the lock lives in util; its contract is the cache's).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::util;

TEST_CASE("a held lock makes a second taker wait, name the holder's pid, and give up in time", "[cache][lock]") {
  TempDir dir;
  std::string path = join_path(dir.path(), "k.lock");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t holder = ::fork();
  if (holder == 0) {
    FileLock l = FileLock::acquire(path, {});
    char c = 'x';
    (void)!::write(ready[1], &c, 1);
    ::sleep(3);
    ::_exit(l.locked() ? 0 : 1);
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);

  LockOptions lo;
  lo.timeout_seconds = 0.6;
  lo.notice_after_seconds = 0.1;
  LockHolder seen;
  int notices = 0;
  lo.on_wait = [&](const LockHolder& h) {
    seen = h;
    ++notices;
  };
  auto t0 = std::chrono::steady_clock::now();
  FileLock l = FileLock::acquire(path, lo);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_FALSE(l.locked());
  CHECK(l.status() == LockStatus::kTimedOut);
  CHECK(notices == 1);
  CHECK(seen.pid == holder);
  CHECK(waited >= 0.6);
  CHECK(waited < 2.5);
  REQUIRE(l.last_holder());
  CHECK(l.last_holder()->pid == holder);

  ::kill(holder, SIGKILL);  // a killed holder releases the lock with its fd
  int st = 0;
  ::waitpid(holder, &st, 0);
  lo.timeout_seconds = 5;
  FileLock after = FileLock::acquire(path, lo);
  CHECK(after.locked());
  CHECK(read_lock_holder(path)->pid == ::getpid());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_CASE("try_acquire does not wait and a lock in a missing directory is unavailable", "[cache][lock]") {
  TempDir dir;
  std::string path = join_path(dir.path(), "x.lock");
  FileLock a = FileLock::try_acquire(path, "first");
  REQUIRE(a.locked());
  CHECK(read_lock_holder(path)->note == "first");
  // flock locks belong to the open file description: a second open in this process conflicts too.
  FileLock b = FileLock::try_acquire(path);
  CHECK_FALSE(b.locked());
  a.release();
  CHECK(FileLock::try_acquire(path).locked());
  FileLock c = FileLock::acquire(join_path(dir.path(), "no/such/dir.lock"), {});
  CHECK(c.status() == LockStatus::kUnavailable);
}
