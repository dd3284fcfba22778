// util::ChangeWatch: a proof holds until inotify reports a change to what it watched.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

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

TEST_CASE("once the watch limit is hit, a watch gives up for good instead of retrying on every hit",
          "[util][change_watch]") {
  Tree t;
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(t.path("h" + std::to_string(i) + ".h"));
    util::write_file(files.back(), "x");
  }
  util::ChangeWatch w(4);  // the folders on the way take some of them
  w.enable();
  CHECK_FALSE(w.watch(files, {}));
  const size_t held = w.watch_count();
  CHECK_FALSE(w.watch({files[0]}, {}));  // asks nothing of inotify now
  CHECK(w.watch_count() == held);
}
