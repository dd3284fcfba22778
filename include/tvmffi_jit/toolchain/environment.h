// Environment-variable lookup, injectable so discovery logic can be tested
// without touching the process environment.
#pragma once

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

}  // namespace tvmffi_jit::toolchain
