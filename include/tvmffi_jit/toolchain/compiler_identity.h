// Compiler identity, what cache keys hold of a compiler: the absolute path as
// invoked, the path with symlinks resolved, and the output of
// `<compiler> --version` (or the binary's SHA-256 when --version fails).
//
// Spawning `nvcc --version` costs tens of milliseconds, so the output is
// memoised in <root>/compilers/ under the invoked path, valid while the
// resolved binary's size, mtime, inode and device are unchanged. That stamp
// only decides whether to re-run --version; the key itself holds the version
// text, so touching a compiler changes nothing and replacing it with another
// version changes the key. A hit on a warm memo spawns nothing.
#pragma once

#include <cstddef>
#include <string>

namespace tvmffi_jit::toolchain {

// What a cache key holds of a compiler (the compile layer copies it into
// compile::CompilerInput).
struct CompilerIdentity {
  std::string role;      // "cxx", "cc", "nvcc", "nvcc-host", "link"...
  std::string path;      // absolute path as invoked
  std::string resolved;  // symlinks resolved
  std::string identity;  // `--version` output, then "sha256:<content hash>" (and nvcc.profile's); only the hash when --version failed
};

struct IdentifyOptions {
  std::string memo_dir;  // <root>/compilers; empty: no memo
  bool memo_writable = true;
  double timeout_seconds = 60;
};

// `program` is a path or a name looked up on PATH. Throws Error(kMissingTool)
// if it cannot be found. `role` is copied into the result.
CompilerIdentity identify_compiler(const std::string& role, const std::string& program, const IdentifyOptions& options);

// Removes the identity memos identify_compiler() wrote in `memo_dir`
// (regular files named "<32 hex>.json"), nothing else (`cache clean`).
// Returns how many it removed; a missing directory is none.
size_t remove_identity_memos(const std::string& memo_dir);

}  // namespace tvmffi_jit::toolchain
