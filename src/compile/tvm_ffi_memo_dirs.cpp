#include "tvmffi_jit/compile/tvm_ffi_memo_dirs.h"

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

toolchain::TvmFfiMemoDirs tvm_ffi_memo_dirs(const std::string& cache_root, const std::string& user_dir) {
  toolchain::TvmFfiMemoDirs dirs;
  if (cache_root.empty()) return dirs;
  dirs.root_dir = util::join_path(cache_root, "toolchain");
  dirs.root_writable = [cache_root] { return cache::open_root(cache_root, true).writable; };
  dirs.user_dir = user_dir;
  return dirs;
}

}  // namespace tvmffi_jit::compile
