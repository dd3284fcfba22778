#include "tvmffi_jit/cache/transfer/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cache {

namespace {

// Each entry's files into <dir>/<entry dir name>/.
class TreeReceiver : public BlobFileWriter {
 public:
  explicit TreeReceiver(std::string dir) : dir_(std::move(dir)) {}

 private:
  std::string path_for(const BlobEntry& e, const BlobFile& f) override {
    std::string d = util::join_path(dir_, e.dir);
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) throw io_error(errno_message("cannot create " + d, errno));
    return util::join_path(d, f.name);
  }
  std::string dir_;
};

// A portable entry.json that matches its blob entry and its files; returns
// the module's name and the result's id.
std::pair<std::string, std::string> check_portable_entry(const std::string& dir, const BlobEntry& e) {
  auto text = util::try_read_file(util::join_path(dir, kEntryFileName));
  auto j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!text || j.is_discarded() || !j.is_object()) throw io_error(e.dir + ": entry.json is not a JSON object");
  if (j.value("key", "") != e.key || j.value("portable_key", "") != e.key)
    throw io_error(e.dir + ": entry.json is for another key");
  if (j.value("kind", "") != "module") throw io_error(e.dir + ": entry.json describes no module");
  auto record = entry_from_json(entry_from_portable(j, BaseDir()));
  if (!record) throw io_error(e.dir + ": " + record.why());
  check_entry_name(record->name);
  const std::string id = portable_result_id(j);
  if (result_blob_dir(e.key, id) != e.dir)
    throw io_error(e.dir + ": entry.json describes another result (" + result_blob_dir(e.key, id) + ")");
  for (const auto& a : record->artifacts) {
    std::string p = util::join_path(dir, a.file);
    auto stamp = util::file_stamp(p);
    if (!stamp || stamp->size != a.size || util::sha256_file_hex(p) != a.sha256)
      throw io_error(e.dir + ": artifact " + a.file + " does not match entry.json");
  }
  return {record->name, id};
}

}  // namespace

ExportReport export_entries(const std::vector<std::string>& entry_dirs, const std::string& file,
                            const SecretKey* sign_key) {
  ExportReport report;
  std::vector<BlobPackEntry> pack;
  for (const auto& dir : entry_dirs) {
    try {
      if (sign_key) {
        // Never a signing oracle: the key signs only what a build with it
        // made, or what already carries its signature (cache/trust.h).
        auto read = read_entry(dir);
        if (!read) throw io_error(read.why());
        const EntryRecord& entry = **read;
        if (!carries_own_signature(*sign_key, entry)) {
          const std::string origin = provenance_origin(entry);
          report.skipped.push_back(
              util::file_name(dir) + ": it does not carry the signature of " + sign_key->name + " (" +
              (origin.empty() ? std::string("no provenance recorded")
                              : origin == "built" ? std::string("built without that key")
                                                  : origin + ", not signed by that key") +
              "); --sign-key signs only what a build with that key made: rebuild it with `build --force "
              "--remote-sign-key " + sign_key->name + ".sec`, or export without --sign-key");
          continue;
        }
      }
      pack.push_back(portable_pack_entry(dir));
    } catch (const Error& e) {
      report.skipped.push_back(util::file_name(dir) + ": " + e.what());
    }
  }
  if (pack.empty()) {
    std::string why = "no module entry with a portable key was selected";
    for (const auto& skipped : report.skipped) why += "; not exported: " + skipped;
    throw usage_error("nothing to export: " + why);
  }
  // A unique name created with O_EXCL|O_NOFOLLOW: a symlink planted at a
  // guessable FILE.tmp.<pid> must not redirect the write (util::AtomicFile).
  util::AtomicFile out(file);
  BlobSigner signer;
  if (sign_key) signer = [sign_key](const BlobEntry& e) { return sign_blob_entry(*sign_key, e); };
  write_blob(
      pack,
      [&](const char* d, size_t n) {
        out.write(std::string_view(d, n));
        report.bytes += n;
      },
      3, signer);
  out.sync();
  out.commit();
  report.exported = pack.size();
  return report;
}

ImportReport import_entries(const Store& store, const std::string& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw io_error(errno_message("cannot read " + file, errno));
  if (!S_ISREG(st.st_mode)) throw io_error(file + " is not a regular file");
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw io_error(errno_message("cannot read " + file, errno));
  Staging staging = store.stage();
  BlobManifest m;
  try {
    TreeReceiver rx(staging.build_dir());
    BlobLimits limits;
    limits.max_entries = 1000000;
    limits.max_manifest_bytes = 256u << 20;
    limits.max_total_bytes = 1ull << 40;  // the disk is the real bound
    m = read_blob([&](char* buf, size_t n) { return std::fread(buf, 1, n, f); }, rx, limits);
    if (std::ferror(f)) throw io_error(errno_message("cannot read " + file, errno));
  } catch (const Error& e) {
    std::fclose(f);
    throw io_error(file + ": " + e.what());
  }
  std::fclose(f);
  std::vector<std::pair<std::string, std::string>> results;  // (name, id) of each entry, in order
  for (const auto& e : m.entries) {
    const std::string dir = util::join_path(staging.build_dir(), e.dir);
    results.push_back(check_portable_entry(dir, e));
    // The entry's manifest record, signatures included, for a build with
    // trusted keys to check when it adopts the entry (cache/transfer/transfer.h).
    util::write_file(util::join_path(dir, kImportedRecordName), blob_manifest_text(BlobManifest{{e}}));
  }

  ImportReport report;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const BlobEntry& e = m.entries[i];
    const auto& [name, id] = results[i];
    // <root>/imported/<name>_<key16>/<result16>: a key's results side by side.
    const std::string key_dir = imported_key_dir(store, name, e.key);
    util::make_directories(key_dir, 0700);
    std::string target = util::join_path(key_dir, result_dir_name(id));
    if (store.remove_entry(target)) ++report.replaced;
    std::string from = util::join_path(staging.build_dir(), e.dir);
    if (::rename(from.c_str(), target.c_str()) != 0)
      throw io_error(errno_message("cannot move an imported entry to " + target, errno));
    // Used now (the import is its last use), and a key keeps at most
    // kMaxResultsPerKey results here too.
    ::utimensat(AT_FDCWD, target.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    store.evict_results(key_dir, target);
    ++report.imported;
    report.entries.push_back(name + "_" + e.key.substr(0, 16) + "/" + result_dir_name(id));
  }
  return report;
}

}  // namespace tvmffi_jit::cache
