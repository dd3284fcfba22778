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
// The policy (TrustPolicy::refuses):
//   * with trusted keys, an adopted or imported entry is served only if a
//     trusted key signed its manifest record and the entry's artifacts are
//     the ones that record lists, whichever tier it is found in; an entry
//     without provenance is not served;
//   * with a signing key, a module or object is served (and linked, and
//     signed) only if it carries this key's signature: built by a build with
//     this key, or adopted from an entry this key signed;
//   * otherwise, everything that is self-consistent is served.
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
  const SecretKey* sign_key = nullptr;  // --remote-sign-key: only its own work is served, linked, signed
  bool active() const { return !trusted.empty() || sign_key; }
  // Why `entry` may not be served here (nullopt: it may).
  std::optional<std::string> refuses(const EntryRecord& entry) const;
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
