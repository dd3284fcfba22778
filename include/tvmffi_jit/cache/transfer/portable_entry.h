// Module entries in portable form (cache/portable.h) as they travel: packed
// into a blob (uploads, `cache export`), written out of one as it is read,
// kept under <root>/imported/ (`cache import`), and adopted back into the
// local store for a build's own base directory (remote and imported hits).
// Shared by the transfer commands (cache/transfer/transfer.h) and the storage facade
// (cache/storage.h).
#pragma once

#include <optional>
#include <string>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::cache {

// `cache import` keeps entries here, in portable form, until a build in some
// base directory adopts them: <root>/imported/<name>_<portable key16>/.
std::string imported_dir(const Store& store);
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

// The pack list of a module entry (local form, on disk): entry.json in
// portable form and the artifacts it lists, nothing else.
BlobPackEntry portable_pack_entry(const std::string& entry_dir);
// That entry as a one-entry blob, signed with `sign_key` when given.
std::string pack_portable_entry(const std::string& entry_dir, const SecretKey* sign_key = nullptr);

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
  std::string entry_dir;     // where the local entry is published
  std::string artifact;      // the file the build serves: the entry must list it
  std::string source;        // "imported", or the server (redacted URL): its provenance (cache/trust.h)
  KeepOccupant keep;         // whether a valid occupant of entry_dir may answer instead (Store::publish)
  // Besides base_dir, the directories (absolute, lexically normal) its header
  // and library records may name: a record anywhere else is refused before
  // it is looked at (a writer must not learn what exists on this machine).
  std::vector<std::string> roots;
};

// Verifies the portable entry staged in `staging`'s entry dir (entry.json and
// its files, nothing else), binds it to the request's base dir, re-hashes its
// headers and publishes it. With `record` (the manifest record the files came
// with) entry.json and every artifact must have the record's SHA-256.
// Publishing throws Error(kIo) as Store::publish_prepared does.
Expected<LookupResult, AdoptFailure> adopt_portable_entry(const Store& store, Staging& staging,
                                                          const AdoptRequest& request, const BlobEntry* record);

}  // namespace tvmffi_jit::cache
