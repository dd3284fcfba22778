// cached_build() against a fake cache::EntryStorage: no cache root, no
// entry.json, no lock; the entries are held in memory, so each branch of a
// cached build -- hit, miss (build, then publish and upload), corrupt entry,
// untrusted object, and a store that is refused at each of its doors -- is
// driven by setting what the storage answers. The runner writes what a
// compiler would (fake_build.h), so no compiler runs.
#include <catch2/catch.hpp>

#include "fake_build.h"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

using testing::Project;
using testing::WritingRunner;

// Entries in memory, by key dir (modules) and key (objects). The only files
// it writes are the ones a build reads from disk, in its own temp folder:
// the staging dirs builds run in, and the artifacts of what it serves (a
// reused object is linked from its file).
class FakeEntryStorage : public cache::EntryStorage {
 public:
  struct Stored {
    cache::EntryRecord record;
    std::map<std::string, std::string> files;  // name in the entry -> content
  };
  std::map<std::string, Stored> modules;
  std::map<std::string, Stored> objects;
  std::set<std::string> corrupt;  // key dirs and object keys whose entry is unusable

  // The three doors a build's entry can be refused at.
  std::optional<std::string> refuse_storing;  // find(): the root cannot take the entry
  bool refuse_staging = false;                // stage() throws
  bool refuse_publishing = false;             // publish() throws

  const cache::SecretKey* sign_key = nullptr;  // the trust policy of a signing build
  bool shared = false;                         // shares(): a published module is uploaded

  // What cached_build did through the door.
  int stages = 0;
  std::vector<std::string> uploads;  // entry dirs
  int flushes = 0;
  std::vector<bool> kept_occupants;  // publish_object's keep(), for each occupant it met
  cache::StatsCounters counted;

  std::string module_key_dir(const std::string& name, const std::string& key_hex) const override {
    return name + "_" + key_hex.substr(0, 16);
  }
  cache::Staging stage() override {
    if (refuse_staging) throw io_error("cannot create the staging directory (injected)");
    ++stages;
    return cache::Staging::create(util::TempDir(dir_.path(), "stage."));
  }
  bool writable() const override { return !refuse_storing; }
  cache::DigestMemo digest_memo() const override { return {}; }
  std::string compilers_dir() const override { return ""; }
  const cache::TrustPolicy* trust_policy() const override {
    policy_.sign_key = sign_key;
    return sign_key ? &policy_ : nullptr;
  }
  bool shares() const override { return shared; }

  cache::Found find(const cache::EntryRequest& request, const cache::FindOptions&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    cache::Found found;
    found.entry = look(modules, request.key_dir);
    if (found.entry.hit) {
      found.status = cache::CacheStatus::kHit;
      return found;
    }
    found.miss_reason = found.entry.miss_reason;
    if (refuse_storing) found.storable = Unexpected{*refuse_storing};
    return found;
  }
  cache::PublishResult publish(cache::Staging&, const cache::EntryRequest& request, cache::EntryRecord record,
                               const std::vector<std::pair<std::string, std::string>>& files) override {
    if (refuse_publishing) throw io_error("cannot publish " + request.name + ": no space left on device (injected)");
    std::lock_guard<std::mutex> lock(mutex_);
    return store(modules, request.key_dir, std::move(record), files);
  }
  void upload(const cache::EntryRequest&, const std::string& entry_dir) override {
    std::lock_guard<std::mutex> lock(mutex_);
    uploads.push_back(entry_dir);
  }
  cache::LookupResult find_object(const std::string& key_hex) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return look(objects, key_hex);
  }
  cache::PublishResult publish_object(cache::Staging&, const std::string& key_hex, cache::EntryRecord record,
                                      const std::vector<std::pair<std::string, std::string>>& files,
                                      const cache::KeepOccupant& keep) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto occupant = objects.find(key_hex);
    if (occupant != objects.end() && keep) {
      kept_occupants.push_back(keep(occupant->second.record));
      if (kept_occupants.back()) return {place(key_hex, occupant->second), occupant->second.record, false};
    }
    return store(objects, key_hex, std::move(record), files);
  }
  void count(const cache::StatsCounters& delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    counted.add(delta);
  }
  void flush_counts() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++flushes;
  }

 private:
  cache::LookupResult look(std::map<std::string, Stored>& entries, const std::string& id) {
    cache::LookupResult r;
    auto it = entries.find(id);
    if (it == entries.end()) {
      r.miss_reason = "absent";
      return r;
    }
    r.entry = std::make_shared<const cache::EntryRecord>(it->second.record);
    if (corrupt.count(id)) {
      r.corrupt = true;
      r.miss_reason = "entry.json is not JSON (injected)";
      return r;
    }
    r.hit = true;
    r.entry_dir = place(id, it->second);
    return r;
  }
  // The entry's record completed as Store::publish completes it (artifact
  // sizes and digests, unless the build recorded them), its files read.
  cache::PublishResult store(std::map<std::string, Stored>& entries, const std::string& id, cache::EntryRecord record,
                             const std::vector<std::pair<std::string, std::string>>& files) {
    Stored s;
    const bool listed = !record.artifacts.empty();
    for (const auto& [path, name] : files) {
      s.files[name] = util::read_file(path);
      if (!listed) record.artifacts.push_back({name, s.files[name].size(), util::sha256_hex(s.files[name]), ""});
    }
    s.record = std::move(record);
    entries[id] = s;
    corrupt.erase(id);
    return {place(id, s), s.record, true};
  }
  // Writes the entry's files into <temp>/<id>/, where a build reads them.
  std::string place(const std::string& id, const Stored& s) {
    const std::string dir = util::join_path(dir_.path(), id);
    util::make_directories(dir, 0700);
    for (const auto& [name, content] : s.files) util::write_file(util::join_path(dir, name), content);
    return dir;
  }

  util::TempDir dir_;
  mutable cache::TrustPolicy policy_;
  std::mutex mutex_;
};

// The artifact of a build that was not stored: the caller's, outside the
// storage's folder; removed by the test that asked for it.
struct CallersArtifact {
  std::string dir;
  ~CallersArtifact() {
    if (!dir.empty()) util::remove_all(dir);
  }
};

}  // namespace

TEST_CASE("a miss builds in the storage's staging dir, publishes module and objects, uploads; then it hits",
          "[compile][cached_build][fake_storage]") {
  Project p;
  FakeEntryStorage storage;
  storage.shared = true;
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");

  CachedBuildResult miss = p.build(m, storage, runner);
  CHECK(miss.cache == cache::CacheStatus::kMiss);
  CHECK(miss.miss_reason == "absent");
  CHECK(miss.stored);
  CHECK(storage.stages == 3);  // the module's, and each object's on its way into the storage
  REQUIRE(storage.modules.size() == 1);
  const auto& [key_dir, entry] = *storage.modules.begin();
  CHECK(key_dir == "m1_" + miss.key.substr(0, 16));
  CHECK(entry.record.kind == "module");
  CHECK(entry.record.key == miss.key);
  CHECK(entry.record.objects.size() == 2);  // the module names the objects it linked
  CHECK(entry.files.at(make_plan(m, p.tc, testing::no_gpus()).artifact_name) == "built\n");
  CHECK(storage.objects.size() == 2);
  CHECK(storage.counted.object_misses == 2);
  CHECK(storage.uploads == std::vector<std::string>{miss.entry_dir});
  CHECK(util::parent_path(miss.build.artifact_path) == miss.entry_dir);  // served from the published entry
  CHECK(storage.flushes == 1);
  const int runs = runner.runs;
  CHECK(runs == 3);  // two compiles and the link

  CachedBuildResult hit = p.build(m, storage, runner);
  CHECK(hit.cache == cache::CacheStatus::kHit);
  CHECK(hit.key == miss.key);
  CHECK(hit.entry_dir == miss.entry_dir);
  CHECK(util::read_file(hit.build.artifact_path) == "built\n");
  CHECK(runner.runs == runs);  // nothing ran
  CHECK(storage.stages == 3);
  CHECK(storage.uploads.size() == 1);  // a hit uploads nothing
  CHECK(storage.flushes == 2);
}

TEST_CASE("a corrupt module entry is a miss that relinks from the cached objects and publishes again",
          "[compile][cached_build][fake_storage]") {
  Project p;
  FakeEntryStorage storage;
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");
  CachedBuildResult first = p.build(m, storage, runner);
  REQUIRE(first.stored);
  const int runs = runner.runs;

  storage.corrupt.insert(storage.modules.begin()->first);
  CachedBuildResult again = p.build(m, storage, runner);
  CHECK(again.cache == cache::CacheStatus::kMiss);
  CHECK(again.miss_reason == "entry.json is not JSON (injected)");
  CHECK(again.objects_reused == 2);
  CHECK(again.objects_compiled == 0);
  CHECK(runner.runs == runs + 1);  // the link only
  CHECK(again.stored);
  CHECK(storage.corrupt.empty());  // replaced by the new entry

  // A corrupt object is compiled again, the intact one reused.
  storage.corrupt.insert(storage.modules.begin()->first);
  storage.corrupt.insert(storage.objects.begin()->first);
  CachedBuildResult third = p.build(m, storage, runner);
  CHECK(third.objects_reused == 1);
  CHECK(third.objects_compiled == 1);
  CHECK(runner.runs == runs + 3);
}

TEST_CASE("a signing build links no object it cannot trust: it compiles the unit and replaces the object with its "
          "signed one, which the next build reuses",
          "[compile][cached_build][fake_storage][trust]") {
  Project p;
  util::TempDir keys;
  cache::generate_key_pair("ci", keys.path());
  const cache::SecretKey key = cache::read_secret_key(util::join_path(keys.path(), "ci.sec"));
  FakeEntryStorage storage;
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");
  REQUIRE(p.build(m, storage, runner).objects_compiled == 2);  // unsigned objects: planted, for a signing build
  for (const auto& [k, object] : storage.objects) CHECK_FALSE(cache::carries_own_signature(key, object.record));

  storage.sign_key = &key;
  storage.modules.clear();
  CachedBuildResult signing = p.build(m, storage, runner);
  CHECK(signing.objects_reused == 0);
  CHECK(signing.objects_compiled == 2);
  CHECK(storage.kept_occupants == std::vector<bool>{false, false});
  for (const auto& [k, object] : storage.objects) CHECK(cache::carries_own_signature(key, object.record));

  storage.modules.clear();
  CachedBuildResult trusted = p.build(m, storage, runner);
  CHECK(trusted.objects_reused == 2);
  CHECK(trusted.objects_compiled == 0);
}

TEST_CASE("a store refused at find, at staging or at publish builds anyway, serves the artifact from outside the "
          "storage and counts one store failure",
          "[compile][cached_build][fake_storage]") {
  Project p;
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");
  enum class Door { kFind, kStage, kPublish };
  for (Door door : {Door::kFind, Door::kStage, Door::kPublish}) {
    CAPTURE(static_cast<int>(door));
    FakeEntryStorage storage;
    storage.shared = true;
    if (door == Door::kFind) storage.refuse_storing = "the cache root is read-only (injected)";
    if (door == Door::kStage) storage.refuse_staging = true;
    if (door == Door::kPublish) storage.refuse_publishing = true;
    CachedBuildResult r = p.build(m, storage, runner);
    CallersArtifact artifact{r.build.build_dir};
    CHECK(r.cache == cache::CacheStatus::kMiss);
    CHECK_FALSE(r.stored);
    CHECK(r.entry_dir.empty());
    CHECK(util::read_file(r.build.artifact_path) == "built\n");
    CHECK(storage.modules.empty());
    CHECK(storage.uploads.empty());
    CHECK(storage.counted.store_failures == 1);
    CHECK(storage.flushes == 1);
    // Refused before the build, it runs outside the cache (no object cache);
    // refused at publish, its objects were stored as they compiled.
    CHECK(storage.stages == (door == Door::kPublish ? 3 : 0));
    CHECK(storage.objects.size() == (door == Door::kPublish ? 2u : 0u));
  }
}
