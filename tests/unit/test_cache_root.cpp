// The cache root's markers (CACHEDIR.TAG + TVMFFI_JIT_CACHE): what makes a
// directory a cache that maintenance may delete in, and which directories
// are never a cache.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>
#include <string>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

std::string marker(const std::string& root) { return util::join_path(root, kRootMarkerName); }
std::string tag(const std::string& root) { return util::join_path(root, kCacheDirTagName); }

ExitCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ExitCode::kOk;
}

}  // namespace

TEST_CASE("a root the build creates carries CACHEDIR.TAG with the spec's signature and the layout marker",
          "[cache][root]") {
  util::TempDir tmp;
  std::string path = util::join_path(tmp.path(), "cache");
  CacheRoot r = open_root(path, true);
  CHECK(r.marked);
  CHECK(r.layout == kRootLayout);
  CHECK(util::starts_with(util::read_file(tag(path)), "Signature: 8a477f597d28d172789f06886806bc55"));
  CHECK(util::starts_with(util::read_file(marker(path)), "tvmffi-jit cache layout 1\n"));
  CHECK(open_root(path, false).marked);
  CHECK(require_marked_root(open_root(path, false)));
}

TEST_CASE("a build adopts an unmarked root holding only cache names, and refuses one holding anything else",
          "[cache][root]") {
  util::TempDir tmp;
  // A root written by a tvmffi-jit from before the markers.
  std::string old_root = util::join_path(tmp.path(), "old");
  for (const char* d : {"objects/ab", "compilers", "locks", "tmp", "m_0123456789abcdef"})
    util::make_directories(util::join_path(old_root, d), 0700);
  util::write_file(util::join_path(old_root, "stats.json"), "{}");
  util::write_file(util::join_path(old_root, "stats.log.3"), "");
  ::chmod(old_root.c_str(), 0700);
  CHECK_FALSE(open_root(old_root, false).marked);  // reading never marks
  CHECK_FALSE(util::path_exists(marker(old_root)));
  CHECK(open_root(old_root, true).marked);
  CHECK(util::path_exists(marker(old_root)));

  // A directory of the user's: not taken over, not written into.
  std::string project = util::join_path(tmp.path(), "project");
  util::make_directories(util::join_path(project, "tmp"), 0700);
  util::write_file(util::join_path(project, "notes.txt"), "mine");
  ::chmod(project.c_str(), 0700);
  try {
    open_root(project, true);
    FAIL("an unmarked directory with a user's file was taken as a cache root");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK_THAT(e.what(), Catch::Contains("notes.txt") && Catch::Contains("not a tvmffi-jit cache"));
  }
  CHECK_FALSE(util::path_exists(marker(project)));
  CHECK_FALSE(util::path_exists(tag(project)));
}

TEST_CASE("deleting commands refuse an unmarked root; a missing root has nothing to delete", "[cache][root]") {
  util::TempDir tmp;
  std::string plain = util::join_path(tmp.path(), "plain");
  util::make_directories(plain, 0700);
  CacheRoot r = open_root(plain, false);
  CHECK_FALSE(r.marked);
  CHECK(code_of([&] { require_marked_root(r); }) == ExitCode::kIo);
  // A CACHEDIR.TAG alone (another tool's cache) is not ours.
  util::write_file(tag(plain), "Signature: 8a477f597d28d172789f06886806bc55\n");
  CHECK(code_of([&] { require_marked_root(open_root(plain, false)); }) == ExitCode::kIo);
  // Another layout: written by another version of the tool.
  util::write_file(marker(plain), "tvmffi-jit cache layout 7\n");
  CacheRoot other = open_root(plain, false);
  CHECK(other.marked);
  CHECK(other.layout == 7);
  CHECK(code_of([&] { require_marked_root(other); }) == ExitCode::kIo);
  CHECK_FALSE(require_marked_root(open_root(util::join_path(tmp.path(), "missing"), false)));
}

TEST_CASE("the home directory and the filesystem root are never a cache root, marked or not", "[cache][root]") {
  util::TempDir tmp;
  std::string home = util::join_path(tmp.path(), "home");
  util::make_directories(home, 0700);
  write_root_markers(home);  // even a marked home directory
  // $HOME (the environment's, given by the CLI) is refused by whoever opens
  // the root; open_root() refuses the passwd entry's home and `/` itself.
  try {
    refuse_home_directory(home + "/", home);
    FAIL("the home directory was accepted as a cache root");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK_THAT(e.what(), Catch::Contains("home directory"));
  }
  for (bool create : {true, false}) {
    INFO(create);
    CHECK(code_of([&] { open_root("/", create); }) == ExitCode::kIo);
  }
  // A directory below the home directory is fine.
  CHECK_NOTHROW(refuse_home_directory(util::join_path(home, ".cache/tvmffi-jit"), home));
  CHECK(open_root(util::join_path(home, ".cache/tvmffi-jit"), true).marked);
}

TEST_CASE("threads of one process creating and probing one new root all find it writable and marked",
          "[cache][root]") {
  // The modules of a batch open a new root at once; a write probe named by
  // pid alone collided between them (EEXIST: "building without caching").
  util::TempDir tmp;
  for (int round = 0; round < 5; ++round) {
    const std::string path = util::join_path(tmp.path(), "fresh" + std::to_string(round) + "/sub/cache");
    std::atomic<int> ready{0};
    std::atomic<int> unwritable{0}, unmarked{0}, threw{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&] {
        ++ready;
        while (ready.load() < 8) std::this_thread::yield();  // start together
        try {
          CacheRoot r = open_root(path, true, true);
          if (!r.writable) ++unwritable;
          if (!r.marked) ++unmarked;
          for (int k = 0; k < 300; ++k) {
            probe_root_writable(r);
            if (!r.writable) ++unwritable;
          }
        } catch (const Error&) {
          ++threw;
        }
      });
    for (auto& t : threads) t.join();
    CHECK(unwritable == 0);
    CHECK(unmarked == 0);
    CHECK(threw == 0);
  }
}
