// A hit that re-hashed files and found them unchanged writes their new
// stamps into entry.json, so that the next hit, in any process, proves them
// by a stat again (cache/proof.h). Called by Store's lookup; knows nothing of
// the Store but the two directories of its root it writes in.
#pragma once

#include <string>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::cache {

// Rewrites <entry_dir>/entry.json with the stamps of `checked` (a copy of the
// entry that a lookup restamped), keeping every other field of the file as it
// is: through a temp file in `tmp_dir` renamed over it, never in place; only
// while entry.json still has `read_stamp`, the stamp it had when read; only
// under the entry's lock in `locks_dir` (Store::lock's file), tried once
// (busy: skipped). Best effort: false when skipped or failed (the next hit
// re-hashes again, or finds the stamps in this process's memo).
// `written` (may be null): the stamp of the entry.json it wrote, when true.
bool record_stamps(const std::string& locks_dir, const std::string& tmp_dir, const std::string& entry_dir,
                   const EntryRecord& checked, const util::FullStamp& read_stamp, util::FullStamp* written = nullptr);

}  // namespace tvmffi_jit::cache
