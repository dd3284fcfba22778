// `cache export` / `cache import`: module entries moved as one blob file
// (cache/transfer/blob.h) in portable form (cache/portable.h), for wheels and
// machines without network access.
//
// Import verifies the whole file (every SHA-256, every entry.json) before it
// keeps anything, then keeps each entry under <root>/imported/ in portable
// form; a build that misses locally adopts a matching imported entry for its
// own base directory (re-hashing its headers there), exactly like a remote
// hit (cache/storage.h). Each kept entry keeps its manifest record, signatures
// included, as <entry>/.manifest.json (a dot name no entry file can have), so
// that a build with trusted keys checks the signature when it adopts it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/store.h"

namespace tvmffi_jit::cache {

struct ExportReport {
  size_t exported = 0;
  std::vector<std::string> skipped;  // "<dir>: why"
  uint64_t bytes = 0;                // of the file written
};

// Writes the given module entry directories to `file` (atomically: a temp
// file renamed over it), each entry signed with `sign_key` when given.
// Entries without a portable key are skipped.
ExportReport export_entries(const std::vector<std::string>& entry_dirs, const std::string& file,
                            const SecretKey* sign_key = nullptr);

struct ImportReport {
  size_t imported = 0;
  size_t replaced = 0;  // already imported before: replaced by the file's copy
  std::vector<std::string> entries;
};

// Throws Error(kIo) (exit 5) naming the first problem; nothing is kept then.
ImportReport import_entries(const Store& store, const std::string& file);

}  // namespace tvmffi_jit::cache
