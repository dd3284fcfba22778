#include "compile/compiler_identities.h"

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

const CompilerInput& CompilerIdentities::get(const std::string& role, const std::string& program) {
  auto it = by_program_.find(program);
  if (it == by_program_.end()) {
    toolchain::CompilerIdentity id = toolchain::identify_compiler(role, program, options_);
    it = by_program_.emplace(program, CompilerInput{id.role, id.path, id.resolved, id.identity}).first;
  }
  return it->second;
}

std::optional<CompilerInput> CompilerIdentities::nvcc_host(const std::vector<std::string>& flags) {
  std::string ccbin;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    if ((f == "-ccbin" || f == "--compiler-bindir") && i + 1 < flags.size()) ccbin = flags[i + 1];
    else if (util::starts_with(f, "-ccbin=")) ccbin = f.substr(7);
    else if (util::starts_with(f, "--compiler-bindir=")) ccbin = f.substr(18);
  }
  std::string program = ccbin.empty() ? "gcc" : ccbin;
  if (!ccbin.empty() && util::is_directory(ccbin)) program = util::join_path(ccbin, "gcc");
  if (!util::find_program(program)) return std::nullopt;  // nvcc will fail and say so
  return get("nvcc-host", program);
}

}  // namespace tvmffi_jit::compile
