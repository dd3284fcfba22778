// find_tvm_ffi() with the answer of `tvm-ffi-config` / python3 (≈100 ms of
// Python start-up) memoised, so a cache hit spawns nothing. The directories
// are the caller's: the toolchain layer knows no cache root.
#pragma once

#include <functional>
#include <string>

#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::toolchain {

struct TvmFfiMemoDirs {
  // The cache root's memo directory (<root>/toolchain): read first. Empty:
  // no memo at all, tvm-ffi is looked for directly.
  std::string root_dir;
  // Whether a memo may be written in root_dir; asked only after a search
  // (it may create and probe the root), so a memo hit writes nothing.
  std::function<bool()> root_writable;
  // The per-user directory every root of this user shares: a new root (a CI
  // job's fresh cache) reads what another root learnt. Believed only while
  // it is a directory of this user's that no one else may write; created
  // (0700) and written after a search.
  std::string user_dir;
};

// The memo is used only while PATH, PYTHONPATH and the identity (path, size,
// mtime, inode) of the programs that would answer are unchanged and the
// directories it names still hold tvm-ffi; a root given by flag or by
// TVM_FFI_ROOT is resolved directly, as find_tvm_ffi() does.
Expected<TvmFfiLocation> find_tvm_ffi_memoized(const TvmFfiSearch& search, const TvmFfiMemoDirs& dirs);

}  // namespace tvmffi_jit::toolchain
