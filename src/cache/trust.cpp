#include "tvmffi_jit/cache/trust.h"

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_adopted(const std::string& origin) { return origin == "adopted" || origin == "imported"; }

std::vector<BlobSignature> signatures_of(const nlohmann::json& provenance) {
  std::vector<BlobSignature> out;
  if (!provenance.is_object() || !provenance.contains("signatures") || !provenance["signatures"].is_array())
    return out;
  for (const auto& s : provenance["signatures"]) {
    if (!s.is_object() || !s.contains("signer") || !s.contains("ed25519") || !s["signer"].is_string() ||
        !s["ed25519"].is_string())
      continue;
    auto raw = util::base64_decode(s["ed25519"].get<std::string>());
    if (raw) out.push_back({s["signer"].get<std::string>(), *raw});
  }
  return out;
}

// The manifest record an adopted entry was verified with, if it has a
// well-formed one.
std::optional<BlobEntry> manifest_record_of(const EntryRecord& entry) {
  const nlohmann::json& p = entry.provenance;
  if (!p.is_object() || !p.contains("manifest")) return std::nullopt;
  try {
    BlobManifest m = parse_blob_manifest(p["manifest"].dump(), BlobLimits{});
    return m.entries.front();
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The entry is the one the record describes: its portable key, and every
// artifact at the size and SHA-256 the (signed) record lists.
std::optional<std::string> differs_from_record(const EntryRecord& entry, const BlobEntry& record) {
  if (record.key != entry.portable_key) return "its manifest record is for another key";
  for (const auto& a : entry.artifacts) {
    bool same = false;
    for (const auto& f : record.files) same = same || (f.name == a.file && f.size == a.size && f.sha256 == a.sha256);
    if (!same) return "its artifact " + a.file + " is not the one its signed manifest record lists";
  }
  return std::nullopt;
}

std::string signers(const std::vector<BlobSignature>& sigs) {
  std::string names;
  for (const auto& s : sigs) names += (names.empty() ? "" : ", ") + s.signer;
  return names;
}

std::string where_from(const EntryRecord& entry) {
  const std::string origin = provenance_origin(entry);
  if (origin == "imported") return "imported";
  std::string source = entry.provenance.value("source", std::string());
  return "adopted from " + (source.empty() ? std::string("a remote") : source);
}

}  // namespace

std::string provenance_origin(const EntryRecord& entry) {
  if (!entry.provenance.is_object()) return "";
  auto it = entry.provenance.find("origin");
  return it != entry.provenance.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string entry_record_digest(const EntryRecord& e) {
  util::KeyHasher h;
  h.field("kind", e.kind);
  h.field("name", e.name);
  h.field("key", e.key);
  h.field("portable_key", e.portable_key);
  h.field("base_dir", e.base_dir);
  h.field("artifacts", std::to_string(e.artifacts.size()));
  for (const auto& a : e.artifacts) {
    h.field("file", a.file);
    h.field("size", std::to_string(a.size));
    h.field("sha256", a.sha256);
  }
  h.field("headers", std::to_string(e.headers.size()));
  for (const auto& r : e.headers) {
    h.field("path", r.path);
    h.field("size", std::to_string(r.size));
    h.field("sha256", r.sha256);
    h.list("shadows", r.shadows);
  }
  h.field("objects", std::to_string(e.objects.size()));
  for (const auto& o : e.objects) {
    h.field("object", o.key);
    h.field("sha256", o.sha256);
  }
  return h.hex_digest();
}

nlohmann::json built_provenance(const EntryRecord& entry, const SecretKey* sign_key) {
  nlohmann::json p = {{"origin", "built"}};
  if (sign_key) {
    std::string sig = sign_message(*sign_key, local_signed_message(sign_key->name, entry.key, entry_record_digest(entry)),
                                   entry.name);
    p["signatures"] = nlohmann::json::array({{{"signer", sign_key->name}, {"ed25519", util::base64_encode(sig)}}});
  }
  return p;
}

nlohmann::json adopted_provenance(const std::string& source, const BlobEntry* manifest_record) {
  nlohmann::json p = {{"origin", source == "imported" ? "imported" : "adopted"}};
  if (source != "imported") p["source"] = source;
  if (manifest_record) p["manifest"] = nlohmann::json::parse(blob_manifest_text(BlobManifest{{*manifest_record}}));
  return p;
}

bool carries_own_signature(const SecretKey& key, const EntryRecord& entry) {
  const std::string origin = provenance_origin(entry);
  if (origin == "built") {
    const std::string msg = local_signed_message(key.name, entry.key, entry_record_digest(entry));
    for (const auto& s : signatures_of(entry.provenance))
      if (s.signer == key.name && verify_message(key.public_key, s.signature, msg)) return true;
    return false;
  }
  if (is_adopted(origin)) {
    auto record = manifest_record_of(entry);
    return record && !differs_from_record(entry, *record) &&
           trusted_signer({PublicKey{key.name, key.public_key, ""}}, *record);
  }
  return false;
}

std::optional<std::string> TrustPolicy::refuses_record(const BlobEntry& record) const {
  if (!active()) return std::nullopt;
  // A signing build trusts its own key and nothing less: its key vouches for
  // what it adopts, beside the keys it was told to trust.
  std::vector<PublicKey> keys = trusted;
  if (sign_key) keys.push_back(PublicKey{sign_key->name, sign_key->public_key, ""});
  if (trusted_signer(keys, record)) return std::nullopt;
  if (record.signatures.empty()) return std::string("it is not signed");
  std::string names;
  for (const auto& k : trusted) names += (names.empty() ? "" : ", ") + k.name;
  if (sign_key) names += (names.empty() ? "" : ", ") + sign_key->name + " (the signing key)";
  return "no trusted key verifies its signature (signed as " + signers(record.signatures) + "; trusted here: " +
         names + ")";
}

std::optional<std::string> TrustPolicy::refuses(const EntryRecord& entry) const {
  if (!active()) return std::nullopt;
  const std::string origin = provenance_origin(entry);
  if (is_adopted(origin)) {
    // Objects never travel (only modules are uploaded, exported, imported):
    // one that says otherwise was written by hand into the root.
    if (entry.kind == "object")
      return "a per-TU object is only ever built here, and this one says it was " + where_from(entry);
    auto record = manifest_record_of(entry);
    if (!record) return where_from(entry) + " without the signatures it came with";
    if (auto differs = differs_from_record(entry, *record)) return where_from(entry) + ", but " + *differs;
    if (auto why = refuses_record(*record)) return where_from(entry) + ", and " + *why;
    return std::nullopt;
  }
  if (origin == "built") {
    if (!sign_key || carries_own_signature(*sign_key, entry)) return std::nullopt;
    return "built without the signing key " + sign_key->name +
           " (a signing build uses only what it made itself, or what carries its key's signature or a trusted key's)";
  }
  if (origin.empty()) return std::string("it records no provenance (written by an older tvmffi-jit, or planted)");
  return "its provenance '" + origin + "' is unknown to this tvmffi-jit";
}

}  // namespace tvmffi_jit::cache
