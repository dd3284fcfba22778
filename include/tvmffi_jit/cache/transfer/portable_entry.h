// Module entries in portable form (cache/portable.h) as they travel: packed
// into a blob (uploads, `cache export`), written out of one as it is read,
// kept under <root>/imported/ (`cache import`), and adopted back into the
// local store for a build's own base directory (remote and imported hits).
// Shared by the transfer commands (cache/transfer/transfer.h) and the storage facade
// (cache/storage.h).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::cache {

// `cache import` keeps results here, in portable form, until a build in some
// base directory adopts them: <root>/imported/<name>_<portable key16>/<result16>/.
std::string imported_dir(const Store& store);
// The imported results of one key: <root>/imported/<name>_<portable key16>.
std::string imported_key_dir(const Store& store, const std::string& name, const std::string& portable_key);
// The directory name a result travels under in a blob (and what its
// signatures cover): "<portable key16>.<result16>".
std::string result_blob_dir(const std::string& portable_key, const std::string& result_id);
// The result id (cache/results.h) of a module entry in portable form (as it
// travels), the same as that of the local entry it was packed from.
// Throws Error(kIo) when it is not a well-formed entry.
std::string portable_result_id(const nlohmann::json& portable_entry);
// Beside an imported entry's files: the manifest record it came with,
// signatures included (a dot name no entry file can have).
inline constexpr const char* kImportedRecordName = ".manifest.json";
// The record kept beside the imported entry `dir` when it is the record of
// that entry (`dir_name`, `portable_key`); nullopt for older imports (none)
// and for one that does not match.
std::optional<BlobEntry> imported_record(const std::string& dir, const std::string& dir_name,
                                         const std::string& portable_key);
// Links (or copies) the files of the imported entry `dir` into `staging`'s
// entry dir, for adopt_portable_entry(). Throws Error(kIo).
void stage_imported_entry(const std::string& dir, Staging& staging);

// The pack list of a module result (local form, on disk): entry.json in
// portable form and the artifacts it lists, nothing else, under
// result_blob_dir(). `result_id` (when given) receives its result id.
BlobPackEntry portable_pack_entry(const std::string& entry_dir, std::string* result_id = nullptr);
// That entry as a one-entry blob, signed with `sign_key` when given.
std::string pack_portable_entry(const std::string& entry_dir, const SecretKey* sign_key = nullptr,
                                std::string* result_id = nullptr);

// Writes each file of a blob where path_for() says, as it arrives: created
// exclusively, never through a symlink, entry.json 0644 and artifacts 0755.
class BlobFileWriter : public BlobReceiver {
 public:
  void open(const BlobEntry& entry, const BlobFile& file) final;
  void write(const char* data, size_t size) final;
  void close() final;

 protected:
  virtual std::string path_for(const BlobEntry& entry, const BlobFile& file) = 0;

 private:
  util::FileWriter file_;
};

// Why an entry could not be adopted: its files or entry.json are not what
// they claim (kCorrupt), or the headers it was built against differ here
// (kStale: an ordinary miss, not a fault of whoever made it).
enum class AdoptFailureKind { kCorrupt, kStale };
using AdoptFailure = Failure<AdoptFailureKind>;

// What to adopt, and for which build.
struct AdoptRequest {
  std::string name;          // the module
  std::string portable_key;  // hex
  std::string base_dir;      // binds the portable paths
  std::string key_dir;       // the key's local directory: the result is published inside
  std::string artifact;      // the file the build serves: the entry must list it
  std::string result_id;     // the result asked for: the entry must have this id (cache/results.h)
  std::string source;        // "imported", or the server (redacted URL): its provenance (cache/trust.h)
  KeepOccupant keep;         // whether a valid occupant of the result's dir may answer instead (Store::publish)
  // Besides base_dir, the directories (absolute, lexically normal) its header
  // and library records may name: a record anywhere else is refused before
  // it is looked at (a writer must not learn what exists on this machine).
  std::vector<std::string> roots;
};

// Verifies the portable entry staged in `staging`'s entry dir (entry.json and
// its files, nothing else), binds it to the request's base dir, re-hashes its
// headers and publishes it. With `record` (the manifest record the files came
// with) entry.json and every artifact must have the record's SHA-256; the
// result must have the request's result id.
// Publishing throws Error(kIo) as Store::publish_prepared does.
Expected<LookupResult, AdoptFailure> adopt_portable_entry(const Store& store, Staging& staging,
                                                          const AdoptRequest& request, const BlobEntry* record);

}  // namespace tvmffi_jit::cache
