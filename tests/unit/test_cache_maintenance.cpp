// What cache maintenance may delete (clean, gc, verify --remove): only names
// tvmffi-jit created, and modules linked from a bad object with the object.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/maintenance.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

const std::string kObjectKey = std::string(64, 'c');
const std::string kModuleKey = std::string(64, 'd');
const std::string kOtherKey = std::string(64, 'e');

struct Root {
  util::TempDir tmp;
  std::string path = util::join_path(tmp.path(), "cache");
  Store store{open_root(path, true)};

  PublishResult publish_object(const std::string& key, const std::string& content) {
    Staging s = store.stage();
    std::string built = util::join_path(s.build_dir(), "cpp_0.o");
    util::write_file(built, content);
    EntryRecord rec;
    rec.kind = "object";
    rec.name = "a.cc";
    rec.key = key;
    return store.publish(s, store.object_entry_dir(key), rec, {{built, "cpp_0.o"}});
  }
  PublishResult publish_module(const std::string& name, const std::string& key, std::vector<ObjectRecord> objects) {
    Staging s = store.stage();
    std::string built = util::join_path(s.build_dir(), name + ".so");
    util::write_file(built, "module " + name);
    EntryRecord rec;
    rec.kind = "module";
    rec.name = name;
    rec.key = key;
    rec.objects = std::move(objects);
    return store.publish_result(s, store.module_key_dir(name, key), rec, {{built, name + ".so"}});
  }
  std::string at(const std::string& rel) const { return util::join_path(path, rel); }
};

void age(const std::string& path, int64_t seconds) {
  time_t t = ::time(nullptr) - seconds;
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  REQUIRE(::lutimes(path.c_str(), tv) == 0);
}

}  // namespace

TEST_CASE("clean and gc delete only names tvmffi-jit created", "[cache][maintenance]") {
  Root r;
  PublishResult entry = r.publish_module("m", kModuleKey, {});
  // Things a user (or another tool) put under the root, all older than a day.
  std::vector<std::string> foreign = {"tmp/notes.txt", "tmp/stage.half", "tmp/trash.x", "compilers/readme.txt",
                                      "locks/mine.lock", "x_0123456789abcdef/data.bin",
                                      "objects/cc/" + kObjectKey + "/data.bin"};
  for (const auto& f : foreign) {
    util::make_directories(util::parent_path(r.at(f)), 0700);
    util::write_file(r.at(f), "keep me");
    age(r.at(f), 3 * 86400);
    age(util::parent_path(r.at(f)), 3 * 86400);
  }
  util::make_directories(r.at("tmp/user-dir"), 0700);
  age(r.at("tmp/user-dir"), 3 * 86400);
  // The cache's own memo is removed by a full clean; the compiler identity
  // memos are the toolchain's (`cache clean` removes them through
  // toolchain::remove_identity_memos), so the cache leaves them.
  std::string memo = r.at("digests/" + std::string(32, 'a'));
  util::make_directories(util::parent_path(memo), 0700);
  util::write_file(memo, "memo");
  std::string identity = r.at("compilers/" + std::string(32, 'a') + ".json");
  util::write_file(identity, "{}");

  CleanReport gc = gc_cache(r.store, 0);
  CHECK(gc.entries_removed == 1);
  CHECK(gc.temporaries_removed == 0);
  CHECK_FALSE(util::path_exists(entry.entry_dir));
  r.publish_module("m", kModuleKey, {});
  CleanReport clean = clean_cache(r.store, std::nullopt);
  CHECK(clean.entries_removed == 1);
  CHECK(clean.temporaries_removed == 0);
  CHECK_FALSE(util::path_exists(memo));
  CHECK(util::path_exists(identity));
  for (const auto& f : foreign) {
    INFO(f);
    CHECK(util::read_file(r.at(f)) == "keep me");
  }
  CHECK(util::is_directory(r.at("tmp/user-dir")));
  // Nor does verify --remove delete a directory it cannot prove it wrote.
  VerifyReport v = verify_cache(r.store, true);
  CHECK(v.problems.size() == 2);
  for (const auto& p : v.problems) {
    CHECK_FALSE(p.removed);
    CHECK_FALSE(p.kept_why.empty());
  }
  CHECK(util::path_exists(r.at("x_0123456789abcdef/data.bin")));
}

TEST_CASE("entries of an older format are still recognised as the tool's and cleaned", "[cache][maintenance]") {
  Root r;
  std::string dir = r.at("old_" + kModuleKey.substr(0, 16));
  util::make_directories(dir, 0700);
  util::write_file(util::join_path(dir, "entry.json"),
                   R"({"format_version": 1, "kind": "module", "name": "old", "key": ")" + kModuleKey + R"("})");
  util::write_file(util::join_path(dir, "old.so"), "x");
  // The same entry.json under a directory name it does not describe is not proof.
  std::string moved = r.at("moved_" + kOtherKey.substr(0, 16));
  util::make_directories(moved, 0700);
  util::write_file(util::join_path(moved, "entry.json"), util::read_file(util::join_path(dir, "entry.json")));
  CleanReport c = clean_cache(r.store, std::nullopt);
  CHECK(c.entries_removed == 1);
  CHECK_FALSE(util::path_exists(dir));
  CHECK(util::path_exists(moved));
}

TEST_CASE("verify --remove removes the modules linked from a bad object with it", "[cache][maintenance]") {
  Root r;
  PublishResult obj = r.publish_object(kObjectKey, "object bytes");
  const std::string good = util::sha256_hex("object bytes");
  PublishResult linked = r.publish_module("linked", kModuleKey, {{kObjectKey, good}});
  // Linked from an earlier build of the same object key (other bytes): not a dependant of this one.
  PublishResult earlier = r.publish_module("earlier", kModuleKey, {{kObjectKey, util::sha256_hex("older bytes!")}});
  PublishResult unrelated = r.publish_module("unrelated", kModuleKey, {{kOtherKey, good}});
  // Linked from the corrupt bytes themselves (a tool without the reuse check).
  const std::string corrupt = "object bytez";  // same size
  PublishResult spread = r.publish_module("spread", kModuleKey, {{kObjectKey, util::sha256_hex(corrupt)}});
  util::write_file(util::join_path(obj.entry_dir, "cpp_0.o"), corrupt);

  VerifyReport report = verify_cache(r.store, false);
  CHECK(report.checked == 5);
  std::vector<std::string> bad;
  for (const auto& p : report.problems) bad.push_back(p.dir);
  std::sort(bad.begin(), bad.end());
  std::vector<std::string> expected = {linked.entry_dir, spread.entry_dir, obj.entry_dir};
  std::sort(expected.begin(), expected.end());
  CHECK(bad == expected);
  for (const auto& p : report.problems)
    if (p.dir != obj.entry_dir) CHECK_THAT(p.problem, Catch::Contains("linked from the bad object"));

  VerifyReport removed = verify_cache(r.store, true);
  CHECK(removed.problems.size() == 3);
  for (const auto& d : expected) CHECK_FALSE(util::path_exists(d));
  CHECK(util::path_exists(earlier.entry_dir));
  CHECK(util::path_exists(unrelated.entry_dir));
  CHECK(verify_cache(r.store, false).problems.empty());
}
