// Watched hits' bookkeeping for Store::lookup (docs/cache.md, "Watched
// hits"): the proofs kept per result, the files a watched hit still stats,
// and the process's share of inotify watches they hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/change_watch.h"
#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::cache {

// A file a watched hit still stats, because inotify cannot see every write to
// it: a write through a shared mapping moves its mtime and ctime but sends no
// event (util/change_watch.h). Its stamp was taken before the proving checks,
// so any write after it, mapped or not, changes the stamp.
struct StatChecked {
  std::string path;
  bool follow_symlinks = true;
  util::FullStamp stamp;
};

// A proof taken for a lookup and not yet kept: released unless the lookup
// hits and keeps it (an unkept proof would hold its watches for good).
class PendingProof {
 public:
  PendingProof() = default;
  explicit PendingProof(util::ChangeWatch::Proof proof) : proof_(std::move(proof)) {}
  PendingProof(PendingProof&& o) noexcept : proof_(std::move(o.proof_)) { o.proof_.reset(); }
  PendingProof& operator=(PendingProof&&) = delete;
  ~PendingProof() {
    if (proof_) util::ChangeWatch::global().release(*proof_);
  }
  explicit operator bool() const { return proof_.has_value(); }
  util::ChangeWatch::Proof take() {
    util::ChangeWatch::Proof p = std::move(*proof_);
    proof_.reset();
    return p;
  }

 private:
  std::optional<util::ChangeWatch::Proof> proof_;
};

// What a result's proof depends on, watched (see watched_proofs.cpp).
PendingProof watch_result(const std::string& entry_dir, const EntryRecord& entry);

// The files a watched hit of this result stats, stamped now (see watched_proofs.cpp).
std::optional<std::vector<StatChecked>> stamp_stat_checked(const std::string& entry_dir, const EntryRecord& entry,
                                                           const std::vector<std::string>& toolchain_dirs);

// Whether the proof kept for `entry_dir` at exactly `entry_stamp` still holds
// (a proof that fails is released).
bool watched_proof_holds(const std::string& entry_dir, const util::FullStamp& entry_stamp);

// Keeps the proof of a hit of `entry_dir`, read at `entry_stamp`.
void keep_watched_proof(const std::string& entry_dir, const util::FullStamp& entry_stamp,
                        util::ChangeWatch::Proof proof, std::vector<StatChecked> stat_checked);

}  // namespace tvmffi_jit::cache
