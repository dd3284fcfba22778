// Where the tvm-ffi location memo of a build lives (toolchain/tvm_ffi_memo.h
// keeps it; the directories depend on the cache root, which is the compile
// layer's to know).
#pragma once

#include <string>

#include "tvmffi_jit/toolchain/tvm_ffi_memo.h"

namespace tvmffi_jit::compile {

// Where toolchain::find_tvm_ffi_memoized() keeps its memo for a build with
// the resolved cache root `cache_root`: <root>/toolchain, written only while
// the root is writable (opening it creates it, as the build would), and
// `user_dir` (cache::user_toolchain_memo_dir(), shared by all of this user's
// roots; "" when there is none). No directories (a search without memo)
// when `cache_root` is empty.
toolchain::TvmFfiMemoDirs tvm_ffi_memo_dirs(const std::string& cache_root, const std::string& user_dir);

}  // namespace tvmffi_jit::compile
