// Provenance and the trust policy (docs/remote.md, "Trust"): every entry and
// object records who made it, and one policy decides at every door (local
// lookups, imported and remote adoption, the object cache, publish, upload,
// `cache export`, `cache verify`) whether it may be served, linked or signed.
//
// The provenance record, entry.json's "provenance" (local only: the portable
// form drops it, so a server cannot claim anything here):
//   {"origin": "built"}                       compiled and linked by a build here
//   {"origin": "built", "signatures": [{"signer": NAME, "ed25519": B64}]}
//                                             ... by a signing build, which
//                                             signed what it made (below)
//   {"origin": "adopted", "source": URL,      a remote entry: the blob
//    "manifest": {"dir", "key", "files", "signatures"}}   manifest record it
//                                             was verified with, signatures kept
//   {"origin": "imported", "manifest": ...}   from `cache import`
// An entry without a record was written by an older tvmffi-jit (or planted).
//
// A "built" signature is made with the signing key over
//   domain "tvmffi-jit local entry signature v1", signer NAME, key (the
//   entry's full key), record_digest (the SHA-256 of what the entry says it
//   is: kind, name, key, portable key, base dir, artifacts, headers and the
//   objects it was linked from; never the times or the stats)
// in util::KeyHasher's encoding. It is what lets a signing build tell its own
// work from anything else in a root it shares (a CI runner's cache that
// pull-request jobs write too): a per-TU object or a module without it is
// rebuilt, never linked, uploaded or exported with the key.
//
// The policy (TrustPolicy::refuses, and refuses_record for a blob's or an
// import's manifest record before it is adopted). A build trusts the keys it
// was given to trust (--remote-trusted-key) and, when it signs, its own key
// (--remote-sign-key): a signing build trusts nothing less than itself.
//   * with either, an adopted or imported entry is served only if one of
//     those keys signed its manifest record and the entry's artifacts are the
//     ones that record lists, whichever tier it is found in (the local one,
//     the imported entries, a remote); an entry without provenance is not
//     served;
//   * with a signing key, what was built here is served (and linked, and
//     signed) only if it carries this key's "built" signature: a module or
//     object built by a build without the key (a pull-request job sharing the
//     root) is rebuilt;
//   * a per-TU object is only ever built here (objects never travel): one
//     that claims another origin is refused;
//   * with neither, everything that is self-consistent is served.
// A root is trusted by whoever owns it: an entry planted in a root the user
// can write, with a forged "built" record, is out of scope (as Nix trusts its
// own store); signing builds are the exception above.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/transfer/signing.h"

namespace tvmffi_jit::cache {

struct TrustPolicy {
  std::vector<PublicKey> trusted;  // --remote-trusted-key: adopted entries must carry one's signature
  // --remote-sign-key: only its own work is served, linked, signed, and an
  // adopted entry must carry its signature (or a trusted key's).
  const SecretKey* sign_key = nullptr;
  // Whether anything is checked: with neither key every self-consistent
  // entry is served, and nothing adopted needs a signature.
  bool active() const { return !trusted.empty() || sign_key; }
  // Why `entry` may not be served here (nullopt: it may).
  std::optional<std::string> refuses(const EntryRecord& entry) const;
  // Why an entry with this manifest record (a remote blob's, an import's)
  // may not be adopted here: active, and none of the keys this build trusts
  // (the trusted keys, its own signing key) signed it. nullopt: it may.
  std::optional<std::string> refuses_record(const BlobEntry& record) const;
};

// The digest a "built" signature covers (above).
std::string entry_record_digest(const EntryRecord& entry);

// The provenance of an entry this process built: signed with `sign_key` when
// given. `entry` must hold its final artifacts (file, size, SHA-256).
nlohmann::json built_provenance(const EntryRecord& entry, const SecretKey* sign_key);
// The provenance of an adopted entry: where it came from ("imported" for
// `cache import`, else the server as shown) and the manifest record it was
// verified with (nullptr: an older import without one).
nlohmann::json adopted_provenance(const std::string& source, const BlobEntry* manifest_record);

// "built", "adopted", "imported" or "" (no record).
std::string provenance_origin(const EntryRecord& entry);

// Whether `entry` carries `key`'s own signature: built by a build signing with
// it, or adopted from an entry it signed (with the artifacts that entry lists).
// A signing export and upload sign only such entries.
bool carries_own_signature(const SecretKey& key, const EntryRecord& entry);

}  // namespace tvmffi_jit::cache
