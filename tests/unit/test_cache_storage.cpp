// The storage facade (cache/storage.h) over in-memory remotes: the order of
// the tiers, the read-only wrapper, how failures are counted, trust; and the
// remote URL parsed once (cache/remote/url.h).
#include <catch2/catch.hpp>

#include "memory_backend.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/remote/url.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/transfer/transfer.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;
using tvmffi_jit::testing::MemoryServer;
using tvmffi_jit::testing::make_memory_backend;

namespace {

const std::string kPortable(64, 'c');
const std::string kNamespace = "ns";

// Two checkouts of one project on two machines: "a" builds and publishes,
// "b" asks the facade. Each has its own cache root and base directory.
struct World {
  util::TempDir tmp;
  std::string base_a = util::join_path(tmp.path(), "a");
  std::string base_b = util::join_path(tmp.path(), "b");
  Store store_a{open_root(util::join_path(tmp.path(), "cache-a"), true)};
  Store store_b{open_root(util::join_path(tmp.path(), "cache-b"), true)};
  StatsCounters stats;

  World() {
    util::make_directories(base_a, 0755);
    util::make_directories(base_b, 0755);
  }

  // Module "m" built in checkout a (its artifact `content`), published in
  // store a; the headers it read are given relative to the base.
  std::string publish_a(const std::string& content, const std::vector<std::string>& headers = {}) {
    std::vector<std::string> paths;
    for (const auto& h : headers) paths.push_back(util::join_path(base_a, h));
    Staging s = store_a.stage();
    std::string built = util::join_path(s.build_dir(), "m.so");
    util::write_file(built, content);
    EntryRecord rec;
    rec.kind = "module";
    rec.name = "m";
    rec.key = local_key_hex(kPortable, base_a);
    rec.portable_key = kPortable;
    rec.base_dir = base_a;
    rec.headers = hash_headers(paths, base_a, {}, {});
    std::string dir = store_a.module_key_dir("m", rec.key);
    store_a.remove_entry(dir);  // a rebuild with other content (else the first entry stays)
    return store_a.publish_result(s, dir, rec, {{built, "m.so"}}).entry_dir;
  }

  // The result a's upload would send: its blob and result id.
  struct Packed {
    std::string blob;
    std::string id;
  };
  Packed blob_a(const std::string& content, const SecretKey* sign_key = nullptr,
                const std::vector<std::string>& headers = {}) {
    Packed p;
    p.blob = pack_portable_entry(publish_a(content, headers), sign_key, &p.id);
    return p;
  }

  // What checkout b asks for.
  EntryRequest request_b() const {
    EntryRequest r;
    r.name = "m";
    r.key.hex = local_key_hex(kPortable, base_b);
    r.key.portable_hex = kPortable;
    r.key_dir = store_b.module_key_dir("m", r.key.hex);
    r.base_dir = base_b;
    r.artifact = "m.so";
    r.lookup.required_artifacts = {"m.so"};
    return r;
  }

  RemoteOptions options(bool read_only = false) const {
    RemoteOptions o;
    o.key_namespace = kNamespace;
    o.read_only = read_only;
    return o;
  }
};

// The key's result list, and one result, as a server names them.
std::string object() { return kNamespace + "/" + kPortable; }
std::string result_object(const std::string& id) { return kNamespace + "/" + kPortable + "." + id; }

// A server holding these results, listed most recent first.
std::shared_ptr<MemoryServer> server_with(const std::vector<World::Packed>& results) {
  auto s = std::make_shared<MemoryServer>();
  std::optional<ResultList> list;
  for (auto it = results.rbegin(); it != results.rend(); ++it) {
    s->objects[result_object(it->id)] = it->blob;
    list = merge_result_list(list, kPortable, it->id);
  }
  if (list) s->objects[object()] = result_list_text(*list);
  return s;
}
std::shared_ptr<MemoryServer> server_with(const World::Packed& result) {
  return server_with(std::vector<World::Packed>{result});
}
std::shared_ptr<MemoryServer> empty_server() { return std::make_shared<MemoryServer>(); }

std::shared_ptr<MemoryServer> failing_server(RemoteFailureKind kind) {
  auto s = std::make_shared<MemoryServer>();
  s->failing = RemoteFailure{kind, "injected"};
  return s;
}

std::vector<std::unique_ptr<RemoteBackend>> backends(const std::vector<std::shared_ptr<MemoryServer>>& servers) {
  std::vector<std::unique_ptr<RemoteBackend>> out;
  for (size_t i = 0; i < servers.size(); ++i)
    out.push_back(make_memory_backend(servers[i], "memory://" + std::to_string(i)));
  return out;
}

std::string artifact_of(const Found& f) { return util::read_file(f.entry.artifact_path(std::string("m.so"))); }

}  // namespace

TEST_CASE("the cache statuses keep the names build --json and the Python package show", "[cache][storage]") {
  CHECK(std::string(cache_status_name(CacheStatus::kHit)) == "hit");
  CHECK(std::string(cache_status_name(CacheStatus::kRemoteHit)) == "remote-hit");
  CHECK(std::string(cache_status_name(CacheStatus::kMiss)) == "miss");
}

TEST_CASE("a local hit is answered by the local store without asking a remote", "[cache][storage]") {
  World w;
  auto remote = server_with(w.blob_a("remote bytes"));
  // b has its own local entry (built there).
  Storage b_local(w.store_b, w.options(), &w.stats, backends({remote}));
  Found miss = b_local.get(w.request_b(), Tier::kLocal);
  CHECK(miss.status == CacheStatus::kMiss);
  CHECK(miss.entry.miss_reason == "absent");
  CHECK(remote->gets == 0);
  CHECK(w.stats.hits == 0);

  Found shared = b_local.get(w.request_b(), Tier::kShared);
  REQUIRE(shared.status == CacheStatus::kRemoteHit);
  // Published locally: the next lookup is a local hit, served from b's root.
  Found local = b_local.get(w.request_b(), Tier::kLocal);
  CHECK(local.status == CacheStatus::kHit);
  CHECK(util::parent_path(local.entry.entry_dir) == w.request_b().key_dir);
  CHECK(artifact_of(local) == "remote bytes");
  CHECK(remote->gets == 2);  // the list, then the result
  CHECK((w.stats.hits == 1 && w.stats.remote_hits == 1 && w.stats.remote_misses == 0));
}

TEST_CASE("an imported entry answers before any remote is asked", "[cache][storage]") {
  World w;
  std::string exported = util::join_path(w.tmp.path(), "export.tvmffi");
  export_entries({w.publish_a("imported bytes")}, exported);
  import_entries(w.store_b, exported);
  auto remote = server_with(w.blob_a("remote bytes"));
  Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
  Found f = storage.get(w.request_b(), Tier::kShared);
  REQUIRE(f.status == CacheStatus::kRemoteHit);
  CHECK(f.source == "imported");
  CHECK(artifact_of(f) == "imported bytes");
  CHECK(remote->gets == 0);
  CHECK((w.stats.imported_hits == 1 && w.stats.remote_hits == 0));
}

TEST_CASE("the first remote that has the entry wins; the others are not asked", "[cache][storage]") {
  World w;
  const World::Packed blob = w.blob_a("from the second");
  auto empty = empty_server();
  auto second = server_with(blob);
  auto third = server_with(w.blob_a("from the third"));
  Storage storage(w.store_b, w.options(), &w.stats, backends({empty, second, third}));
  Found f = storage.get(w.request_b(), Tier::kShared);
  REQUIRE(f.status == CacheStatus::kRemoteHit);
  CHECK(f.source == "memory://1");
  CHECK(artifact_of(f) == "from the second");
  CHECK(third->objects.count(result_object(blob.id)) == 0);
  CHECK((empty->gets == 1 && second->gets == 2 && third->gets == 0));
  CHECK((w.stats.remote_hits == 1 &&
         w.stats.remote_bytes_received == blob.blob.size() + second->objects[object()].size()));
}

TEST_CASE("nothing anywhere is one remote miss, and the upload reaches every writable remote", "[cache][storage]") {
  World w;
  auto one = empty_server();
  auto two = empty_server();
  Storage storage(w.store_b, w.options(), &w.stats, backends({one, two}));
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  CHECK(w.stats.remote_misses == 1);
  // b builds and publishes (here: a's entry stands in for it), then uploads:
  // the result under its id, then the key's list naming it.
  std::string built = w.publish_a("built by b");
  storage.upload(w.request_b(), built);
  CHECK((one->puts == 2 && two->puts == 2));
  const std::string id = result_id(**read_entry(built));
  REQUIRE(one->objects.count(result_object(id)) == 1);
  auto list = parse_result_list(one->objects[object()], kPortable);
  REQUIRE(list);
  CHECK(list->result_ids == std::vector<std::string>{id});
  CHECK(w.stats.remote_stores == 2);
  CHECK(w.stats.remote_bytes_sent == 2 * (one->objects[result_object(id)].size() + one->objects[object()].size()));
}

TEST_CASE("read-only remotes are never sent a put", "[cache][storage]") {
  World w;
  auto remote = empty_server();
  Storage storage(w.store_b, w.options(true), &w.stats, backends({remote}));
  storage.upload(w.request_b(), w.publish_a("x"));
  CHECK(remote->puts == 0);
  CHECK(remote->objects.empty());
  CHECK(w.stats.remote_stores == 0);
  // The wrapper itself refuses without reaching its server.
  auto wrapped = read_only(make_memory_backend(remote, "memory://ro"));
  RemotePut put = wrapped->put(object(), "blob");
  REQUIRE(!put);
  CHECK(put.error().kind == RemoteFailureKind::kError);
  CHECK(remote->puts == 0);
  CHECK(wrapped->name() == "memory://ro");
}

TEST_CASE("timeouts, errors and corrupt blobs are counted apart; a failed server is given up", "[cache][storage]") {
  World w;
  auto slow = failing_server(RemoteFailureKind::kTimeout);
  auto down = failing_server(RemoteFailureKind::kError);
  auto garbage = empty_server();
  garbage->objects[object()] = "not a result list at all";
  Storage storage(w.store_b, w.options(), &w.stats, backends({slow, down, garbage}));
  Found f = storage.get(w.request_b(), Tier::kShared);
  CHECK(f.status == CacheStatus::kMiss);
  CHECK(w.stats.remote_errors == 2);  // both servers given up
  CHECK(w.stats.remote_timeouts == 1);  // one of them for a deadline
  CHECK(w.stats.remote_corrupt == 1);
  CHECK(w.stats.remote_misses == 1);   // the one that answered had nothing usable
  // Given up for the rest of the facade's life: neither asked again, nor sent the upload.
  storage.get(w.request_b(), Tier::kShared);
  storage.upload(w.request_b(), w.publish_a("x"));
  // The upload reads the list again (to merge it) and replaces the corrupt one.
  CHECK((slow->gets == 1 && down->gets == 1 && garbage->gets == 3));
  CHECK((slow->puts == 0 && down->puts == 0 && garbage->puts == 2));
  CHECK(w.stats.remote_errors == 2);
  CHECK(w.stats.remote_corrupt == 2);
  CHECK(parse_result_list(garbage->objects[object()], kPortable));
  CHECK(!util::path_exists(w.request_b().key_dir));
}

TEST_CASE("an entry built against other headers is a miss, not a corrupt blob", "[cache][storage]") {
  World w;
  util::write_file(util::join_path(w.base_a, "h.h"), "int a;\n");
  util::write_file(util::join_path(w.base_b, "h.h"), "int b;\n");  // this checkout's header differs
  auto remote = server_with(w.blob_a("x", nullptr, {"h.h"}));
  Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  CHECK(w.stats.remote_corrupt == 0);
  CHECK(w.stats.remote_misses == 1);
  // The same header here: the entry is used.
  util::write_file(util::join_path(w.base_b, "h.h"), "int a;\n");
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kRemoteHit);
}

TEST_CASE("under trusted keys an unsigned or foreign-signed entry is refused and counted", "[cache][storage]") {
  World w;
  KeyPairFiles ci = generate_key_pair("ci", w.tmp.path());
  KeyPairFiles other = generate_key_pair("other", w.tmp.path());
  RemoteOptions o = w.options();
  o.trusted_keys = {read_public_key(ci.public_file)};
  const SecretKey foreign = read_secret_key(other.secret_file);
  auto unsigned_server = server_with(w.blob_a("unsigned"));
  auto foreign_server = server_with(w.blob_a("foreign", &foreign));
  Storage storage(w.store_b, o, &w.stats, backends({unsigned_server, foreign_server}));
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  CHECK(w.stats.remote_untrusted == 2);
  CHECK(w.stats.remote_corrupt == 0);
  CHECK(!util::path_exists(w.request_b().key_dir));

  const SecretKey ci_key = read_secret_key(ci.secret_file);
  auto signed_server = server_with(w.blob_a("signed", &ci_key));
  Storage trusted(w.store_b, o, &w.stats, backends({signed_server}));
  Found f = trusted.get(w.request_b(), Tier::kShared);
  REQUIRE(f.status == CacheStatus::kRemoteHit);
  CHECK(artifact_of(f) == "signed");
}

TEST_CASE("a signing build trusts its own key at every door: remote, local and imported", "[cache][storage]") {
  World w;
  KeyPairFiles ci = generate_key_pair("ci", w.tmp.path());
  const SecretKey ci_key = read_secret_key(ci.secret_file);
  RemoteOptions signing = w.options();
  signing.sign_key = ci_key;

  SECTION("a forged result on a writable server is not adopted on a fresh root; a signed one is") {
    auto forged = server_with(w.blob_a("forged"));
    Storage storage(w.store_b, signing, &w.stats, backends({forged}));
    CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
    CHECK((w.stats.remote_untrusted == 1 && w.stats.remote_hits == 0));
    CHECK(!util::path_exists(w.request_b().key_dir));  // nothing of it was written
    auto signed_server = server_with(w.blob_a("signed by ci", &ci_key));
    Storage own(w.store_b, signing, &w.stats, backends({signed_server}));
    Found f = own.get(w.request_b(), Tier::kShared);
    REQUIRE(f.status == CacheStatus::kRemoteHit);
    CHECK(artifact_of(f) == "signed by ci");
  }
  SECTION("a result a keyless build adopted into the shared root is not a local hit") {
    auto forged = server_with(w.blob_a("forged"));
    Storage keyless(w.store_b, w.options(), &w.stats, backends({forged}));
    REQUIRE(keyless.get(w.request_b(), Tier::kShared).status == CacheStatus::kRemoteHit);
    REQUIRE(keyless.get(w.request_b(), Tier::kLocal).status == CacheStatus::kHit);
    Storage storage(w.store_b, signing, &w.stats);
    Found f = storage.get(w.request_b(), Tier::kLocal);
    CHECK(f.status == CacheStatus::kMiss);
    CHECK(f.entry.miss_reason.find("not signed") != std::string::npos);
    CHECK(w.stats.remote_untrusted == 1);
  }
  SECTION("an unsigned import is not adopted") {
    std::string exported = util::join_path(w.tmp.path(), "export.tvmffi");
    export_entries({w.publish_a("imported bytes")}, exported);
    import_entries(w.store_b, exported);
    Storage storage(w.store_b, signing, &w.stats);
    CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
    CHECK((w.stats.remote_untrusted == 1 && w.stats.imported_hits == 0));
  }
}

TEST_CASE("a remote URL is parsed once into its parts", "[cache][storage][url]") {
  RemoteUrl r = parse_remote_url("redis://user:secret@[::1]:7000/3");
  CHECK(r.scheme == find_remote_scheme("redis"));
  CHECK((r.host == "::1" && r.port == 7000 && r.db == 3));
  CHECK((r.user == "user" && r.password == "secret"));
  CHECK(r.shown == "redis://***@[::1]:7000/3");
  CHECK(parse_remote_url("redis://h").port == 6379);

  RemoteUrl s3 = parse_remote_url("s3://my-bucket/team/ci/");
  CHECK((s3.scheme == find_remote_scheme("s3") && s3.bucket == "my-bucket" && s3.prefix == "team/ci"));
  RemoteUrl http = parse_remote_url("https://cache.example:8443/ac");
  CHECK((http.scheme == find_remote_scheme("https") && http.host == "cache.example" && http.port == 8443));

  auto usage = [](const std::string& url) {
    try {
      parse_remote_url(url);
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kUsage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(usage("ftp://h/x"), Catch::Contains("must start with http://, https://, redis:// or s3://"));
  CHECK_THAT(usage("redis://:pw@/0"), Catch::Contains("names no host"));
  CHECK_THAT(usage("redis://h/x"), Catch::Contains("database number"));
  CHECK_THAT(usage("s3://A"), Catch::Contains("bucket name"));
  CHECK(usage("redis://:pw@/0").find("pw") == std::string::npos);
}

TEST_CASE("a namespace is joined to a key in one place: '/' for paths, ':' for Redis", "[cache][storage][url]") {
  CHECK(remote_object_name(find_remote_scheme("redis"), "ns", "k") == "ns:k");
  CHECK(remote_object_name(find_remote_scheme("http"), "ns", "k") == "ns/k");
  CHECK(remote_object_name(find_remote_scheme("s3"), "ns", "k") == "ns/k");
  CHECK(remote_object_name(find_remote_scheme("redis"), "", "k") == "k");
  CHECK(remote_object_name(nullptr, "ns", "k") == "ns/k");  // a backend given directly
}

TEST_CASE("the scheme table is the one registration point: parsing, messages and backends read it",
          "[cache][storage][url]") {
  CHECK(remote_scheme_list() == "http://, https://, redis:// or s3://");
  CHECK(find_remote_scheme("ftp") == nullptr);
  for (const char* name : {"http", "https", "redis", "s3"}) {
    const RemoteScheme* s = find_remote_scheme(name);
    REQUIRE(s != nullptr);
    CHECK((s->parse != nullptr && s->make != nullptr));
  }
  // A URL carries its row; a backend is made from the row, not from the text.
  RemoteUrl u = parse_remote_url("http://127.0.0.1:1/c");
  CHECK(u.scheme == find_remote_scheme("http"));
  RemoteUrl none;
  none.shown = "unparsed";
  RemoteOpen opened = make_remote_backend(none, RemoteOptions{});
  CHECK((!opened && opened.error().kind == RemoteFailureKind::kError));
}

TEST_CASE("find: local first, then under the lock the shared tiers; a remote hit is not a miss", "[cache][storage]") {
  World w;
  auto remote = server_with(w.blob_a("remote bytes"));
  Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
  FindOptions local_only{false, true, 5, "building m"};
  Found f = storage.find(w.request_b(), local_only);
  CHECK(f.status == CacheStatus::kMiss);
  CHECK(f.miss_reason == "absent");
  CHECK(remote->gets == 0);      // local only: no remote asked
  CHECK(w.stats.misses == 0);    // and no miss counted (another process builds)

  Found shared = storage.find(w.request_b(), FindOptions{false, false, 5, "building m"});
  REQUIRE(shared.status == CacheStatus::kRemoteHit);
  CHECK(shared.source == "memory://0");
  CHECK((w.stats.misses == 0 && w.stats.remote_hits == 1));
  CHECK(storage.find(w.request_b(), FindOptions{false, false, 5, "building m"}).status == CacheStatus::kHit);
  CHECK(remote->gets == 2);
}

TEST_CASE("find: --force asks no tier and holds the lock for the rebuild; publish and upload follow", "[cache][storage]") {
  World w;
  auto remote = server_with(w.blob_a("remote bytes"));
  Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
  Found f = storage.find(w.request_b(), FindOptions{true, false, 5, "building m"});
  CHECK(f.status == CacheStatus::kMiss);
  CHECK(f.miss_reason == "--force");
  CHECK(f.storable);
  CHECK(f.lock.locked());
  CHECK(remote->gets == 0);
  CHECK(w.stats.misses == 1);

  Staging s = w.store_b.stage();
  std::string built = util::join_path(s.build_dir(), "m.so");
  util::write_file(built, "rebuilt");
  EntryRecord rec;
  rec.kind = "module";
  rec.name = "m";
  rec.key = w.request_b().key.hex;
  rec.portable_key = kPortable;
  rec.base_dir = w.base_b;
  PublishResult p = storage.publish(s, w.request_b(), rec, {{built, "m.so"}});
  CHECK(p.ours);
  CHECK(w.stats.stores == 1);
  storage.upload(w.request_b(), p.entry_dir);
  CHECK(remote->puts == 2);  // the result, then the list
}

TEST_CASE("a URL's backend comes from the scheme table, opened on first use; one that cannot connect is given up",
          "[cache][storage]") {
  World w;
  RemoteOptions o = w.options();
  o.connect_timeout_ms = 2000;
  // Port 1 on the loopback: nobody listens, the connection is refused at once.
  o.servers = parse_remote_urls({"redis://127.0.0.1:1"});
  Storage storage(w.store_b, o, &w.stats);
  CHECK(storage.get(w.request_b(), Tier::kLocal).status == CacheStatus::kMiss);
  CHECK(w.stats.remote_errors == 0);  // a local lookup opens no backend
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  CHECK((w.stats.remote_errors == 1 && w.stats.remote_timeouts == 0));
  CHECK(w.stats.remote_misses == 0);  // no server answered
  storage.get(w.request_b(), Tier::kShared);
  CHECK(w.stats.remote_errors == 1);  // given up: not tried again
}

// ---- several results per key on a remote (cache/results.h) ------------------

TEST_CASE("a remote serves two header revisions both ways, each verified against its id", "[cache][storage][results]") {
  World w;
  util::write_file(util::join_path(w.base_a, "h.h"), "int one;\n");
  const World::Packed one = w.blob_a("built with one", nullptr, {"h.h"});
  util::write_file(util::join_path(w.base_a, "h.h"), "int two;\n");
  const World::Packed two = w.blob_a("built with two", nullptr, {"h.h"});
  auto remote = server_with({two, one});
  for (int round = 0; round < 2; ++round) {
    for (const auto& [text, expected] : {std::pair{"int one;\n", "built with one"}, {"int two;\n", "built with two"}}) {
      // A fresh root each time: the answer comes from the remote.
      util::remove_all(w.store_b.root());
      Store store{open_root(w.store_b.root(), true)};
      util::write_file(util::join_path(w.base_b, "h.h"), text);
      Storage storage(store, w.options(), &w.stats, backends({remote}));
      Found f = storage.get(w.request_b(), Tier::kShared);
      REQUIRE(f.status == CacheStatus::kRemoteHit);
      CHECK(artifact_of(f) == expected);
    }
  }
  CHECK(w.stats.remote_hits == 4);
  CHECK(w.stats.remote_corrupt == 0);
}

TEST_CASE("a remote list naming missing, foreign or oversized results is a miss, never a wrong module",
          "[cache][storage][results]") {
  World w;
  const World::Packed good = w.blob_a("good");
  const World::Packed other = w.blob_a("other");
  SECTION("ids whose objects are gone are skipped") {
    auto remote = server_with({other, good});
    remote->objects.erase(result_object(other.id));
    Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
    Found f = storage.get(w.request_b(), Tier::kShared);
    REQUIRE(f.status == CacheStatus::kRemoteHit);
    CHECK(artifact_of(f) == "good");
    CHECK(w.stats.remote_corrupt == 0);
  }
  SECTION("an object that is not the result its id names is corrupt") {
    auto remote = server_with(good);
    remote->objects[result_object(good.id)] = other.blob;  // swapped in under good's id
    Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
    CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
    CHECK(w.stats.remote_corrupt == 1);
    CHECK(!util::path_exists(w.request_b().key_dir));
  }
  SECTION("a list of another key, a malformed one, or one over the cap is a miss") {
    for (const std::string& list :
         {result_list_text(ResultList{std::string(64, 'd'), {good.id}}), std::string("{\"format\": 1}"),
          std::string("[") + std::string(kMaxResultListBytes, ' ') + "]"}) {
      auto remote = server_with(good);
      remote->objects[object()] = list;
      Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
      CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
      CHECK(remote->gets == 1);  // the result was never fetched
    }
    CHECK(!util::path_exists(w.request_b().key_dir));
  }
  SECTION("a list with more ids than the bound is read up to it") {
    std::string many = "{\"format\": \"tvmffi-jit results 1\", \"key\": \"" + kPortable + "\", \"results\": [";
    for (int i = 0; i < 100; ++i) many += std::string(i ? "," : "") + "\"" + std::string(63, 'e') + "0\"";
    many += "]}";
    auto parsed = parse_result_list(many, kPortable);
    REQUIRE(parsed);
    CHECK(parsed->result_ids.size() == 1);  // duplicates merged
  }
}

TEST_CASE("an oversized result list is one corrupt answer for its key: the server stays in use, a writer repairs it",
          "[cache][storage][results]") {
  World w;
  const World::Packed good = w.blob_a("good");
  auto remote = server_with(good);
  const std::string oversized = std::string(kMaxResultListBytes + 1, ' ');
  remote->objects[object()] = oversized;
  // The backend's answer is about that value, not about the server.
  RemoteGet got = make_memory_backend(remote, "memory://0")->get(object(), kMaxResultListBytes);
  REQUIRE(!got);
  CHECK(got.error().kind == RemoteFailureKind::kCorrupt);

  Storage storage(w.store_b, w.options(true), &w.stats, backends({remote}));
  CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  CHECK((w.stats.remote_corrupt == 1 && w.stats.remote_errors == 0 && w.stats.remote_misses == 1));
  // Not given up: the next key (here the same one, listed properly now) is asked and served.
  remote->objects[object()] = result_list_text(merge_result_list(std::nullopt, kPortable, good.id));
  Found f = storage.get(w.request_b(), Tier::kShared);
  REQUIRE(f.status == CacheStatus::kRemoteHit);
  CHECK(artifact_of(f) == "good");

  // A read-write build that misses on it replaces it, as it replaces a malformed list.
  remote->objects[object()] = oversized;
  util::remove_all(w.store_b.root());
  Store store{open_root(w.store_b.root(), true)};
  Storage writer(store, w.options(), &w.stats, backends({remote}));
  CHECK(writer.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
  std::string built = w.publish_a("built by b");
  writer.upload(w.request_b(), built);
  auto list = parse_result_list(remote->objects[object()], kPortable);
  REQUIRE(list);
  CHECK(list->result_ids == std::vector<std::string>{result_id(**read_entry(built))});
}

TEST_CASE("one lookup downloads at most its budget, however many unusable results its list names",
          "[cache][storage][results]") {
  World w;
  auto remote = empty_server();
  std::optional<ResultList> list;
  for (int i = 0; i < 8; ++i) {
    const std::string id = std::string(63, 'a') + std::to_string(i);
    remote->objects[result_object(id)] = std::string(1000, static_cast<char>('0' + i));  // garbage, not a blob
    list = merge_result_list(list, kPortable, id);
  }
  remote->objects[object()] = result_list_text(*list);
  const uint64_t list_bytes = remote->objects[object()].size();

  SECTION("without a budget in the way every listed result is tried") {
    Storage storage(w.store_b, w.options(true), &w.stats, backends({remote}));
    CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
    CHECK(remote->gets == 9);
    CHECK(w.stats.remote_bytes_received == list_bytes + 8 * 1000);
  }
  SECTION("a budget of the list and two and a half results stops at the third") {
    RemoteOptions o = w.options(true);
    o.max_lookup_bytes = list_bytes + 2500;
    Storage storage(w.store_b, o, &w.stats, backends({remote}));
    CHECK(storage.get(w.request_b(), Tier::kShared).status == CacheStatus::kMiss);
    CHECK(remote->gets == 4);  // the list, two results, and the third refused at the 500 bytes left
    CHECK(w.stats.remote_bytes_received == list_bytes + 2000);
    CHECK((w.stats.remote_corrupt == 3 && w.stats.remote_errors == 0));
    // The budget is per lookup: the next one has its own.
    storage.get(w.request_b(), Tier::kShared);
    CHECK(remote->gets == 8);
  }
}

TEST_CASE("two writers of one key each keep their result; the list is merged, bounded, never corrupt",
          "[cache][storage][results]") {
  World w;
  auto remote = empty_server();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    // Each upload from a facade of its own (another process), against the same server.
    Storage storage(w.store_b, w.options(), &w.stats, backends({remote}));
    std::string dir = w.publish_a("writer " + std::to_string(i));
    storage.upload(w.request_b(), dir);
    ids.push_back(result_id(**read_entry(dir)));
  }
  auto list = parse_result_list(remote->objects[object()], kPortable);
  REQUIRE(list);
  CHECK(list->result_ids.size() == kMaxResultsPerKey);
  CHECK(list->result_ids.front() == ids.back());  // the newest first
  for (const auto& id : ids) CHECK(remote->objects.count(result_object(id)) == 1);  // no result lost
  // A writer that read the list before another wrote it loses at most that id of the hint.
  ResultList stale = merge_result_list(std::nullopt, kPortable, ids[0]);
  remote->objects[object()] = result_list_text(stale);
  CHECK(parse_result_list(remote->objects[object()], kPortable));
  CHECK(remote->objects.count(result_object(ids[9])) == 1);
}

TEST_CASE("cache import keeps at most 8 results of a key, the last imported among them", "[cache][storage][results]") {
  World w;
  std::vector<std::string> imported;
  for (size_t i = 0; i < kMaxResultsPerKey + 3; ++i) {
    std::string exported = util::join_path(w.tmp.path(), "export" + std::to_string(i) + ".tvmffi");
    export_entries({w.publish_a("imported bytes " + std::to_string(i))}, exported);
    ImportReport r = import_entries(w.store_b, exported);
    REQUIRE(r.imported == 1);
    imported.push_back(r.entries.at(0));
  }
  const std::string imported_root = util::join_path(w.store_b.root(), "imported");
  auto names_in = [](const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_directory()) names.push_back(e.path().filename().string());
    return names;
  };
  std::vector<std::string> keys = names_in(imported_root);
  REQUIRE(keys.size() == 1);
  CHECK(names_in(util::join_path(imported_root, keys[0])).size() == kMaxResultsPerKey);
  // The newest import is kept, the oldest are gone.
  CHECK(util::is_directory(util::join_path(imported_root, imported.back())));
  CHECK_FALSE(util::is_directory(util::join_path(imported_root, imported.front())));
}

TEST_CASE("a shared object is read from every remote in order and rewritten on those that take uploads",
          "[cache][storage][shared]") {
  World w;
  auto one = empty_server();
  auto two = empty_server();
  auto down = failing_server(RemoteFailureKind::kError);
  one->objects["ns/notes"] = "from one";
  two->objects["ns/notes"] = std::string(2000, 'x');  // over the caller's cap: left out
  Storage storage(w.store_b, w.options(), &w.stats, backends({one, down, two}));
  CHECK(storage.get_shared_objects("notes", 1000) == std::vector<std::string>{"from one"});
  CHECK(w.stats.remote_bytes_received == 8);
  // What each holds (nullopt: absent, too large) through the change, put back.
  std::vector<std::optional<std::string>> held;
  storage.update_shared_object("notes", 1000, [&](const std::optional<std::string>& h) {
    held.push_back(h);
    return std::optional<std::string>((h ? *h : "new") + "+");
  });
  CHECK(held == std::vector<std::optional<std::string>>{std::string("from one"), std::nullopt});
  CHECK(one->objects["ns/notes"] == "from one+");
  CHECK(two->objects["ns/notes"] == "new+");
  CHECK(down->puts == 0);  // its read failed: nothing is written over what it may hold
  // Not an entry's failure: no server given up, nothing counted but the bytes.
  CHECK(w.stats.remote_errors == 0);
  CHECK(w.stats.remote_corrupt == 0);
  CHECK(storage.get_shared_objects("notes", 1000).size() == 2);
  CHECK(down->gets == 3);
  // A change that puts nothing, and a read-only storage, write nothing.
  storage.update_shared_object("notes", 1000, [](const std::optional<std::string>&) { return std::nullopt; });
  Storage reader(w.store_b, w.options(true), &w.stats, backends({one}));
  reader.update_shared_object("notes", 1000, [](const std::optional<std::string>&) { return std::string("x"); });
  CHECK(one->objects["ns/notes"] == "from one+");
  CHECK(reader.get_shared_objects("notes", 1000) == std::vector<std::string>{"from one+"});
}
