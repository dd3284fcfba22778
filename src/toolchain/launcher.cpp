// Launcher precedence (toolchain/compilers.h): one function, so a build and
// doctor cannot disagree about which launcher is configured.
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

LauncherWords choose_launcher(const std::optional<std::vector<std::string>>& given, const std::string& given_source,
                              const std::optional<std::string>& env_value, const std::string& env_name,
                              const std::vector<std::string>& compiler_words, const std::string& compiler_variable) {
  if (given) return {*given, given_source};
  if (env_value && !util::trim(*env_value).empty()) return {split_launcher_text(*env_value), env_name};
  if (!compiler_words.empty()) return {compiler_words, compiler_variable};
  return {};
}

}  // namespace tvmffi_jit::toolchain
