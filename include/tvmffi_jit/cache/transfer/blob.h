// The blob: cache entries moved as one file (remote tier, `cache export` /
// `cache import`).
//
// A blob is a POSIX ustar archive compressed as one zstd frame, so
// `zstd -dc blob | tar tv` lists it. Members, in this order and no others:
//   tvmffi-jit-blob.json        the manifest (below)
//   <dir>/<file>                every file of every entry, in manifest order
// then the two zero blocks that end a tar (zero padding up to a 10240-byte
// record is accepted). Manifest:
//   {"format": "tvmffi-jit-blob", "version": 1,
//    "entries": [{"dir": "<entry dir name>", "key": "<64 hex>",
//                 "files": [{"name": "entry.json", "size": N, "sha256": "<hex>"}, ...],
//                 "signatures": [{"signer": "<key name>", "ed25519": "<base64>"}]}]}
// Every entry's first file is its entry.json (at most kMaxEntryFileBytes),
// and every other file of the entry must be an artifact that entry.json
// lists: a file it does not list is refused before its data is read, so an
// extra member (a 1 GiB pad.bin) is never written anywhere. Names are plain
// cache names (cache/root.h is_valid_entry_name). "signatures" is optional
// (at most kMaxBlobSignatures; cache/transfer/signing.h says what they sign: the
// entry's blob_entry_digest()).
//
// Blobs come from the network and from files users are handed: the reader
// trusts nothing. It checks the manifest's shape and limits before any data,
// every tar header (checksum, type, name, size) against the manifest, every
// file's SHA-256 as it ends, and that the archive ends where it says, and
// throws Error(kIo) on the first problem. What a receiver was given before
// that is to be discarded: nothing is published unless read_blob() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tvmffi_jit::cache {

inline constexpr const char* kBlobManifestName = "tvmffi-jit-blob.json";
inline constexpr int kBlobVersion = 1;

struct BlobFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

// One signature over an entry (cache/transfer/signing.h).
struct BlobSignature {
  std::string signer;     // the signing key's name
  std::string signature;  // kEd25519SignatureBytes raw bytes
};
inline constexpr size_t kMaxBlobSignatures = 8;
// The size of an ed25519 signature: what a blob's manifest may carry.
inline constexpr size_t kEd25519SignatureBytes = 64;

struct BlobEntry {
  std::string dir;  // entry directory name ("<name>_<key16>")
  std::string key;  // 64 hex
  std::vector<BlobFile> files;
  std::vector<BlobSignature> signatures;  // not part of blob_entry_digest()
};

// SHA-256 (64 hex) over what a signature vouches for: the entry's directory
// name, key, and every file's name, size and SHA-256, in order, fed through
// util::KeyHasher (fields "format" = "tvmffi-jit blob entry 1", "dir",
// "key", "files" = the count, then per file "name", "size" (decimal),
// "sha256").
std::string blob_entry_digest(const BlobEntry& entry);

struct BlobManifest {
  std::vector<BlobEntry> entries;
};

struct BlobLimits {
  size_t max_entries = 1;                  // the remote tier: one entry per blob
  size_t max_files_per_entry = 256;
  uint64_t max_manifest_bytes = 1u << 20;
  uint64_t max_total_bytes = 4ull << 30;   // sum of the file sizes the manifest may claim
};

// What to pack: a file on disk, or given content (an entry.json rewritten
// into its portable form).
struct BlobPackFile {
  std::string name;
  std::string path;
  std::optional<std::string> content;
};
struct BlobPackEntry {
  std::string dir;
  std::string key;
  std::vector<BlobPackFile> files;
};

using BlobSink = std::function<void(const char* data, size_t size)>;
// Signs an entry once its files are hashed (write_blob).
using BlobSigner = std::function<BlobSignature(const BlobEntry& entry)>;
// Returns how many bytes it put into `buffer` (at most `size`); 0 at the end.
using BlobSource = std::function<size_t(char* buffer, size_t size)>;

// Hashes every file, then streams the compressed archive into `sink`.
// Throws Error(kIo) when a file cannot be read or a name does not fit ustar
// (entry dir <= 155 bytes, file name <= 100).
// With `signer`, every entry carries its signature. Every entry's first file
// must be its entry.json (the reader's rule).
void write_blob(const std::vector<BlobPackEntry>& entries, const BlobSink& sink, int zstd_level = 3,
                const BlobSigner& signer = nullptr);
std::string write_blob_to_string(const std::vector<BlobPackEntry>& entries, int zstd_level = 3,
                                 const BlobSigner& signer = nullptr);

// Receives the files of a blob as they are read; see read_blob().
class BlobReceiver {
 public:
  virtual ~BlobReceiver() = default;
  virtual void begin(const BlobManifest& manifest) {}
  virtual void open(const BlobEntry& entry, const BlobFile& file) = 0;
  virtual void write(const char* data, size_t size) = 0;
  virtual void close() = 0;  // the file's size and SHA-256 matched
};

// Reads and verifies a whole blob; returns its manifest.
BlobManifest read_blob(const BlobSource& source, BlobReceiver& receiver, const BlobLimits& limits);

// A source over bytes in memory.
BlobSource blob_source(std::string_view bytes);

// Parses and checks a manifest's JSON text (shape and limits only).
BlobManifest parse_blob_manifest(std::string_view text, const BlobLimits& limits);
// A manifest as the writer puts it in a blob (`cache import` keeps each
// imported entry's record, signatures included, this way).
std::string blob_manifest_text(const BlobManifest& manifest);

}  // namespace tvmffi_jit::cache
