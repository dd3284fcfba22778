#include "tvmffi_jit/cache/key.h"

#include <cstdlib>

#include "tvmffi_jit/util/hash.h"

namespace tvmffi_jit::cache {

namespace {

std::string tool_version_or_default(const std::string& v) { return v.empty() ? TVMFFI_JIT_VERSION : v; }

void hash_source(util::KeyHasher& h, const SourceInput& s) {
  h.field("source.name", s.name);
  h.field("source.directory", s.directory);
  h.field("source.content", s.content);
}

void hash_compiler(util::KeyHasher& h, const CompilerInput& c) {
  h.field("compiler.role", c.role);
  h.field("compiler.path", c.path);
  h.field("compiler.resolved", c.resolved);
  h.field("compiler.identity", c.identity);
}

void hash_environment(util::KeyHasher& h, const std::vector<ModuleKeyInputs::EnvVar>& env) {
  h.field("environment", std::to_string(env.size()));
  for (const auto& v : env) {
    h.field("env.name", v.name);
    h.field(v.set ? "env.value" : "env.unset", v.value);
  }
}

void hash_extra(util::KeyHasher& h, const std::vector<std::pair<std::string, std::string>>& extra) {
  h.field("extra", std::to_string(extra.size()));
  for (const auto& [tag, value] : extra) {
    h.field("extra.tag", tag);
    h.field("extra.value", value);
  }
}

}  // namespace

Key compute_module_key(const ModuleKeyInputs& in, bool keep_trace) {
  util::KeyHasher h(keep_trace);
  h.field("kind", "module");
  h.field("cache_format", std::to_string(kCacheFormatVersion));
  h.field("tool_version", tool_version_or_default(in.tool_version));
  h.field("emit", in.emit_kind);
  h.field("name", in.name);
  h.field("sources", std::to_string(in.sources.size()));
  for (const auto& s : in.sources) hash_source(h, s);
  h.field("functions", std::to_string(in.functions.size()));
  for (const auto& [name, doc] : in.functions) {
    h.field("function.name", name);
    h.field("function.doc", doc);
  }
  h.field("flag_groups", std::to_string(in.flags.size()));
  for (const auto& g : in.flags) {
    h.field("flags.step", g.step);
    h.list("flags", g.flags);
  }
  h.list("include_paths", in.include_paths);
  h.list("archs", in.archs);
  h.field("compilers", std::to_string(in.compilers.size()));
  for (const auto& c : in.compilers) hash_compiler(h, c);
  h.field("tvm_ffi.version", in.tvm_ffi_version);
  h.field("tvm_ffi.include_dir", in.tvm_ffi_include_dir);
  hash_environment(h, in.environment);
  hash_extra(h, in.extra);
  Key k;
  k.trace = h.trace();
  k.hex = h.hex_digest();
  return k;
}

Key compute_object_key(const ObjectKeyInputs& in, bool keep_trace) {
  util::KeyHasher h(keep_trace);
  h.field("kind", "object");
  h.field("cache_format", std::to_string(kCacheFormatVersion));
  h.field("tool_version", tool_version_or_default(in.tool_version));
  h.field("language", in.language);
  hash_compiler(h, in.compiler);
  h.list("flags", in.flags);
  hash_source(h, in.source);
  h.list("include_paths", in.include_paths);
  hash_environment(h, in.environment);
  hash_extra(h, in.extra);
  Key k;
  k.trace = h.trace();
  k.hex = h.hex_digest();
  return k;
}

const std::vector<std::string>& relevant_environment_names() {
  static const std::vector<std::string> names = {"CXX", "CC", "CUDA_HOME"};
  return names;
}

std::vector<ModuleKeyInputs::EnvVar> relevant_environment() {
  std::vector<ModuleKeyInputs::EnvVar> out;
  for (const auto& n : relevant_environment_names()) {
    const char* v = std::getenv(n.c_str());
    out.push_back({n, v ? v : "", v != nullptr});
  }
  return out;
}

}  // namespace tvmffi_jit::cache
