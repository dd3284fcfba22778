#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/maintenance.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

const std::string kKeyA(64, 'a');
const std::string kKeyB = std::string(16, 'a') + std::string(48, 'b');  // same 16-hex prefix as kKeyA

struct Fixture {
  util::TempDir tmp;
  std::string root_path = util::join_path(tmp.path(), "cache");
  Store store{open_root(root_path, true)};

  // Builds `content` in a staging dir and publishes it as <name>_<key16>/<name>.so.
  PublishResult publish(const std::string& name, const std::string& key, const std::string& content,
                        std::vector<HeaderRecord> headers = {}) {
    Staging s = store.stage();
    std::string built = util::join_path(s.build_dir(), name + ".so");
    util::write_file(built, content);
    EntryRecord rec;
    rec.kind = "module";
    rec.name = name;
    rec.key = key;
    rec.headers = std::move(headers);
    return store.publish(s, store.module_entry_dir(name, key), rec, {{built, name + ".so"}});
  }
};

void set_mtime(const std::string& path, time_t t) {
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  REQUIRE(::utimes(path.c_str(), tv) == 0);
}

}  // namespace

TEST_CASE("a new cache root is created private (0700)", "[cache][root]") {
  util::TempDir tmp;
  std::string path = util::join_path(tmp.path(), "a/b/cache");
  CacheRoot r = open_root(path, true);
  CHECK(r.writable);
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("a cache root writable by group or others is refused with exit 5", "[cache][root]") {
  util::TempDir tmp;
  std::string path = util::join_path(tmp.path(), "shared");
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(::chmod(path.c_str(), 0777) == 0);
  try {
    open_root(path, true);
    FAIL("an others-writable root was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK(std::string(e.what()).find("chmod go-w") != std::string::npos);
  }
  REQUIRE(::chmod(path.c_str(), 0770) == 0);
  CHECK_THROWS_AS(open_root(path, true), Error);
}

TEST_CASE("a cache root owned by another user is refused", "[cache][root]") {
  if (::geteuid() != 0) {
    // Non-root cannot give a directory away; a root-owned system directory stands in.
    CHECK_THROWS_AS(open_root("/", false), Error);
    return;
  }
  util::TempDir tmp;
  std::string path = util::join_path(tmp.path(), "foreign");
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_AS(open_root(path, true), Error);
}

TEST_CASE("a root that cannot be created is reported unwritable, not an error", "[cache][root]") {
  util::TempDir tmp;
  std::string file = util::join_path(tmp.path(), "file");
  util::write_file(file, "x");
  CacheRoot r = open_root(util::join_path(file, "cache"), true);  // ENOTDIR even for root
  CHECK_FALSE(r.writable);
  CHECK_FALSE(r.unwritable_why.empty());
}

TEST_CASE("root resolution: --cache-dir, TVMFFI_JIT_CACHE_DIR, XDG_CACHE_HOME, HOME", "[cache][root]") {
  ::setenv("TVMFFI_JIT_CACHE_DIR", "/env/cache", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(resolve_root_path("/flag") == "/flag");
  CHECK(resolve_root_path("") == "/env/cache");
  ::unsetenv("TVMFFI_JIT_CACHE_DIR");
  CHECK(resolve_root_path("") == "/xdg/tvmffi-jit");
  ::unsetenv("XDG_CACHE_HOME");
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/u", 1);
  CHECK(resolve_root_path("") == "/home/u/.cache/tvmffi-jit");
  if (!home.empty()) ::setenv("HOME", home.c_str(), 1);
}

TEST_CASE("entry names cannot escape the root", "[cache][root]") {
  for (const char* bad : {"", ".", "..", "../x", "a/b", ".hidden", "a b", "x\n"}) {
    INFO(bad);
    CHECK_FALSE(is_valid_entry_name(bad));
  }
  CHECK(is_valid_entry_name("add_one-v2.1"));
  Fixture f;
  CHECK_THROWS_AS(f.store.module_entry_dir("../evil", kKeyA), Error);
}

TEST_CASE("a published entry is found with its artifact, and nothing else is", "[cache][store]") {
  Fixture f;
  std::string dir = f.store.module_entry_dir("m", kKeyA);
  CHECK_FALSE(f.store.lookup(dir, kKeyA).hit);
  PublishResult p = f.publish("m", kKeyA, "binary");
  CHECK(p.ours);
  CHECK(p.entry_dir == dir);
  LookupResult r = f.store.lookup(dir, kKeyA);
  REQUIRE(r.hit);
  CHECK(util::read_file(r.artifact_path()) == "binary");
  CHECK(r.entry->artifacts[0].sha256 == util::sha256_hex("binary"));
  CHECK(r.entry->artifacts[0].size == 6);
  // Same 16-hex prefix, different full key: not a hit.
  CHECK_FALSE(f.store.lookup(dir, kKeyB).hit);
  // Nothing is left behind in tmp/.
  CHECK(list_entries(f.store.root(), true).size() == 1);
}

TEST_CASE("a second publisher of the same key discards its copy and uses the first", "[cache][store]") {
  Fixture f;
  Staging late = f.store.stage();
  std::string built = util::join_path(late.build_dir(), "m.so");
  util::write_file(built, "second");
  PublishResult first = f.publish("m", kKeyA, "first");
  EntryRecord rec;
  rec.kind = "module";
  rec.name = "m";
  rec.key = kKeyA;
  PublishResult second = f.store.publish(late, f.store.module_entry_dir("m", kKeyA), rec, {{built, "m.so"}});
  CHECK(first.ours);
  CHECK_FALSE(second.ours);
  CHECK(util::read_file(util::join_path(second.entry_dir, "m.so")) == "first");
}

TEST_CASE("a truncated artifact is a miss and a republish replaces the entry", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "0123456789");
  std::string art = util::join_path(p.entry_dir, "m.so");
  util::write_file(art, "01234");
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK(r.corrupt);
  CHECK(r.miss_reason.find("5 bytes") != std::string::npos);
  PublishResult again = f.publish("m", kKeyA, "0123456789");
  CHECK(again.ours);
  CHECK(f.store.lookup(p.entry_dir, kKeyA).hit);
}

TEST_CASE("a missing artifact or entry.json is a miss", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "x");
  REQUIRE(::unlink(util::join_path(p.entry_dir, "m.so").c_str()) == 0);
  CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).hit);
  f.publish("m", kKeyA, "x");
  REQUIRE(::unlink(util::join_path(p.entry_dir, "entry.json").c_str()) == 0);
  CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).hit);
  util::write_file(util::join_path(p.entry_dir, "entry.json"), "{\"format_version\": 99}");
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK(r.miss_reason.find("format 99") != std::string::npos);
}

TEST_CASE("an entry whose recorded header changed is a miss; touching it is not", "[cache][store]") {
  Fixture f;
  std::string h = util::join_path(f.tmp.path(), "h.h");
  util::write_file(h, "#define X 1\n");
  auto headers = hash_headers({h}, "/", {}, {});
  REQUIRE(headers.size() == 1);
  PublishResult p = f.publish("m", kKeyA, "x", headers);
  CHECK(f.store.lookup(p.entry_dir, kKeyA).hit);
  set_mtime(h, 1000000000);
  CHECK(f.store.lookup(p.entry_dir, kKeyA).hit);
  util::write_file(h, "#define X 2\n");  // same size: only the hash tells
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK_FALSE(r.corrupt);
  CHECK(r.miss_reason.find(h) != std::string::npos);
  REQUIRE(::unlink(h.c_str()) == 0);
  CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).hit);
}

TEST_CASE("hash_headers skips generated files and the translation unit", "[cache][headers]") {
  util::TempDir tmp;
  std::string build = util::join_path(tmp.path(), "build");
  util::make_directories(build);
  util::write_file(util::join_path(build, "gen.h"), "g");
  util::write_file(util::join_path(tmp.path(), "a.cc"), "a");
  util::write_file(util::join_path(tmp.path(), "h.h"), "h");
  auto recs = hash_headers({"gen.h", util::join_path(tmp.path(), "a.cc"), util::join_path(tmp.path(), "h.h")}, build,
                           {build}, {util::join_path(tmp.path(), "a.cc")});
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].path == util::join_path(tmp.path(), "h.h"));
  CHECK(recs[0].sha256 == util::sha256_hex("h"));
  CHECK_THROWS_AS(hash_headers({"/nonexistent/x.h"}, "/", {}, {}), Error);
}

TEST_CASE("parse_depfile reads gcc and nvcc depfiles", "[cache][headers]") {
  std::string gcc = "cpp_0.o: /src/a.cc /src/h.h \\\n /inc/with\\ space.h \\\n /inc/d$$.h\n/src/h.h:\n";
  CHECK(parse_depfile(gcc) == std::vector<std::string>{"/src/a.cc", "/src/h.h", "/inc/with space.h", "/inc/d$.h"});
  std::string nvcc = "k.o : k.cu \\\r\n    /usr/local/cuda/include/cuda_runtime.h \\\r\n    k.h\r\n";
  CHECK(parse_depfile(nvcc) == std::vector<std::string>{"k.cu", "/usr/local/cuda/include/cuda_runtime.h", "k.h"});
  CHECK(parse_depfile("").empty());
  CHECK(parse_depfile("a.o:\n").empty());
}

TEST_CASE("verify finds a flipped byte; --remove deletes only the bad entry", "[cache][maintenance]") {
  Fixture f;
  PublishResult good = f.publish("good", kKeyA, "good bytes");
  PublishResult bad = f.publish("bad", kKeyA, "bad bytes!");
  util::write_file(util::join_path(bad.entry_dir, "bad.so"), "bad bytes?");  // same size, other content
  CHECK(f.store.lookup(bad.entry_dir, kKeyA).hit);  // the size check cannot see it...
  VerifyReport r = verify_cache(f.store, false);  // ...verify can
  CHECK(r.checked == 2);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].dir == bad.entry_dir);
  CHECK(r.problems[0].problem.find("SHA-256") != std::string::npos);
  VerifyReport removed = verify_cache(f.store, true);
  CHECK(removed.problems.size() == 1);
  CHECK(removed.problems[0].removed);
  CHECK_FALSE(util::path_exists(bad.entry_dir));
  CHECK(util::path_exists(good.entry_dir));
  CHECK(verify_cache(f.store, false).problems.empty());
}

TEST_CASE("cleaning never follows a symlink planted in the root", "[cache][maintenance]") {
  Fixture f;
  util::TempDir outside;
  std::string precious = util::join_path(outside.path(), "precious");
  util::write_file(precious, "keep me");
  std::string link = util::join_path(f.store.root(), "evil_" + kKeyA.substr(0, 16));
  REQUIRE(::symlink(outside.path().c_str(), link.c_str()) == 0);
  f.publish("m", kKeyA, "x");
  CHECK_FALSE(f.store.lookup(link, kKeyA).hit);
  VerifyReport v = verify_cache(f.store, false);
  CHECK(v.problems.size() == 1);
  CleanReport c = clean_cache(f.store, std::nullopt);
  CHECK(c.entries_removed == 2);
  CHECK_FALSE(util::path_exists(link));
  CHECK(util::read_file(precious) == "keep me");
}

TEST_CASE("clean --older-than keeps recently used entries", "[cache][maintenance]") {
  Fixture f;
  PublishResult old_entry = f.publish("old", kKeyA, "o");
  PublishResult new_entry = f.publish("new", kKeyA, "n");
  set_mtime(old_entry.entry_dir, ::time(nullptr) - 10 * 86400);
  CleanReport c = clean_cache(f.store, 86400);
  CHECK(c.entries_removed == 1);
  CHECK_FALSE(util::path_exists(old_entry.entry_dir));
  CHECK(util::path_exists(new_entry.entry_dir));
  // A hit refreshes the last-use time.
  set_mtime(new_entry.entry_dir, ::time(nullptr) - 10 * 86400);
  REQUIRE(f.store.lookup(new_entry.entry_dir, kKeyA).hit);
  CHECK(clean_cache(f.store, 86400).entries_removed == 0);
}

TEST_CASE("gc removes least recently used entries down to the size limit", "[cache][maintenance]") {
  Fixture f;
  std::vector<PublishResult> ps;
  for (int i = 0; i < 4; ++i) {
    ps.push_back(f.publish("m" + std::to_string(i), kKeyA, std::string(1000, 'x')));
    set_mtime(ps.back().entry_dir, ::time(nullptr) - 1000 + i);  // m0 oldest
  }
  uint64_t entry_bytes = list_entries(f.store.root(), true)[0].bytes;
  CleanReport r = gc_cache(f.store, 2 * entry_bytes + 10);
  CHECK(r.entries_removed == 2);
  CHECK_FALSE(util::path_exists(ps[0].entry_dir));
  CHECK_FALSE(util::path_exists(ps[1].entry_dir));
  CHECK(util::path_exists(ps[2].entry_dir));
  CHECK(util::path_exists(ps[3].entry_dir));
  CHECK(r.bytes_kept <= 2 * entry_bytes + 10);
}

TEST_CASE("abandoned staging dirs of dead processes are cleaned, live ones kept", "[cache][maintenance]") {
  Fixture f;
  Staging live = f.store.stage();
  live.keep();
  pid_t child = ::fork();
  if (child == 0) {
    Staging s = f.store.stage();
    s.keep();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CleanReport r = gc_cache(f.store, 1ull << 40);
  CHECK(r.temporaries_removed == 1);
  CHECK(util::path_exists(live.path()));
  util::remove_all(live.path());
}

TEST_CASE("stats survive concurrent updates from many processes, with and without folds", "[cache][stats]") {
  // kStatsFoldBytes: appends only; 64: a fold every few lines, so folds and
  // appends interleave constantly.
  const uint64_t fold_bytes = GENERATE(kStatsFoldBytes, uint64_t(64));
  Fixture f;
  constexpr int kProcs = 8, kEach = 40;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      StatsCounters d;
      d.hits = 1;
      d.bytes_stored = 3;
      for (int i = 0; i < kEach; ++i) add_stats(f.store.root(), d, fold_bytes);
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    ::waitpid(k, &st, 0);
    CHECK(WIFEXITED(st));
  }
  StatsCounters s = read_stats(f.store.root());
  CHECK(s.hits == kProcs * kEach);
  CHECK(s.bytes_stored == 3u * kProcs * kEach);
  fold_stats(f.store.root());
  CHECK(read_stats(f.store.root()).hits == kProcs * kEach);
  CHECK_FALSE(util::path_exists(util::join_path(f.store.root(), "stats.log")));
  zero_stats(f.store.root());
  CHECK(read_stats(f.store.root()).empty());
}

TEST_CASE("a journal left by a fold killed half-way is counted exactly once", "[cache][stats]") {
  Fixture f;
  const std::string root = f.store.root();
  // A fold renamed its journal to generation 4 and died before writing the
  // totals (not counted yet); an older one died after writing them (counted).
  util::write_file(util::join_path(root, "stats.json"), R"({"hits": 10, "generation": 3})");
  util::write_file(util::join_path(root, "stats.log.3"), "{\"hits\":5}\n");
  util::write_file(util::join_path(root, "stats.log.4"), "{\"hits\":2}\n{\"misses\":1}\n");
  util::write_file(util::join_path(root, "stats.log"), "{\"hits\":1}\n{\"hits\":1,\"mis");  // torn last line
  fold_stats(root);
  StatsCounters s = read_stats(root);
  CHECK(s.hits == 13);
  CHECK(s.misses == 1);
  CHECK_FALSE(util::path_exists(util::join_path(root, "stats.log.3")));
  CHECK_FALSE(util::path_exists(util::join_path(root, "stats.log.4")));
  fold_stats(root);  // idempotent
  CHECK(read_stats(root).hits == 13);
}

TEST_CASE("a root opened without the write probe is probed on demand", "[cache][root]") {
  util::TempDir tmp;
  std::string file = util::join_path(tmp.path(), "file");
  util::write_file(file, "x");
  CacheRoot r = open_root(util::join_path(tmp.path(), "cache"), true, false);
  CHECK(r.writable);
  CHECK_FALSE(r.write_probed);
  Store s{r};
  CHECK(s.check_writable());
  // A root that cannot even be created needs no probe to say why.
  CacheRoot bad = open_root(util::join_path(file, "cache"), true, false);
  CHECK_FALSE(bad.writable);
  CHECK(bad.write_probed);
  CHECK_THAT(bad.unwritable_why, Catch::Contains("cannot create the cache root"));
}
