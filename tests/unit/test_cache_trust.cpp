// The trust policy (cache/trust.h): which provenance each kind of build
// serves, links and signs.
#include <catch2/catch.hpp>

#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

EntryRecord module_entry() {
  EntryRecord e;
  e.kind = "module";
  e.name = "m";
  e.key = std::string(64, 'b');
  e.portable_key = std::string(64, 'a');
  e.base_dir = "/work/proj";
  e.artifacts = {{"m.so", 5000, std::string(64, '2'), {}}};
  e.headers = {{"/work/proj/h.h", 10, std::string(64, '3'), "", {"/work/proj/inc/h.h"}}};
  return e;
}

// The manifest record the entry came with from a server.
BlobEntry record_of(const EntryRecord& e) {
  BlobEntry r;
  r.dir = "m_" + e.portable_key.substr(0, 16);
  r.key = e.portable_key;
  r.files = {{"entry.json", 120, std::string(64, '1')}, {"m.so", 5000, std::string(64, '2')}};
  return r;
}

struct Keys {
  util::TempDir dir, other;
  SecretKey ci, attacker;
  PublicKey ci_pub;
  Keys() {
    generate_key_pair("ci", dir.path());
    generate_key_pair("ci", other.path());
    ci = read_secret_key(dir.path() + "/ci.sec");
    attacker = read_secret_key(other.path() + "/ci.sec");
    ci_pub = read_public_key(dir.path() + "/ci.pub");
  }
};

}  // namespace

TEST_CASE("without keys every self-consistent entry is served, whatever its provenance", "[cache][trust]") {
  TrustPolicy none;
  EntryRecord e = module_entry();
  CHECK_FALSE(none.refuses(e));  // no provenance recorded
  e.provenance = adopted_provenance("redis://cache", nullptr);
  CHECK_FALSE(none.refuses(e));
}

TEST_CASE("with trusted keys an adopted entry is served only if a trusted key signed its record", "[cache][trust]") {
  Keys k;
  TrustPolicy trusting;
  trusting.trusted = {k.ci_pub};
  EntryRecord e = module_entry();
  BlobEntry record = record_of(e);

  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK(trusting.refuses(e).value_or("").find("not signed") != std::string::npos);
  record.signatures = {sign_blob_entry(k.attacker, record)};
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK(trusting.refuses(e).value_or("").find("no trusted key verifies") != std::string::npos);
  record.signatures = {sign_blob_entry(k.ci, record)};
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK_FALSE(trusting.refuses(e));
  CHECK(provenance_origin(e) == "adopted");

  // The signed record pins the artifact: another one in the entry is refused.
  EntryRecord swapped = e;
  swapped.artifacts[0].sha256 = std::string(64, '9');
  CHECK(trusting.refuses(swapped).value_or("").find("not the one its signed manifest record lists") !=
        std::string::npos);
  // An import without its record, and an entry with none, are refused.
  e.provenance = adopted_provenance("imported", nullptr);
  CHECK(trusting.refuses(e));
  e.provenance = nullptr;
  CHECK(trusting.refuses(e).value_or("").find("no provenance") != std::string::npos);
  // What this machine built is served.
  e.provenance = built_provenance(e, nullptr);
  CHECK_FALSE(trusting.refuses(e));
}

TEST_CASE("a signing build serves and signs only what carries its own key's signature", "[cache][trust]") {
  Keys k;
  TrustPolicy signing;
  signing.sign_key = &k.ci;
  EntryRecord e = module_entry();

  e.provenance = built_provenance(e, nullptr);  // built by a build without the key (a PR job)
  CHECK(signing.refuses(e));
  CHECK_FALSE(carries_own_signature(k.ci, e));
  e.provenance = built_provenance(e, &k.attacker);  // same name, another key
  CHECK_FALSE(carries_own_signature(k.ci, e));
  e.provenance = built_provenance(e, &k.ci);
  CHECK(carries_own_signature(k.ci, e));
  CHECK_FALSE(signing.refuses(e));
  // The signature covers what the entry says it is: an edited record loses it.
  EntryRecord edited = e;
  edited.artifacts[0].sha256 = std::string(64, '8');
  CHECK_FALSE(carries_own_signature(k.ci, edited));
  edited = e;
  edited.headers[0].shadows.clear();
  CHECK_FALSE(carries_own_signature(k.ci, edited));
  // Times and stats are not covered (they change on every publish and lookup).
  edited = e;
  edited.created = 12345;
  edited.headers[0].stat = "1:2:3:4";
  CHECK(carries_own_signature(k.ci, edited));

  // An adoption carries its own key's signature only when the key signed its record.
  BlobEntry record = record_of(e);
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK_FALSE(carries_own_signature(k.ci, e));
  record.signatures = {sign_blob_entry(k.ci, record)};
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK(carries_own_signature(k.ci, e));
}

TEST_CASE("a signing build adopts only what its own key or a trusted key signed, never less", "[cache][trust]") {
  Keys k;
  util::TempDir other_dir;
  generate_key_pair("other", other_dir.path());
  SecretKey other = read_secret_key(other_dir.path() + "/other.sec");
  TrustPolicy signing;
  signing.sign_key = &k.ci;
  EntryRecord e = module_entry();
  BlobEntry record = record_of(e);

  // Adopted by a build without keys into a root the signing build shares:
  // unsigned, signed by an impostor of the same name, or by a key it was not
  // told to trust, it is not served.
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK(signing.refuses(e).value_or("").find("not signed") != std::string::npos);
  CHECK(signing.refuses_record(record).value_or("") == "it is not signed");
  for (const SecretKey* signer : {&k.attacker, &other}) {
    record.signatures = {sign_blob_entry(*signer, record)};
    e.provenance = adopted_provenance("redis://cache", &record);
    CHECK(signing.refuses(e).value_or("").find("no trusted key verifies its signature") != std::string::npos);
    CHECK(signing.refuses_record(record).value_or("").find("trusted here: ci (the signing key)") != std::string::npos);
  }
  e.provenance = adopted_provenance("imported", nullptr);
  CHECK(signing.refuses(e).value_or("").find("without the signatures") != std::string::npos);

  // Its own key's signature is enough; so is a trusted key's, when it has one.
  record.signatures = {sign_blob_entry(k.ci, record)};
  e.provenance = adopted_provenance("redis://cache", &record);
  CHECK_FALSE(signing.refuses_record(record));
  CHECK_FALSE(signing.refuses(e));
  record.signatures = {sign_blob_entry(other, record)};
  e.provenance = adopted_provenance("imported", &record);
  TrustPolicy signing_and_trusting = signing;
  signing_and_trusting.trusted = {read_public_key(other_dir.path() + "/other.pub")};
  CHECK(signing.refuses(e));
  CHECK_FALSE(signing_and_trusting.refuses(e));
  CHECK_FALSE(signing_and_trusting.refuses_record(record));

  // Without keys a record is not checked at all.
  CHECK_FALSE(TrustPolicy{}.refuses_record(record_of(e)));
}

TEST_CASE("a per-TU object that claims to be adopted is refused even with a signature", "[cache][trust]") {
  Keys k;
  TrustPolicy signing;
  signing.sign_key = &k.ci;
  EntryRecord o = module_entry();
  o.kind = "object";
  BlobEntry record = record_of(o);
  record.signatures = {sign_blob_entry(k.ci, record)};  // even a record the key really signed
  o.provenance = adopted_provenance("redis://cache", &record);
  CHECK(signing.refuses(o).value_or("").find("per-TU object is only ever built here") != std::string::npos);
  o.provenance = built_provenance(o, &k.ci);
  CHECK_FALSE(signing.refuses(o));
}
