// Environment-variable lookup, injectable so discovery logic can be tested
// without touching the process environment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace tvmffi_jit::toolchain {

// Returns the value of a variable, or nullopt when it is unset. An empty value
// is returned as "" (callers decide whether empty means unset).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// getenv().
EnvLookup process_environment();

// A fixed table (tests).
EnvLookup fixed_environment(std::map<std::string, std::string> vars);

// The value when set and non-empty, else nullopt.
std::optional<std::string> non_empty(const EnvLookup& env, const std::string& name);

// A boolean variable of the tool: util::parse_bool()'s spellings
// (1/0, true/false, yes/no, on/off, y/n, any case); unset or empty is
// `fallback`. Anything else throws usage_error (exit 2) naming the variable
// and the accepted spellings.
bool env_flag(const EnvLookup& env, const std::string& name, bool fallback = false);

// A duration variable (util::parse_duration_ms: "250ms", "5s", "2m"), in
// milliseconds; unset or empty is `fallback_ms`. Malformed or zero throws
// usage_error (exit 2) naming the variable.
int64_t env_duration_ms(const EnvLookup& env, const std::string& name, int64_t fallback_ms);

// A size variable (util::parse_size: "64M", "1G", "1048576"), in bytes; unset
// or empty is `fallback`. Malformed or zero throws usage_error (exit 2).
uint64_t env_size(const EnvLookup& env, const std::string& name, uint64_t fallback);

}  // namespace tvmffi_jit::toolchain
