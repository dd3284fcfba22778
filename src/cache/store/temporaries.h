// What <root>/tmp/ holds and which of it nobody will finish: the staging
// directories of builds (Store::stage) and the trash of removals
// (Store::remove_entry). Shared by the store, which clears what an
// interrupted build of this host left before it stages, and by maintenance
// (clean, gc), which also removes what is old.
#pragma once

#include <cstdint>
#include <string>

namespace tvmffi_jit::cache {

// Whether the directory `name` in tmp/ is one nobody will finish. Only names
// of the exact shapes Store creates qualify (anything else in tmp/ is not ours
// and stays):
//   stage.<host>.<pid>.<6 alphanumerics>   (Store::stage, mkdtemp)
//   trash.<pid>.<8 of [a-z0-9]>            (Store::remove_entry)
// Such a directory is abandoned when its process on this host is gone, or
// when it is older than `max_age` seconds (`age_seconds` is its age).
bool is_abandoned_temporary(const std::string& name, int64_t age_seconds, int64_t max_age);

// Removes the staging dirs in `tmp_dir` of this host whose process is gone
// (killed before it cleaned up) and that were not kept for the user
// (kStagingKeptMarker); never another host's (a shared root: only their age
// tells, and gc decides). Every build that stages calls it; failures to
// remove are ignored. Returns how many it removed.
size_t remove_interrupted_staging(const std::string& tmp_dir);

}  // namespace tvmffi_jit::cache
