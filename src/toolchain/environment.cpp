#include "tvmffi_jit/toolchain/environment.h"

#include <cstdlib>

namespace tvmffi_jit::toolchain {

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup fixed_environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::optional<std::string> non_empty(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

}  // namespace tvmffi_jit::toolchain
