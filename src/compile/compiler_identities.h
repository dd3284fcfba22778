// The compilers of one build, identified once each (cache keys hold their
// identity: compile/key.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/toolchain/compiler_identity.h"

namespace tvmffi_jit::compile {

// Memoised compiler identities for one build (a compiler used by ten units is
// identified once).
class CompilerIdentities {
 public:
  CompilerIdentities(std::string memo_dir, bool writable) {
    options_.memo_dir = std::move(memo_dir);
    options_.memo_writable = writable;
  }
  const CompilerInput& get(const std::string& role, const std::string& program);
  // The host compiler nvcc will run: -ccbin/--compiler-bindir (a program or
  // a directory holding gcc), else gcc on PATH.
  std::optional<CompilerInput> nvcc_host(const std::vector<std::string>& flags);

 private:
  toolchain::IdentifyOptions options_;
  std::map<std::string, CompilerInput> by_program_;
};

}  // namespace tvmffi_jit::compile
