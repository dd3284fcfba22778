// util::ChangeWatch: a proof holds until inotify reports a change to what it watched.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>

#include "tvmffi_jit/util/change_watch.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;

namespace {

struct Tree {
  util::TempDir dir;
  std::string path(const std::string& rel) const { return dir.path() + "/" + rel; }
};

util::ChangeWatch::Proof watched(util::ChangeWatch& w, const std::vector<std::string>& present,
                                 const std::vector<std::string>& absent = {}) {
  auto proof = w.watch(present, absent);
  REQUIRE(proof);
  return *proof;
}

}  // namespace

TEST_CASE("a change watch proves nothing until enabled", "[util][change_watch]") {
  Tree t;
  util::write_file(t.path("a.h"), "a");
  util::ChangeWatch w;
  CHECK_FALSE(w.watch({t.path("a.h")}, {}));
  w.enable();
  CHECK(w.watch({t.path("a.h")}, {}));
}

TEST_CASE("a watched proof holds while nothing it depends on changes, even with activity beside it",
          "[util][change_watch]") {
  Tree t;
  util::make_directories(t.path("inc"));
  util::write_file(t.path("inc/a.h"), "a");
  util::write_file(t.path("inc/journal.log"), "1\n");
  util::ChangeWatch w;
  w.enable();
  auto proof = watched(w, {t.path("inc/a.h")});
  CHECK(w.unchanged(proof));
  // Writes and attribute changes of other files in the same folder (a
  // journal line, a last-use time) are not changes of a.h.
  util::write_file(t.path("inc/journal.log"), "1\n2\n");
  ::utimensat(AT_FDCWD, t.path("inc").c_str(), nullptr, 0);
  util::write_file(t.path("elsewhere.txt"), "x");
  CHECK(w.unchanged(proof));
  CHECK(w.unchanged(proof));
}

TEST_CASE("a write, a same-mode chmod, a rename or a removal of a watched file voids the proof",
          "[util][change_watch]") {
  Tree t;
  util::ChangeWatch w;
  w.enable();
  auto fresh = [&] {
    util::write_file(t.path("a.h"), "a");
    return watched(w, {t.path("a.h")});
  };
  auto p1 = fresh();
  util::write_file(t.path("a.h"), "b");
  CHECK_FALSE(w.unchanged(p1));
  auto p2 = fresh();
  ::chmod(t.path("a.h").c_str(), 0644);
  CHECK_FALSE(w.unchanged(p2));
  auto p3 = fresh();
  std::rename(t.path("a.h").c_str(), t.path("b.h").c_str());
  CHECK_FALSE(w.unchanged(p3));
  auto p4 = fresh();
  util::remove_all(t.path("a.h"));
  CHECK_FALSE(w.unchanged(p4));
  // A write through another hard link, in another folder, is a write of the file.
  fresh();
  util::make_directories(t.path("other"));
  REQUIRE(::link(t.path("a.h").c_str(), t.path("other/link.h").c_str()) == 0);
  auto p6 = watched(w, {t.path("a.h")});  // taken after the link (which changed a.h's link count)
  CHECK(w.unchanged(p6));
  FILE* f = std::fopen(t.path("other/link.h").c_str(), "w");
  REQUIRE(f);
  std::fputs("through the link", f);
  std::fclose(f);
  CHECK_FALSE(w.unchanged(p6));
}

TEST_CASE("a file appearing where an absent path must stay absent (a shadow) voids the proof",
          "[util][change_watch]") {
  Tree t;
  util::make_directories(t.path("first"));
  util::make_directories(t.path("second"));
  util::write_file(t.path("second/a.h"), "a");
  util::ChangeWatch w;
  w.enable();
  // The shadow's folder exists.
  auto p1 = watched(w, {t.path("second/a.h")}, {t.path("first/a.h")});
  util::write_file(t.path("first/a.h"), "shadow");
  CHECK_FALSE(w.unchanged(p1));
  // The shadow's folder does not exist yet: its parent is watched.
  auto p2 = watched(w, {t.path("second/a.h")}, {t.path("third/deep/a.h")});
  util::make_directories(t.path("third"));
  CHECK_FALSE(w.unchanged(p2));
}

TEST_CASE("a retargeted symlink or a renamed folder inside a symlink's target voids the proof",
          "[util][change_watch]") {
  Tree t;
  for (const char* v : {"cuda-13", "cuda-12"}) {
    util::make_directories(t.path(std::string(v) + "/targets/x86/include"));
    util::write_file(t.path(std::string(v) + "/targets/x86/include/cuda.h"), v);
  }
  REQUIRE(::symlink("targets/x86/include", t.path("cuda-12/include").c_str()) == 0);
  REQUIRE(::symlink("targets/x86/include", t.path("cuda-13/include").c_str()) == 0);
  REQUIRE(::symlink("cuda-13", t.path("cuda").c_str()) == 0);
  util::ChangeWatch w;
  w.enable();
  const std::string header = t.path("cuda/include/cuda.h");
  // Another toolkit behind the same path (update-alternatives, ln -sfn).
  auto p1 = watched(w, {header});
  CHECK(w.unchanged(p1));
  util::remove_all(t.path("cuda"));
  REQUIRE(::symlink("cuda-12", t.path("cuda").c_str()) == 0);
  CHECK_FALSE(w.unchanged(p1));
  // A folder renamed half-way along the symlink's target.
  util::remove_all(t.path("cuda"));
  REQUIRE(::symlink("cuda-13", t.path("cuda").c_str()) == 0);
  auto p2 = watched(w, {header});
  CHECK(w.unchanged(p2));
  std::rename(t.path("cuda-13/targets/x86").c_str(), t.path("cuda-13/targets/x86-old").c_str());
  CHECK_FALSE(w.unchanged(p2));
}

TEST_CASE("a forked child neither trusts its parent's proofs nor takes its parent's events", "[util][change_watch]") {
  Tree t;
  util::write_file(t.path("a.h"), "a");
  util::ChangeWatch w;
  w.enable();
  auto proof = watched(w, {t.path("a.h")});
  util::write_file(t.path("a.h"), "b");  // the event waits in the parent's queue
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Reading the inherited descriptor would consume the parent's event.
    const bool holds = w.unchanged(proof);
    ::_exit(holds ? 1 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the child did not trust the proof
  CHECK_FALSE(w.unchanged(proof));  // and the parent still sees its event
}

TEST_CASE("a path that cannot be watched gives no proof rather than a weak one", "[util][change_watch]") {
  Tree t;
  util::ChangeWatch w;
  w.enable();
  CHECK_FALSE(w.watch({t.path("missing.h")}, {}));  // a present file that is not there
  util::make_directories(t.path("dir"));
  CHECK_FALSE(w.watch({t.path("dir")}, {}));  // not a regular file
  CHECK_FALSE(w.watch({"relative.h"}, {}));
  // /proc's stamps are not trusted (another filesystem type).
  CHECK_FALSE(w.watch({"/proc/self/status"}, {}));
}

TEST_CASE("a proof that cannot fit in the process's share of watches is refused and gives back what it took",
          "[util][change_watch]") {
  Tree t;
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(t.path("h" + std::to_string(i) + ".h"));
    util::write_file(files.back(), "x");
  }
  util::ChangeWatch w(4);
  w.enable();
  auto too_many = w.watch(files, {});  // one watch per file already fills the share: nothing is asked
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().kind == util::WatchRefusal::kBudget);
  CHECK(w.watch_count() == 0);
  // The folders on the way take watches too: this one runs out midway and
  // removes every watch it added.
  auto midway = w.watch({files[0], files[1]}, {});
  REQUIRE_FALSE(midway);
  CHECK(midway.error().kind == util::WatchRefusal::kBudget);
  CHECK(w.watch_count() == 0);
}

TEST_CASE("a released proof gives its watches back, and a watch another kept proof holds stays",
          "[util][change_watch]") {
  Tree t;
  util::write_file(t.path("a.h"), "a");
  util::write_file(t.path("b.h"), "b");
  util::ChangeWatch w;
  w.enable();
  auto a = watched(w, {t.path("a.h")});
  const size_t with_a = w.watch_count();
  auto b = watched(w, {t.path("b.h")});
  CHECK(w.watch_count() == with_a + 1);  // the folders are shared; b.h's own watch is new
  w.release(a);
  CHECK(w.watch_count() == with_a);  // a.h's watch is gone, the folders stay for b
  CHECK(w.unchanged(b));
  util::write_file(t.path("b.h"), "B");
  CHECK_FALSE(w.unchanged(b));  // still watched
  w.release(b);
  CHECK(w.watch_count() == 0);
  // Watching again after everything was given back works as the first time.
  auto again = watched(w, {t.path("a.h")});
  CHECK(w.unchanged(again));
  util::write_file(t.path("a.h"), "A");
  CHECK_FALSE(w.unchanged(again));
}

TEST_CASE("a forked child never closes a descriptor of its own that took the number of the parent's inotify",
          "[util][change_watch]") {
  Tree t;
  util::write_file(t.path("a.h"), "a");
  util::ChangeWatch w;
  w.enable();
  auto proof = watched(w, {t.path("a.h")});  // the instance is open in the parent
  int probe = ::inotify_init1(IN_CLOEXEC);   // the number the parent's instance most likely has is below this one
  REQUIRE(probe >= 0);
  ::close(probe);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A daemonizing child: closes what it inherited, opens its log file,
    // which takes the lowest free numbers (the parent's inotify one among them).
    for (int fd = 3; fd < probe + 8; ++fd) ::close(fd);
    std::vector<int> logs;
    for (int fd = 3; fd <= probe; ++fd) {
      const int log = ::open(t.path("log" + std::to_string(fd)).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log < 0) ::_exit(3);
      logs.push_back(log);
    }
    // The child's first use of the watch, then its log must still be open.
    (void)w.watch({t.path("a.h")}, {});
    for (int log : logs)
      if (::write(log, "x", 1) != 1) ::_exit(1);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(w.unchanged(proof));  // the parent's instance is untouched
}

namespace {

// In a new user namespace (where permitted) with the user's limit lowered to
// `limit` watches: runs `body` in a child, whose exit code is returned; 77:
// the namespace could not be made.
int in_user_namespace_with_watch_limit(int limit, const std::function<int()>& body) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (::unshare(CLONE_NEWUSER) != 0) ::_exit(77);
    try {
      util::write_file("/proc/self/setgroups", "deny");
      util::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
      util::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
      util::write_file("/proc/sys/user/max_inotify_watches", std::to_string(limit));
    } catch (...) {
      ::_exit(77);
    }
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("processes that watch big modules leave the user's other programs their inotify watches",
          "[util][change_watch]") {
  Tree t;
  std::vector<std::string> headers;
  for (int i = 0; i < 200; ++i) {
    headers.push_back(t.path("h" + std::to_string(i) + ".h"));
    util::write_file(headers.back(), "x");
  }
  // Six engines (one per Python process on the machine), each proving a
  // module that reads 200 headers, under a user limit of 800 watches: each
  // may take 800/16 = 50, so none takes any; an editor's watch then succeeds.
  const int rc = in_user_namespace_with_watch_limit(800, [&] {
    if (util::ChangeWatch::default_watch_budget() != 50) return 2;
    std::vector<std::unique_ptr<util::ChangeWatch>> engines;
    for (int i = 0; i < 6; ++i) {
      engines.push_back(std::make_unique<util::ChangeWatch>());
      engines.back()->enable();
      if (engines.back()->watch(headers, {})) return 3;  // does not fit in its share
      if (engines.back()->watch_count() != 0) return 4;
      auto small = engines.back()->watch({headers[i]}, {});  // a small module still fits
      if (!small) return 5;
    }
    const int editor = ::inotify_init1(IN_CLOEXEC);
    if (editor < 0) return 6;
    for (const auto& h : headers)
      if (::inotify_add_watch(editor, h.c_str(), IN_MODIFY) < 0) return 7;  // ENOSPC on the unbounded engine
    return 0;
  });
  if (rc == 77) {
    WARN("skipped: no user namespace here (unshare(CLONE_NEWUSER) or /proc/sys/user/max_inotify_watches refused)");
    return;
  }
  CHECK(rc == 0);
}
