#include "tvmffi_jit/toolchain/environment.h"

#include <cstdlib>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

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

bool env_flag(const EnvLookup& env, const std::string& name, bool fallback) {
  auto v = non_empty(env, name);
  if (!v) return fallback;
  if (auto b = util::parse_bool(*v)) return *b;
  throw usage_error("environment variable " + name + "=" + quote_for_message(*v) +
                    " is not a boolean: use 1, true, yes, on or y to enable it and 0, false, no, off or n to "
                    "disable it (any case), or unset it");
}

int64_t env_duration_ms(const EnvLookup& env, const std::string& name, int64_t fallback_ms) {
  auto v = non_empty(env, name);
  if (!v) return fallback_ms;
  auto ms = util::parse_duration_ms(*v);
  if (!ms || *ms <= 0 || *ms > int64_t{24} * 3600 * 1000)
    throw usage_error("environment variable " + name + "=" + quote_for_message(*v) +
                      " is not a duration: use a positive number with a unit, such as 500ms, 5s or 2m (at most 24h)");
  return *ms;
}

uint64_t env_size(const EnvLookup& env, const std::string& name, uint64_t fallback) {
  auto v = non_empty(env, name);
  if (!v) return fallback;
  auto bytes = util::parse_size(*v);
  if (!bytes || *bytes == 0)
    throw usage_error("environment variable " + name + "=" + quote_for_message(*v) +
                      " is not a size: use a positive number of bytes with an optional unit, such as 64M or 1G");
  return *bytes;
}

}  // namespace tvmffi_jit::toolchain
