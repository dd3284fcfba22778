#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "compile/search_dirs.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/maintenance.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/change_watch.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;
using tvmffi_jit::compile::record_library_shadows;  // the include-search rules are compile's
using tvmffi_jit::compile::record_shadows;

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
    return store.publish_result(s, store.module_key_dir(name, key), rec, {{built, name + ".so"}});
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
  RootEnvironment env{"/env/cache", "/xdg", "/home/u"};
  CHECK(resolve_root_path("/flag", env) == "/flag");
  CHECK(resolve_root_path("", env) == "/env/cache");
  env.cache_dir = "";  // empty is unset
  CHECK(resolve_root_path("", env) == "/xdg/tvmffi-jit");
  CHECK(user_toolchain_memo_dir(env) == "/xdg/tvmffi-jit-toolchain");
  env.xdg_cache_home = "relative/xdg";  // the XDG spec ignores a relative one
  CHECK(resolve_root_path("", env) == "/home/u/.cache/tvmffi-jit");
  env.xdg_cache_home.reset();
  CHECK(resolve_root_path("", env) == "/home/u/.cache/tvmffi-jit");
  CHECK(user_toolchain_memo_dir(env) == "/home/u/.cache/tvmffi-jit-toolchain");
}

TEST_CASE("entry names cannot escape the root", "[cache][root]") {
  for (const char* bad : {"", ".", "..", "../x", "a/b", ".hidden", "a b", "x\n"}) {
    INFO(bad);
    CHECK_FALSE(is_valid_entry_name(bad));
  }
  CHECK(is_valid_entry_name("add_one-v2.1"));
  Fixture f;
  CHECK_THROWS_AS(f.store.module_key_dir("../evil", kKeyA), Error);
}

TEST_CASE("a published entry is found with its artifact, and nothing else is", "[cache][store]") {
  Fixture f;
  std::string dir = f.store.module_key_dir("m", kKeyA);
  CHECK_FALSE(f.store.lookup(dir, kKeyA).hit);
  CHECK_FALSE(f.store.find_result(dir, kKeyA).hit);
  PublishResult p = f.publish("m", kKeyA, "binary");
  CHECK(p.ours);
  // A result directory inside the key's, named by its content.
  CHECK(p.entry_dir == util::join_path(dir, result_dir_name(result_id(p.entry))));
  LookupResult r = f.store.find_result(dir, kKeyA);
  REQUIRE(r.hit);
  CHECK(r.entry_dir == p.entry_dir);
  CHECK(util::read_file(r.artifact_path()) == "binary");
  CHECK(r.entry->artifacts[0].sha256 == util::sha256_hex("binary"));
  CHECK(r.entry->artifacts[0].size == 6);
  // Same 16-hex prefix, different full key: not a hit.
  CHECK_FALSE(f.store.find_result(dir, kKeyB).hit);
  // Nothing is left behind in tmp/.
  CHECK(list_entries(f.store.root(), true).size() == 1);
}

TEST_CASE("a second publisher of the same result discards its copy and uses the first", "[cache][store]") {
  Fixture f;
  Staging late = f.store.stage();
  std::string built = util::join_path(late.build_dir(), "m.so");
  util::write_file(built, "same bytes");
  PublishResult first = f.publish("m", kKeyA, "same bytes");
  const auto first_inode = util::file_stamp(util::join_path(first.entry_dir, "m.so"))->inode;
  EntryRecord rec;
  rec.kind = "module";
  rec.name = "m";
  rec.key = kKeyA;
  PublishResult second = f.store.publish_result(late, f.store.module_key_dir("m", kKeyA), rec, {{built, "m.so"}});
  CHECK(first.ours);
  CHECK_FALSE(second.ours);
  CHECK(second.entry_dir == first.entry_dir);
  // The first file stays where it is: a process that mapped it is not disturbed.
  CHECK(util::file_stamp(util::join_path(second.entry_dir, "m.so"))->inode == first_inode);
}

TEST_CASE("other content for the same key is another result at another path; both stay", "[cache][store][results]") {
  Fixture f;
  PublishResult one = f.publish("m", kKeyA, "first");
  PublishResult two = f.publish("m", kKeyA, "second");
  CHECK((one.ours && two.ours));
  CHECK(one.entry_dir != two.entry_dir);
  CHECK(util::read_file(util::join_path(one.entry_dir, "m.so")) == "first");
  CHECK(util::read_file(util::join_path(two.entry_dir, "m.so")) == "second");
  CHECK(list_entries(f.store.root(), false).size() == 2);
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

TEST_CASE("a header's stat shortcut is recorded only for old files and never hides a rewrite",
          "[cache][headers]") {
  util::TempDir tmp;
  const std::string h = util::join_path(tmp.path(), "h.h");
  util::write_file(h, "int a = 1;\n");
  // Just written: too new to trust its stat; a lookup re-hashes it.
  auto fresh = hash_headers({h}, "/", {}, {});
  REQUIRE(fresh.size() == 1);
  CHECK(fresh[0].stat.empty());
  CHECK(check_headers(fresh));

  ::usleep(static_cast<useconds_t>(kTrustedStatAgeSeconds * 1000000 + 200000));
  auto old = hash_headers({h}, "/", {}, {});
  REQUIRE(old.size() == 1);
  CHECK_FALSE(old[0].stat.empty());
  CHECK(check_headers(old));  // same file, same stat: a hit without re-hashing

  // An adopted record (no stat: stats never travel) gets this machine's stat
  // once its re-hash matches, and only then.
  auto adopted = old;
  adopted[0].stat.clear();
  CHECK(check_and_stamp_headers(adopted));
  CHECK(adopted[0].stat == old[0].stat);
  auto wrong = old;
  wrong[0].stat.clear();
  wrong[0].sha256 = util::sha256_hex("int a = 9;\n");
  CHECK_FALSE(check_and_stamp_headers(wrong));
  CHECK(wrong[0].stat.empty());

  // Same size, mtime set back to the recorded one: ctime still moves, so the
  // stat differs and the re-hash finds the change.
  struct stat before;
  REQUIRE(::stat(h.c_str(), &before) == 0);
  util::write_file(h, "int a = 2;\n");
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, h.c_str(), times, 0) == 0);
  auto held = check_headers(old);
  REQUIRE_FALSE(held);
  CHECK(held.why().find("changed") != std::string::npos);

  // A recorded stat that no longer matches is not trusted either: the hash decides.
  auto forged = old;
  forged[0].stat = "0:0:0:0";
  forged[0].sha256 = util::sha256_hex("int a = 2;\n");
  CHECK(check_headers(forged));
}

TEST_CASE("a header found behind an earlier include directory misses once that directory holds its name",
          "[cache][headers]") {
  Fixture f;
  const std::string inc1 = util::join_path(f.tmp.path(), "inc1"), inc2 = util::join_path(f.tmp.path(), "inc2");
  util::make_directories(inc1);
  util::make_directories(util::join_path(inc2, "sub"));
  util::write_file(util::join_path(inc2, "dep.h"), "#define DEP 2\n");
  util::write_file(util::join_path(inc2, "sub/s.h"), "#define S 2\n");
  auto headers = hash_headers({util::join_path(inc2, "dep.h"), util::join_path(inc2, "sub/s.h")}, "/", {}, {});
  record_shadows(headers, {inc1, inc2 + "/"});
  REQUIRE(headers.size() == 2);
  CHECK(headers[0].shadows == std::vector<std::string>{util::join_path(inc1, "dep.h")});
  CHECK(headers[1].shadows == std::vector<std::string>{util::join_path(inc1, "sub/s.h")});

  headers[1].shadows.push_back(util::join_path(inc1, "sub/\xff.h"));  // not UTF-8: stored as hex
  PublishResult p = f.publish("m", kKeyA, "x", headers);
  LookupResult first = f.store.lookup(p.entry_dir, kKeyA);
  REQUIRE(first.hit);
  CHECK(first.entry->headers[0].shadows == headers[0].shadows);  // read back from entry.json
  CHECK(first.entry->headers[1].shadows == headers[1].shadows);

  util::make_directories(util::join_path(inc1, "sub"));  // a directory alone shadows nothing
  CHECK(f.store.lookup(p.entry_dir, kKeyA).hit);
  util::write_file(util::join_path(inc1, "sub/s.h"), "#define S 1\n");
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK_FALSE(r.corrupt);
  CHECK(r.miss_reason == "header " + util::join_path(inc1, "sub/s.h") + " now shadows " + util::join_path(inc2, "sub/s.h"));
}

TEST_CASE("a header reached through a symlink then .. is recorded, and shadowed, where the compiler read it",
          "[cache][headers]") {
  // -I<d>/inc/link/.. with link -> real/inner: the compiler reads real/val.h; inc/val.h is a decoy
  // that a lexical clean-up of the depfile's path would record instead.
  Fixture f;
  const std::string d = util::canonical_path(f.tmp.path());
  const std::string first = util::join_path(d, "first"), real = util::join_path(d, "real");
  util::make_directories(first);
  util::make_directories(util::join_path(real, "inner"));
  util::make_directories(util::join_path(d, "inc"));
  REQUIRE(::symlink(util::join_path(real, "inner").c_str(), util::join_path(d, "inc/link").c_str()) == 0);
  util::write_file(util::join_path(real, "val.h"), "#define VALUE 1\n");
  util::write_file(util::join_path(d, "inc/val.h"), "#define VALUE 99\n");
  const std::string dotdot = util::join_path(d, "inc/link/..");
  auto headers = hash_headers({dotdot + "/val.h"}, "/", {}, {});
  REQUIRE(headers.size() == 1);
  CHECK(headers[0].path == util::join_path(real, "val.h"));
  CHECK(headers[0].sha256 == util::sha256_hex("#define VALUE 1\n"));
  // The search directory is the one the compiler searched: the header is under it, and an
  // earlier directory gets its shadow candidate.
  record_shadows(headers, {first, dotdot});
  CHECK(headers[0].shadows == std::vector<std::string>{util::join_path(first, "val.h")});
  // Relative to the folder the compile ran in, the same.
  CHECK(hash_headers({"inc/link/../val.h"}, d, {}, {}).at(0).path == util::join_path(real, "val.h"));
}

TEST_CASE("shadow candidates: only earlier directories, only names absent when recorded, merged per path",
          "[cache][headers]") {
  util::TempDir tmp;
  const std::string a = util::join_path(tmp.path(), "a"), b = util::join_path(tmp.path(), "b"),
                    c = util::join_path(tmp.path(), "c");
  for (const auto& d : {a, b, c}) util::make_directories(d);
  util::write_file(util::join_path(a, "h.h"), "a");  // exists now: this compile did not skip it for b/h.h
  util::write_file(util::join_path(b, "h.h"), "b");
  util::write_file(util::join_path(c, "first.h"), "c");
  auto headers = hash_headers({util::join_path(b, "h.h"), util::join_path(c, "first.h")}, "/", {}, {});
  record_shadows(headers, {c, a, b});
  CHECK(headers[0].shadows == std::vector<std::string>{util::join_path(c, "h.h")});
  CHECK(headers[1].shadows.empty());  // found in the first directory searched

  // A header outside every search directory (a system header) has none.
  auto sys = hash_headers({util::join_path(c, "first.h")}, "/", {}, {});
  record_shadows(sys, {a, b});
  CHECK(sys[0].shadows.empty());

  // Two units searching different directories: one record, both units' candidates.
  std::vector<HeaderRecord> into = headers;
  std::vector<HeaderRecord> other = headers;
  other[0].shadows = {util::join_path(tmp.path(), "d/h.h"), util::join_path(c, "h.h")};
  merge_headers(into, other);
  REQUIRE(into.size() == 2);
  CHECK(into[0].shadows == std::vector<std::string>{util::join_path(c, "h.h"), util::join_path(tmp.path(), "d/h.h")});
}

TEST_CASE("a library found through a later -L directory misses once an earlier one holds libX.so or libX.a",
          "[cache][headers]") {
  Fixture f;
  const std::string l1 = util::join_path(f.tmp.path(), "l1"), l2 = util::join_path(f.tmp.path(), "l2");
  util::make_directories(l1);
  util::make_directories(l2);
  util::write_file(util::join_path(l2, "libdep.a"), "!<arch>\n");
  util::write_file(util::join_path(f.tmp.path(), "crt1.o"), "o");  // given whole, not through -l
  auto libs = hash_headers({util::join_path(l2, "libdep.a"), util::join_path(f.tmp.path(), "crt1.o")}, "/", {}, {});
  record_library_shadows(libs, {l1, l2});
  CHECK(libs[0].shadows == std::vector<std::string>{util::join_path(l1, "libdep.so"), util::join_path(l1, "libdep.a"),
                                                    util::join_path(l2, "libdep.so")});
  CHECK(libs[1].shadows.empty());
  PublishResult p = f.publish("m", kKeyA, "x", libs);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  util::write_file(util::join_path(l2, "libdep.so"), "elf");  // ld prefers the shared library of one directory
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK(r.miss_reason.find("libdep.so now shadows") != std::string::npos);
}

TEST_CASE("a big file's digest is remembered per machine, so a record without a stat is not re-hashed",
          "[cache][headers]") {
  util::TempDir tmp;
  const std::string lib = util::join_path(tmp.path(), "libbig.so");
  util::write_file(lib, std::string(kMemoMinBytes, 'x'));
  struct stat st;
  REQUIRE(::stat(lib.c_str(), &st) == 0);
  struct timespec old_times[2] = {{st.st_mtim.tv_sec - 10, 0}, {st.st_mtim.tv_sec - 10, 0}};
  REQUIRE(::utimensat(AT_FDCWD, lib.c_str(), old_times, 0) == 0);
  ::usleep(static_cast<useconds_t>(kTrustedStatAgeSeconds * 1000000 + 200000));  // ctime must be old too
  DigestMemo memo{util::join_path(tmp.path(), "digests"), true};
  auto built = hash_headers({lib}, "/", {}, {}, memo);
  REQUIRE(!built[0].stat.empty());

  // What a remote entry carries: digest, no stat. The memo answers, and the
  // adopted record gets this machine's stat.
  auto adopted = built;
  adopted[0].stat.clear();
  util::ProvenDigests::global().clear();  // this process's memo of the hash above: the root's memo is under test
  CHECK(check_and_stamp_headers(adopted, {memo.dir, false}));
  CHECK(adopted[0].stat == built[0].stat);
  // It is the memo that answered, not a re-hash: the one memo file names
  // these bytes' digest; made to name another, the same record misses.
  std::vector<std::string> memo_files;
  for (const auto& e : std::filesystem::directory_iterator(memo.dir)) memo_files.push_back(e.path().string());
  REQUIRE(memo_files.size() == 1);
  const std::string memo_file = memo_files[0];
  const std::string text = util::read_file(memo_file);
  std::string forged = text;
  const size_t at = forged.find(built[0].sha256);
  REQUIRE(at != std::string::npos);
  forged.replace(at, built[0].sha256.size(), util::sha256_hex("other"));
  util::write_file(memo_file, forged);
  adopted[0].stat.clear();
  util::ProvenDigests::global().clear();
  CHECK_FALSE(check_headers(adopted, {memo.dir, false}));
  util::write_file(memo_file, text);
  // A remembered digest never hides a change: a rewrite moves the stat, and
  // a record of other bytes is a miss whatever the memo says.
  auto other = built;
  other[0].stat.clear();
  other[0].sha256 = util::sha256_hex("something else");
  CHECK_FALSE(check_headers(other, {memo.dir, false}));
  util::write_file(lib, std::string(kMemoMinBytes, 'y'));
  auto stale = built;
  stale[0].stat.clear();
  auto held = check_headers(stale, {memo.dir, false});
  REQUIRE_FALSE(held);
  CHECK(held.why().find("changed") != std::string::npos);
}

TEST_CASE("verify finds a flipped byte; --remove deletes only the bad entry", "[cache][maintenance]") {
  Fixture f;
  PublishResult good = f.publish("good", kKeyA, "good bytes");
  PublishResult bad = f.publish("bad", kKeyA, "bad bytes!");
  util::write_file(util::join_path(bad.entry_dir, "bad.so"), "bad bytes?");  // same size, other content
  // A lookup re-hashes what no settled stamp proves (a just-written file)...
  CHECK_FALSE(f.store.lookup(bad.entry_dir, kKeyA).hit);
  VerifyReport r = verify_cache(f.store, false);  // ...and verify re-hashes everything, stamps or not
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
  CHECK(c.entries_removed == 1);
  CHECK(util::path_exists(link));  // not an entry the tool wrote: left alone, and never followed
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

TEST_CASE("a same-size change of an artifact is a miss, with or without --verify", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "0123456789");
  util::write_file(util::join_path(p.entry_dir, "m.so"), "0123456780");  // same size
  for (bool rehash : {false, true}) {
    LookupOptions o;
    o.rehash_artifacts = rehash;
    LookupResult r = f.store.lookup(p.entry_dir, kKeyA, o);
    CHECK_FALSE(r.hit);
    CHECK(r.corrupt);
    CHECK_THAT(r.miss_reason, Catch::Contains("SHA-256"));
    CHECK(r.rehashed.files == 1);  // the fresh artifact had no stamp to prove it
  }
}

TEST_CASE("an artifact with a missing or malformed stamp is re-hashed, never trusted", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "0123456789");
  const std::string entry_json = util::join_path(p.entry_dir, "entry.json");
  auto j = nlohmann::json::parse(util::read_file(entry_json));
  for (nlohmann::json bad : {nlohmann::json(42), nlohmann::json("not:a:stamp"), nlohmann::json(nullptr)}) {
    j["artifacts"][0]["stat"] = bad;
    util::write_file_atomic(entry_json, j.dump());
    LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
    CHECK(r.hit);
    CHECK(r.rehashed.files == 1);
    CHECK(r.rehashed.bytes == 10);
  }
}

TEST_CASE("a hit serves only an artifact entry.json lists", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "x");
  // A file planted next to the listed artifact is never served.
  util::write_file(util::join_path(p.entry_dir, "other.so"), "planted");
  LookupOptions o;
  o.required_artifacts = {"other.so"};
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA, o);
  CHECK_FALSE(r.hit);
  CHECK(r.corrupt);
  CHECK_THAT(r.miss_reason, Catch::Contains("does not list other.so"));
  o.required_artifacts = {"m.so"};
  LookupResult ok = f.store.lookup(p.entry_dir, kKeyA, o);
  REQUIRE(ok.hit);
  CHECK(ok.artifact_path("m.so") == util::join_path(p.entry_dir, "m.so"));
  CHECK(ok.artifact_path("other.so").empty());
}

TEST_CASE("publishing over an occupant with a same-size corruption replaces it", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "good bytes");
  util::write_file(util::join_path(p.entry_dir, "m.so"), "evil bytes");
  PublishResult again = f.publish("m", kKeyA, "good bytes");
  CHECK(again.ours);
  CHECK(util::read_file(util::join_path(p.entry_dir, "m.so")) == "good bytes");
}

TEST_CASE("an artifact that cannot be published moves out of the root to a directory of the caller's",
          "[cache][store]") {
  Fixture f;
  std::string moved;
  {
    Staging s = f.store.stage();
    std::string built = util::join_path(s.build_dir(), "m.so");
    util::write_file(built, "artifact");
    moved = s.move_artifact_out(built, "m.so", "m");
  }  // the staging dir is gone now
  CHECK(util::read_file(moved) == "artifact");
  CHECK_FALSE(util::starts_with(moved, f.store.root() + "/"));
  CHECK(util::starts_with(util::file_name(util::parent_path(moved)), "tvmffi-jit-m-"));
  CHECK(list_entries(f.store.root(), true).empty());
  util::remove_all(util::parent_path(moved));
}

TEST_CASE("entry.json is read with a size cap and never from a FIFO", "[cache][store]") {
  Fixture f;
  PublishResult p = f.publish("m", kKeyA, "x");
  std::string entry = util::join_path(p.entry_dir, "entry.json");
  // A sparse file far over the cap: refused from its size, not read.
  REQUIRE(::truncate(entry.c_str(), static_cast<off_t>(3ull << 30)) == 0);
  LookupResult big = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(big.hit);
  CHECK_THAT(big.miss_reason, Catch::Contains("more than the"));
  REQUIRE(::unlink(entry.c_str()) == 0);
  REQUIRE(::mkfifo(entry.c_str(), 0600) == 0);  // a blocking read would hang here
  LookupResult fifo = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(fifo.hit);
  CHECK_THAT(fifo.miss_reason, Catch::Contains("not a regular file"));
  // stats files are capped the same way.
  util::write_file(util::join_path(f.store.root(), "stats.json"), "");
  REQUIRE(::truncate(util::join_path(f.store.root(), "stats.json").c_str(), static_cast<off_t>(3ull << 30)) == 0);
  CHECK(read_stats(f.store.root()).empty());
}

TEST_CASE("text that is not UTF-8 is stored: compiler output and flags replaced, header paths exactly",
          "[cache][store]") {
  Fixture f;
  std::string odd_dir = util::join_path(f.tmp.path(), "d\xff\xfe");
  util::make_directories(odd_dir);
  std::string h = util::join_path(odd_dir, "h\xc3.h");
  util::write_file(h, "#define K 1\n");
  Staging s = f.store.stage();
  std::string built = util::join_path(s.build_dir(), "m.so");
  util::write_file(built, "bin");
  EntryRecord rec;
  rec.kind = "module";
  rec.name = "m";
  rec.key = kKeyA;
  rec.headers = hash_headers({h}, "/", {}, {});
  rec.inputs = {{"flags", {"-DX=\xff"}}};
  rec.compiler_output = "warning: \x80\xff odd bytes\n";
  PublishResult p = f.store.publish_result(s, f.store.module_key_dir("m", kKeyA), rec, {{built, "m.so"}});
  LookupResult r = f.store.lookup(p.entry_dir, kKeyA);
  REQUIRE(r.hit);  // the recorded header was found again under its exact bytes
  REQUIRE(r.entry->headers.size() == 1);
  CHECK(r.entry->headers[0].path == h);
  CHECK(r.entry->compiler_output == "warning: \xef\xbf\xbd\xef\xbf\xbd odd bytes\n");
  util::write_file(h, "#define K 2\n");
  CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).hit);
}

// ---- several results per key (cache/results.h) -----------------------------

TEST_CASE("alternating two header revisions hits both ways, each at its own path", "[cache][store][results]") {
  Fixture f;
  const std::string dir = f.store.module_key_dir("m", kKeyA);
  std::string h = util::join_path(f.tmp.path(), "h.h");
  util::write_file(h, "#define X 1\n");
  PublishResult one = f.publish("m", kKeyA, "built with 1", hash_headers({h}, "/", {}, {}));
  util::write_file(h, "#define X 2\n");
  CHECK_FALSE(f.store.find_result(dir, kKeyA).hit);
  PublishResult two = f.publish("m", kKeyA, "built with 2", hash_headers({h}, "/", {}, {}));
  CHECK(one.entry_dir != two.entry_dir);
  for (int round = 0; round < 2; ++round) {
    util::write_file(h, "#define X 1\n");
    LookupResult r1 = f.store.find_result(dir, kKeyA);
    REQUIRE(r1.hit);
    CHECK(util::read_file(r1.artifact_path()) == "built with 1");
    CHECK(r1.entry_dir == one.entry_dir);
    util::write_file(h, "#define X 2\n");
    LookupResult r2 = f.store.find_result(dir, kKeyA);
    REQUIRE(r2.hit);
    CHECK(util::read_file(r2.artifact_path()) == "built with 2");
    CHECK(r2.entry_dir == two.entry_dir);
  }
  util::write_file(h, "#define X 3\n");
  LookupResult none = f.store.find_result(dir, kKeyA);
  CHECK_FALSE(none.hit);
  CHECK_FALSE(none.corrupt);
  CHECK(none.miss_reason.find("none of 2 results") != std::string::npos);
}

TEST_CASE("a key keeps at most 8 results, the least recently used go first", "[cache][store][results]") {
  Fixture f;
  const std::string dir = f.store.module_key_dir("m", kKeyA);
  std::vector<PublishResult> published;
  for (int i = 0; i < 8; ++i) {
    published.push_back(f.publish("m", kKeyA, "content " + std::to_string(i)));
    set_mtime(published.back().entry_dir, 1000000 + i);  // used in publishing order
  }
  set_mtime(published[0].entry_dir, 2000000);  // the oldest one was used last
  PublishResult ninth = f.publish("m", kKeyA, "content 8");
  CHECK(ninth.ours);
  std::vector<ResultDir> left = list_result_dirs(dir);
  CHECK(left.size() == kMaxResultsPerKey);
  CHECK(util::path_exists(published[0].entry_dir));   // recently used: kept
  CHECK_FALSE(util::path_exists(published[1].entry_dir));  // least recently used: gone
  CHECK(util::path_exists(ninth.entry_dir));
  CHECK(list_entries(f.store.root(), false).size() == kMaxResultsPerKey);
}

TEST_CASE("a broken key directory or result is a miss; the other results still hit", "[cache][store][results]") {
  Fixture f;
  const std::string dir = f.store.module_key_dir("m", kKeyA);
  PublishResult good = f.publish("m", kKeyA, "good");
  set_mtime(good.entry_dir, 1000000);
  // A newer result whose entry.json is garbage, one that is a symlink, and a name not of a result.
  const std::string broken = util::join_path(dir, "0123456789abcdef");
  util::make_directories(broken, 0700);
  util::write_file(util::join_path(broken, "entry.json"), "{not json");
  REQUIRE(::symlink(good.entry_dir.c_str(), util::join_path(dir, "fedcba9876543210").c_str()) == 0);
  util::write_file(util::join_path(dir, "not-a-result"), "x");
  LookupResult r = f.store.find_result(dir, kKeyA);
  REQUIRE(r.hit);
  CHECK(r.entry_dir == good.entry_dir);
  // Only the broken one left: a corrupt miss, never an error.
  util::remove_all(good.entry_dir);
  LookupResult miss = f.store.find_result(dir, kKeyA);
  CHECK_FALSE(miss.hit);
  CHECK(miss.corrupt);
  // The key's directory replaced by a file: a miss, and a publish replaces it.
  util::remove_all(dir);
  util::write_file(dir, "planted");
  LookupResult planted = f.store.find_result(dir, kKeyA);
  CHECK_FALSE(planted.hit);
  CHECK(planted.corrupt);
  f.publish("m", kKeyA, "good");
  CHECK(f.store.find_result(dir, kKeyA).hit);
}

TEST_CASE("a key directory with thousands of names is read only up to its bound", "[cache][store][results]") {
  Fixture f;
  const std::string dir = f.store.module_key_dir("m", kKeyA);
  util::make_directories(dir, 0700);
  for (int i = 0; i < 200; ++i) {
    char name[17];
    std::snprintf(name, sizeof name, "%016x", i);
    util::make_directories(util::join_path(dir, name), 0700);
  }
  CHECK(list_result_dirs(dir).size() == kMaxResultDirsRead);
  LookupResult r = f.store.find_result(dir, kKeyA);
  CHECK_FALSE(r.hit);
  CHECK(r.corrupt);
}

TEST_CASE("what sets a key's results apart is checked first; a bad note about it never serves a wrong result",
          "[cache][store][results]") {
  Fixture f;
  const std::string dir = f.store.module_key_dir("m", kKeyA);
  std::string h = util::join_path(f.tmp.path(), "h.h");
  std::string common = util::join_path(f.tmp.path(), "common.h");
  util::write_file(common, "shared by both\n");
  util::write_file(h, "#define X 1\n");
  PublishResult one = f.publish("m", kKeyA, "built with 1", hash_headers({common, h}, "/", {}, {}));
  util::write_file(h, "#define X 2\n");
  PublishResult two = f.publish("m", kKeyA, "built with 2", hash_headers({common, h}, "/", {}, {}));
  // Each result notes the one input the other recorded otherwise, not the shared one.
  for (const auto* p : {&one, &two}) {
    std::vector<HeaderRecord> distinct = read_distinct_inputs(p->entry_dir);
    REQUIRE(distinct.size() == 1);
    CHECK(distinct[0].path == h);
  }
  util::write_file(h, "#define X 1\n");
  CHECK(f.store.find_result(dir, kKeyA).entry_dir == one.entry_dir);
  // A note that lies (malformed, or naming another digest) costs a full lookup or a miss, never a wrong result.
  util::write_file(util::join_path(one.entry_dir, kDistinctInputsName), "garbage\n");
  CHECK(read_distinct_inputs(one.entry_dir).empty());
  CHECK(f.store.find_result(dir, kKeyA).entry_dir == one.entry_dir);
  util::write_file(util::join_path(two.entry_dir, kDistinctInputsName),
                   std::string(64, '0') + " 1 - " + util::hex_encode(reinterpret_cast<const uint8_t*>(common.data()),
                                                                       common.size()) + "\n");
  util::write_file(h, "#define X 2\n");
  LookupResult r = f.store.find_result(dir, kKeyA);
  CHECK_FALSE(r.hit);  // two's note says common.h differs: passed over, a miss that rebuilds
  CHECK(r.entry_dir != one.entry_dir);
}

namespace {
// The engine's process-wide watch, on for one test.
struct WatchedHits {
  WatchedHits() { util::ChangeWatch::global().enable(); }
  ~WatchedHits() {
    give_back_idle_watches(0);
    util::ChangeWatch::global().enable(false);
  }
};

// Waits (on the clock, not for a guessed time) until each file's mtime and
// ctime are old enough for a watched hit to trust a stat of it: a younger
// stamp could miss a write in the same timestamp tick (store.cpp, kWatchSettledNs).
void settle_for_watch(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    auto st = util::full_stamp(p, false);
    REQUIRE(st);
    const int64_t newest = std::max(st->mtime_ns, st->ctime_ns);
    while (util::realtime_now_ns() - newest < 60 * int64_t{1000000}) {
      struct timespec tick = {0, 5000000};
      ::nanosleep(&tick, nullptr);
    }
  }
}

// Rewrites the start of `path` through a shared writable mapping and msync,
// leaving the mapping open as an editor or tool would: no inotify event.
struct MappedWrite {
  void* map = MAP_FAILED;
  size_t size = 0;
  MappedWrite(const std::string& path, const std::string& bytes) : size(bytes.size()) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the file open
    REQUIRE(map != MAP_FAILED);
    std::memcpy(map, bytes.data(), size);
    REQUIRE(::msync(map, size, MS_SYNC) == 0);
  }
  ~MappedWrite() {
    if (map != MAP_FAILED) ::munmap(map, size);
  }
};
}  // namespace

TEST_CASE("a watched hit skips the stats until its header, artifact or shadow changes, then proves again",
          "[cache][store][watch]") {
  WatchedHits on;
  Fixture f;
  const std::string inc1 = util::join_path(f.tmp.path(), "inc1"), inc2 = util::join_path(f.tmp.path(), "inc2");
  util::make_directories(inc1);
  util::make_directories(inc2);
  const std::string h = util::join_path(inc2, "h.h");
  util::write_file(h, "#define X 1\n");
  auto headers = hash_headers({h}, "/", {}, {});
  record_shadows(headers, {inc1, inc2});
  REQUIRE(headers.at(0).shadows.size() == 1);
  PublishResult p = f.publish("m", kKeyA, "x", headers);
  const std::string so = util::join_path(p.entry_dir, "m.so");
  settle_for_watch({h, so});

  LookupResult first = f.store.lookup(p.entry_dir, kKeyA);
  REQUIRE(first.hit);
  CHECK_FALSE(first.watched);  // proven by stats, and watched from now on
  LookupResult second = f.store.lookup(p.entry_dir, kKeyA);
  REQUIRE(second.hit);
  CHECK(second.watched);
  util::write_file(util::join_path(f.tmp.path(), "unrelated.txt"), "x");  // beside, not in the way
  CHECK(f.store.lookup(p.entry_dir, kKeyA).watched);

  // A same-size rewrite of the header: the watch voids the proof, the stats find the change.
  util::write_file(h, "#define X 2\n");
  LookupResult changed = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(changed.hit);
  CHECK(changed.miss_reason.find(h) != std::string::npos);
  util::write_file(h, "#define X 1\n");
  settle_for_watch({h});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);

  // The artifact rewritten in place with the same size.
  ::chmod(so.c_str(), 0644);
  util::write_file(so, "y");
  LookupResult corrupt = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(corrupt.hit);
  CHECK_FALSE(corrupt.watched);
  util::write_file(so, "x");
  settle_for_watch({so});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);

  // A shadow appears in the earlier include directory.
  util::write_file(util::join_path(inc1, "h.h"), "#define X 1\n");
  LookupResult shadowed = f.store.lookup(p.entry_dir, kKeyA);
  CHECK_FALSE(shadowed.hit);
  CHECK(shadowed.miss_reason.find("now shadows") != std::string::npos);

  // --verify re-hashes whatever the watch says.
  REQUIRE(::unlink(util::join_path(inc1, "h.h").c_str()) == 0);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  LookupOptions verify;
  verify.rehash_artifacts = true;
  LookupResult verified = f.store.lookup(p.entry_dir, kKeyA, verify);
  CHECK(verified.hit);
  CHECK_FALSE(verified.watched);
}

TEST_CASE("a watched hit still sees a write through a shared mapping to its artifact or to a header the user owns",
          "[cache][store][watch]") {
  WatchedHits on;
  Fixture f;
  const std::string h = util::join_path(f.tmp.path(), "val.h");
  util::write_file(h, "#define VAL 1\n");
  PublishResult p = f.publish("m", kKeyA, "module-1", hash_headers({h}, "/", {}, {}));
  const std::string so = util::join_path(p.entry_dir, "m.so");
  settle_for_watch({h, so});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);
  {
    MappedWrite edit(h, "#define VAL 2");  // same size; the writer's mapping stays open
    LookupResult after = f.store.lookup(p.entry_dir, kKeyA);
    CHECK_FALSE(after.watched);
    CHECK_FALSE(after.hit);
    CHECK(after.miss_reason.find(h) != std::string::npos);
  }
  util::write_file(h, "#define VAL 1\n");
  settle_for_watch({h});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);
  {
    ::chmod(so.c_str(), 0644);
    settle_for_watch({so});
    REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
    REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);
    MappedWrite corrupt(so, "module-2");  // the cached module itself, changed in place
    LookupResult after = f.store.lookup(p.entry_dir, kKeyA);
    CHECK_FALSE(after.watched);
    CHECK_FALSE(after.hit);
    CHECK(after.corrupt);
  }
}

TEST_CASE("a result proven too soon after its files changed is not watched until their stamps can catch a write",
          "[cache][store][watch]") {
  WatchedHits on;
  Fixture f;
  const std::string h = util::join_path(f.tmp.path(), "val.h");
  util::write_file(h, "#define VAL 1\n");
  PublishResult p = f.publish("m", kKeyA, "module-1", hash_headers({h}, "/", {}, {}));
  const std::string so = util::join_path(p.entry_dir, "m.so");
  settle_for_watch({so});
  util::write_file(h, "#define VAL 1\n");  // just now: a write in this tick would keep its stamp
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  auto young = util::full_stamp(h);
  REQUIRE(young);
  if (util::realtime_now_ns() - std::max(young->mtime_ns, young->ctime_ns) < 50 * int64_t{1000000})
    CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).watched);  // proven by stats again
  settle_for_watch({h});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  CHECK(f.store.lookup(p.entry_dir, kKeyA).watched);
}

TEST_CASE("watched results give their inotify watches back when voided or idle", "[cache][store][watch]") {
  WatchedHits on;
  Fixture f;
  give_back_idle_watches(0);
  const size_t before = util::ChangeWatch::global().watch_count();
  const std::string h = util::join_path(f.tmp.path(), "val.h");
  util::write_file(h, "#define VAL 1\n");
  PublishResult p = f.publish("m", kKeyA, "module-1", hash_headers({h}, "/", {}, {}));
  settle_for_watch({h, util::join_path(p.entry_dir, "m.so")});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);
  CHECK(util::ChangeWatch::global().watch_count() > before);
  // A failed proof gives its watches back at once (here: the header changed, the lookup misses).
  util::write_file(h, "#define VAL 2\n");
  CHECK_FALSE(f.store.lookup(p.entry_dir, kKeyA).hit);
  CHECK(util::ChangeWatch::global().watch_count() == before);
  // And one not hit for a while, at the next put or when asked.
  util::write_file(h, "#define VAL 1\n");
  settle_for_watch({h});
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).watched);
  CHECK(give_back_idle_watches(0) == 1);
  CHECK(util::ChangeWatch::global().watch_count() == before);
  REQUIRE(f.store.lookup(p.entry_dir, kKeyA).hit);  // proven again, and watched again
  CHECK(f.store.lookup(p.entry_dir, kKeyA).watched);
}

TEST_CASE("headers checked on several threads give the same verdict and counts as on one", "[cache][headers]") {
  util::TempDir d;
  std::vector<std::string> paths;
  for (int i = 0; i < 64; ++i) {
    paths.push_back(util::join_path(d.path(), "h" + std::to_string(i) + ".h"));
    util::write_file(paths.back(), "#define H" + std::to_string(i) + " 1\n");
  }
  const std::vector<HeaderRecord> recorded = hash_headers(paths, "/", {}, {});
  REQUIRE(recorded.size() == 64);
  auto check = [&](int workers) {
    std::vector<HeaderRecord> copy = recorded;
    for (auto& h : copy) h.stat.clear();  // as an adopted entry: no stamps, every file hashed
    Rehashed counted;
    // (whether the records hold, what changed, how many files were read)
    auto held = check_and_stamp_headers(copy, {}, &counted, workers);
    return std::make_tuple(held.has_value(), held.why(), counted.files);
  };
  CHECK(check(1) == std::make_tuple(true, std::string(), uint64_t{64}));
  CHECK(check(4) == std::make_tuple(true, std::string(), uint64_t{64}));
  util::write_file(paths[40], "#define H40 2\n");  // same size, other content
  auto one = check(1), four = check(4);
  CHECK_FALSE(std::get<0>(one));
  CHECK_FALSE(std::get<0>(four));
  CHECK(std::get<1>(one) == paths[40] + " changed");
  CHECK(std::get<1>(four) == paths[40] + " changed");
}
