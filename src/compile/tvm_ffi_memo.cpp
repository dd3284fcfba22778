#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile {

toolchain::TvmFfiMemoDirs tvm_ffi_memo_dirs(const std::string& cache_dir) {
  std::string root;
  try {
    root = cache::resolve_root_path(cache_dir);
  } catch (const Error&) {
    return {};
  }
  toolchain::TvmFfiMemoDirs dirs;
  dirs.root_dir = util::join_path(root, "toolchain");
  dirs.root_writable = [root] { return cache::open_root(root, true).writable; };
  dirs.user_dir = cache::user_toolchain_memo_dir();
  return dirs;
}

}  // namespace tvmffi_jit::compile
