// Cache entries: one directory holding the artifact file(s) and entry.json.
//
// entry.json (format_version = kCacheFormatVersion):
//   {
//     "format_version": 4,
//     "kind": "module" | "object",
//     "name": "<module name>",                 // objects: the source file name
//     "key": "<64 hex>",                       // the full key; the directory has 16
//     "portable_key": "<64 hex>",              // modules: the path-independent key (cache/portable.h)
//     "base_dir": "/abs/project",              // modules: the base directory the local key binds
//     "tool_version": "0.1.0",
//     "created": <unix seconds>,
//     "artifacts": [{"file": "<name>", "size": <bytes>, "sha256": "<hex>",
//                    "stat": "dev:ino:mtime_ns:ctime_ns"}],   // stat: optional, cache/proof.h
//     "headers": [{"path": "/abs/h.h", "size": <bytes>, "sha256": "<hex>",
//                  "shadows": ["/abs/inc1/h.h", ...]}],   // optional, see HeaderRecord
//                 // a path that is not valid UTF-8 is stored as "path_hex" (its bytes in hex),
//                 // a shadow as {"hex": "<its bytes in hex>"}; the files the linker
//                 // read are recorded here too, as headers are
//     "objects": [{"key": "<64 hex>", "sha256": "<hex>"}],  // modules: the cached objects
//                 // it was linked from and the digest each had when linked

//     "inputs": { ... summary for `cache show`, never used for decisions ... },
//     "compiler_output": "<warnings and notes the compilers printed>",  // at most 1 MiB kept
//     "provenance": {"origin": "built" | "adopted" | "imported", ...}    // cache/trust.h
//   }
// An entry directory appears only by the rename of a complete staging
// directory, so entry.json and every artifact it names exist together; a
// reader still checks each artifact's size (cheap) and `cache verify` its
// SHA-256. An unknown format_version, a malformed file, a missing field or
// a file over kMaxEntryFileBytes is a miss, never an error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::cache {

// The version of entry.json's grammar and of the key layout compile hashes
// (compile/key.h has the version history; bump it on any change to either).
inline constexpr int kCacheFormatVersion = 4;

// An entry's key, as the store and the tiers see it: opaque digests. What is
// hashed into it is the caller's (compile/key.h).
struct Key {
  std::string hex;           // 64 hex chars: the local key (entry directory, entry.json "key")
  std::string portable_hex;  // module keys: the path-independent key (remote tier, export); else empty
  std::string trace;  // readable copy of every hashed field (when asked for)
  std::string short_hex() const { return hex.substr(0, 16); }
};

inline constexpr const char* kEntryFileName = "entry.json";
// entry.json is read as hostile input: a bigger one is not read at all. The
// writer keeps under it by truncating compiler output to
// kMaxStoredCompilerOutput (and refuses to publish an entry that would not fit).
inline constexpr uint64_t kMaxEntryFileBytes = 16ull << 20;
inline constexpr size_t kMaxStoredCompilerOutput = 1u << 20;
// The recorded headers are re-hashed on lookups (always when adopting a
// remote or imported entry): their total size, after merging records of the
// same path, is capped so that an entry cannot make every hit hash gigabytes.
// A header set this big is far beyond any real compile (the CUDA toolkit
// headers an nvcc unit reads are ~6.5 MB); an entry over it is not written
// and not read.
inline constexpr uint64_t kMaxRecordedHeaderBytes = 256ull << 20;

struct ArtifactRecord {
  std::string file;  // a plain file name inside the entry directory
  uint64_t size = 0;
  std::string sha256;
  // The stamp of the artifact hashed, as HeaderRecord::stat (cache/proof.h):
  // recorded when settled, by a publish or by the first hit 2 s or more
  // later. Empty, malformed or foreign: the next lookup re-hashes. Local
  // entries only (portable and remote forms carry none).
  std::string stat;
};

struct HeaderRecord {
  std::string path;  // absolute, as the compiler's depfile named it
  uint64_t size = 0;
  std::string sha256;
  // "dev:ino:mtime_ns:ctime_ns" of the file hashed, when it was old enough to
  // trust (cache/headers.h): a lookup that finds the same stat skips the
  // re-hash. Empty: always re-hash. Machine-local (never exported).
  std::string stat;
  // Paths that did not exist when the header was recorded and that the
  // compiler would have read instead had they existed: the header's name
  // under each include directory searched before the one it was found in
  // (compile/search_dirs.h, record_shadows). A lookup that finds any of them misses.
  std::vector<std::string> shadows;
};

// A cached object a module was linked from (docs/cache.md, "What the cache
// promises"): `cache verify` removes a module together with a bad object it
// was linked from.
struct ObjectRecord {
  std::string key;     // the object entry's full key
  std::string sha256;  // the object file's digest when it was linked
};

struct EntryRecord {
  int format_version = 0;
  std::string kind;  // "module" | "object"
  std::string name;
  std::string key;
  std::string portable_key;  // modules built by this version; empty for objects
  std::string base_dir;      // with portable_key
  std::string tool_version;
  int64_t created = 0;
  std::vector<ArtifactRecord> artifacts;
  std::vector<HeaderRecord> headers;
  std::vector<ObjectRecord> objects;  // modules only
  nlohmann::json inputs = nlohmann::json::object();
  std::string compiler_output;
  // Who made it (cache/trust.h): {"origin": "built" | "adopted" | "imported",
  // ...}; null for an entry written before provenance was recorded. Local
  // only: the portable form never carries it (a server cannot claim "built").
  nlohmann::json provenance;
};

nlohmann::json entry_to_json(const EntryRecord& e);
// Why not, for anything not a well-formed entry of our format.
// Header records must name lexically normal absolute paths (no "." or ".."
// component: a relative record of a portable entry joined onto the base
// cannot leave it); records repeating a path with the same size and SHA-256
// are merged into one, repeating it with another content is malformed; the
// merged sizes must stay within kMaxRecordedHeaderBytes.
Expected<EntryRecord> entry_from_json(const nlohmann::json& j);
// Those rules, on a record read from any form (entry.json, entry.bin): the
// record, its header records merged, or why it is malformed.
Expected<EntryRecord> checked_entry(EntryRecord raw);
// Reads <dir>/entry.json (at most kMaxEntryFileBytes, never through a
// symlink or from a FIFO); why not when missing or malformed.
// `stamp` (may be null): the stamp entry.json had when read (inode 0: none).
// Shared, never copied: a long process (the engine library) hits the same
// entry many times, and copying its hundreds of header records was the
// largest part of an in-process hit.
using SharedEntry = std::shared_ptr<const EntryRecord>;
Expected<SharedEntry> read_entry(const std::string& dir, util::FullStamp* stamp = nullptr);
// Tells read_entry's per-process memo that <dir>/entry.json, now at `stamp`,
// holds `record` (a writer that just replaced it: the next read need not parse it).
void remember_entry(const std::string& dir, const util::FullStamp& stamp, const EntryRecord& record);
// entry.json as JSON (same limits as read_entry), whatever its format version;
// why not when missing, too big or malformed.
Expected<nlohmann::json> read_entry_json(const std::string& dir);
// entry.json serialised for writing: throws Error(kIo) when it would be over
// kMaxEntryFileBytes (thousands of recorded headers), so that every entry
// written can be read back.
std::string entry_file_text(const EntryRecord& e);

}  // namespace tvmffi_jit::cache
