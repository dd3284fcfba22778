// util::StampMemo: what the engine library keeps per process between cache
// hits must be derived again whenever the file's stamp changes, and never
// kept for a file too young to trust its stamp.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/stamp_memo.h"

using namespace tvmffi_jit::util;

namespace {

// Sets the file's mtime `seconds_ago` into the past (a settled file).
void age(const std::string& path, int seconds_ago) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

struct Counting {
  int calls = 0;
  std::optional<std::string> operator()(const std::string& path) {
    ++calls;
    return try_read_file(path);
  }
};

}  // namespace

TEST_CASE("stamp memo derives again when the file is rewritten with the same size", "[util][stamp_memo]") {
  TempDir d;
  const std::string p = join_path(d.path(), "f");
  write_file(p, "one");
  age(p, 100);
  StampMemo<std::string> memo(4, 0, true);
  Counting derive;
  auto get = [&] { return memo.get_or(p, [&] { return derive(p); }); };
  CHECK(get() == "one");
  CHECK(get() == "one");
  CHECK(derive.calls == 1);  // the second call was memoised
  write_file(p, "two");      // same size, same inode: only the mtime tells
  age(p, 50);
  CHECK(get() == "two");
  CHECK(derive.calls == 2);
}

TEST_CASE("stamp memo keeps nothing from a file younger than its settle time", "[util][stamp_memo]") {
  TempDir d;
  const std::string p = join_path(d.path(), "young");
  write_file(p, "fresh");
  StampMemo<std::string> memo(4, StampMemo<std::string>::kSettleNs, true);
  Counting derive;
  auto get = [&] { return memo.get_or(p, [&] { return derive(p); }); };
  CHECK(get() == "fresh");
  CHECK(get() == "fresh");
  CHECK(derive.calls == 2);  // just written: its stamp could still hide an in-place rewrite
  // Setting mtime back (touch -d) moves ctime to now: the full stamp is
  // still young, so an old-looking mtime alone never makes a value kept.
  age(p, 10);
  CHECK(get() == "fresh");
  CHECK(get() == "fresh");
  CHECK(derive.calls == 4);
}

TEST_CASE("stamp memo keeps no failure and does not follow a symlink put in the file's place",
          "[util][stamp_memo]") {
  TempDir d;
  const std::string p = join_path(d.path(), "entry");
  StampMemo<std::string> memo(4, 0, false);
  Counting derive;
  auto get = [&] { return memo.get_or(p, [&] { return derive(p); }); };
  CHECK(!get());  // missing
  write_file(p, "real");
  age(p, 100);
  CHECK(get() == "real");
  CHECK(derive.calls == 2);
  // The same file moved aside and linked back: the same inode behind a symlink.
  const std::string aside = join_path(d.path(), "aside");
  REQUIRE(::rename(p.c_str(), aside.c_str()) == 0);
  REQUIRE(::symlink(aside.c_str(), p.c_str()) == 0);
  get();
  CHECK(derive.calls == 3);  // the symlink's own stamp: not the memoised file
}

TEST_CASE("stamp memo holds at most its capacity", "[util][stamp_memo]") {
  TempDir d;
  StampMemo<std::string> memo(2, 0, true);
  Counting derive;
  std::string paths[3];
  for (int i = 0; i < 3; ++i) {
    paths[i] = join_path(d.path(), "f" + std::to_string(i));
    write_file(paths[i], "x");
    age(paths[i], 100);
    memo.get_or(paths[i], [&] { return derive(paths[i]); });
  }
  // The third file started the memo over: the first is derived again.
  memo.get_or(paths[0], [&] { return derive(paths[0]); });
  CHECK(derive.calls == 4);
  memo.get_or(paths[0], [&] { return derive(paths[0]); });
  CHECK(derive.calls == 4);
}
