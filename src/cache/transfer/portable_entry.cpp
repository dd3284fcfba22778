#include "tvmffi_jit/cache/transfer/portable_entry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"

namespace tvmffi_jit::cache {

namespace {

// Threads hashing an adopted entry's records: SHA-NI hashes ~1.6 GB/s per
// core, and a few cores take most of it off a remote hit.
const int kAdoptionHashWorkers = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));

// The regular files in `dir` (with `everything`: every name but . and ..).
std::vector<std::string> regular_files(const std::string& dir, bool everything = false) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw io_error(errno_message("cannot list " + dir, errno));
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st;
    if (everything || (::lstat(util::join_path(dir, n).c_str(), &st) == 0 && S_ISREG(st.st_mode))) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void link_or_copy(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return;
  util::write_file(to, util::read_file(from));
}

// The first header, shadow or library record naming a path outside the base
// dir and the request's roots, as a message.
std::optional<std::string> record_outside(const EntryRecord& record, const AdoptRequest& request) {
  auto allowed = [&](const std::string& p) {
    if (util::is_path_under(p, request.base_dir)) return true;
    for (const auto& r : request.roots)
      if (util::is_path_under(p, r)) return true;
    return false;
  };
  for (const auto& h : record.headers) {
    if (!allowed(h.path))
      return "entry.json records " + quote_for_message(h.path) +
             ", outside the base directory and the toolchain's directories (an adopted entry may not name it)";
    for (const auto& s : h.shadows)
      if (!allowed(s))
        return "entry.json records the shadow " + quote_for_message(s) +
               ", outside the base directory and the toolchain's directories (an adopted entry may not name it)";
  }
  return std::nullopt;
}

}  // namespace

std::string imported_dir(const Store& store) { return util::join_path(store.root(), "imported"); }

std::string imported_key_dir(const Store& store, const std::string& name, const std::string& portable_key) {
  if (!is_valid_file_name(name))
    throw usage_error("invalid module name '" + name.substr(0, 64) + "' for the cache: use 1-" +
                      std::to_string(kMaxFileNameLength) + " characters from [A-Za-z0-9_.-], not starting with '.'");
  return util::join_path(imported_dir(store), module_entry_dir_name(name, portable_key));
}

std::string result_blob_dir(const std::string& portable_key, const std::string& result_id) {
  return portable_key.substr(0, 16) + "." + result_dir_name(result_id);
}

std::string portable_result_id(const nlohmann::json& portable_entry) {
  // Bound to a base no real header lies under, the relative header records
  // come back relative from result_id(), as they were where it was packed.
  static const char* const kIdBase = "/.tvmffi-jit-result-id-base";
  auto record = entry_from_json(entry_from_portable(portable_entry, BaseDir(kIdBase)));
  if (!record) throw io_error(record.why());
  return result_id(*record);
}

std::optional<BlobEntry> imported_record(const std::string& dir, const std::string& dir_name,
                                         const std::string& portable_key) {
  auto text = util::read_small_file(util::join_path(dir, kImportedRecordName), 1u << 20);
  if (!text) return std::nullopt;
  BlobManifest m = parse_blob_manifest(*text, BlobLimits{});
  if (m.entries.front().dir != dir_name || m.entries.front().key != portable_key) return std::nullopt;
  return m.entries.front();
}

void stage_imported_entry(const std::string& dir, Staging& staging) {
  for (const auto& f : regular_files(dir))
    if (f != kImportedRecordName) link_or_copy(util::join_path(dir, f), util::join_path(staging.entry_dir(), f));
}

BlobPackEntry portable_pack_entry(const std::string& entry_dir, std::string* result_id_out) {
  auto local = read_entry_json(entry_dir);
  if (!local) throw io_error(entry_dir + ": " + local.why());
  // Parsed for the artifact list: only what entry.json lists travels.
  auto record = entry_from_json(*local);
  if (!record) throw io_error(entry_dir + ": " + record.why());
  nlohmann::json portable = entry_to_portable(*local);
  std::string key = portable.value("key", "");
  const std::string id = result_id(*record);
  if (result_id_out) *result_id_out = id;
  BlobPackEntry e;
  e.dir = result_blob_dir(key, id);
  e.key = key;
  e.files.push_back({kEntryFileName, "", portable.dump(2) + "\n"});
  for (const auto& a : record->artifacts) e.files.push_back({a.file, util::join_path(entry_dir, a.file), std::nullopt});
  return e;
}

std::string pack_portable_entry(const std::string& entry_dir, const SecretKey* sign_key, std::string* result_id) {
  BlobSigner signer;
  if (sign_key) signer = [sign_key](const BlobEntry& e) { return sign_blob_entry(*sign_key, e); };
  return write_blob_to_string({portable_pack_entry(entry_dir, result_id)}, 3, signer);
}

void BlobFileWriter::open(const BlobEntry& entry, const BlobFile& file) {
  const std::string path = path_for(entry, file);
  auto created = util::create_new_file(path, file.name == kEntryFileName ? 0644 : 0755);
  if (!created) throw io_error("cannot write " + path + ": " + created.why());
  file_ = std::move(created).value();
}

void BlobFileWriter::write(const char* data, size_t size) { file_.write({data, size}); }

void BlobFileWriter::close() { file_.close(); }

Expected<LookupResult, AdoptFailure> adopt_portable_entry(const Store& store, Staging& staging,
                                                          const AdoptRequest& request,
                                                          const BlobEntry* manifest_record) {
  using K = AdoptFailureKind;
  const std::string json_path = util::join_path(staging.entry_dir(), kEntryFileName);
  auto text = util::read_small_file(json_path, kMaxEntryFileBytes);
  if (!text) return fail(K::kCorrupt, "entry.json: " + text.why());
  auto recorded = [&](const std::string& file) -> const BlobFile* {
    if (!manifest_record) return nullptr;
    for (const auto& f : manifest_record->files)
      if (f.name == file) return &f;
    return nullptr;
  };
  if (manifest_record) {
    const BlobFile* f = recorded(kEntryFileName);
    if (!f || f->size != text->size() || f->sha256 != util::sha256_hex(*text))
      return fail(K::kCorrupt, "entry.json is not the one its manifest lists");
  }
  auto portable = nlohmann::json::parse(*text, nullptr, false);
  if (portable.is_discarded() || !portable.is_object()) return fail(K::kCorrupt, "entry.json is not a JSON object");
  if (portable.value("key", "") != request.portable_key || portable.value("portable_key", "") != request.portable_key)
    return fail(K::kCorrupt, "entry.json is for another key");
  if (portable.value("name", "") != request.name || portable.value("kind", "") != "module")
    return fail(K::kCorrupt, "entry.json describes another module");
  nlohmann::json local = entry_from_portable(portable, BaseDir(request.base_dir));
  Expected<EntryRecord> record = entry_from_json(local);
  if (!record) return fail(K::kCorrupt, record.why());
  if (auto outside = record_outside(*record, request)) return fail(K::kCorrupt, *outside);
  bool serves_artifact = false;
  for (const auto& a : record->artifacts) serves_artifact = serves_artifact || a.file == request.artifact;
  if (!serves_artifact)
    return fail(K::kCorrupt, "entry.json does not list " + request.artifact + ", the artifact this build serves");
  // Only what entry.json lists is published: anything else in the staging
  // dir (an old import, a planted file) is refused, never served.
  for (const auto& f : regular_files(staging.entry_dir(), true)) {
    bool listed = f == kEntryFileName;
    for (const auto& a : record->artifacts) listed = listed || a.file == f;
    if (!listed) return fail(K::kCorrupt, "the entry holds " + f + ", which its entry.json does not list");
  }
  // The entry's own claims, re-checked against the files (the blob's manifest
  // vouched for the bytes, entry.json for what they are).
  for (const auto& a : record->artifacts) {
    if (manifest_record) {
      const BlobFile* f = recorded(a.file);
      if (!f || f->size != a.size || f->sha256 != a.sha256)
        return fail(K::kCorrupt, "artifact " + a.file + " is not the one its manifest lists");
    }
    std::string p = util::join_path(staging.entry_dir(), a.file);
    auto stamp = util::file_stamp(p);
    if (!stamp || stamp->size != a.size)
      return fail(K::kCorrupt, "artifact " + a.file + " is missing or has the wrong size");
    if (util::sha256_file_hex(p) != a.sha256) return fail(K::kCorrupt, "artifact " + a.file + " does not match entry.json");
  }
  // Content-addressed: what was asked for by its id must be that result.
  if (!request.result_id.empty() && result_id(*record) != request.result_id)
    return fail(K::kCorrupt, "the result is not " + result_dir_name(request.result_id) + ", the one asked for");
  // Every record is hashed (a portable entry carries no stamps): on a few
  // threads, as the ~300 headers of a CUDA unit are most of a remote hit.
  if (auto held = check_and_stamp_headers(record->headers, store.digest_memo(true), nullptr, kAdoptionHashWorkers);
      !held)
    return fail(K::kStale, "header " + held.why());
  // Written from the parsed record: header records merged, nothing else kept
  // that this version does not read, and this machine's stats of what was
  // just checked (a portable entry has none), so later local hits of the
  // adopted entry skip re-hashing them.
  // Where it came from and the signed record it was verified with: the
  // trust policy checks it again at every later lookup (cache/trust.h).
  record->provenance = adopted_provenance(request.source, manifest_record);
  util::write_file(json_path, entry_file_text(*record));
  // Checked above (headers re-hashed once: on a CUDA module they are most of a hit's time).
  PublishResult p = store.publish_prepared(staging, request.key_dir, *record, request.keep);
  LookupResult r;
  r.hit = true;
  r.entry_dir = p.entry_dir;
  r.entry = std::make_shared<const EntryRecord>(std::move(p.entry));
  return r;
}

}  // namespace tvmffi_jit::cache
