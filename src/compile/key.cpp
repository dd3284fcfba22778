#include "tvmffi_jit/compile/key.h"

#include <optional>

#include "compile/portable_args.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/util/hash.h"

namespace tvmffi_jit::compile {

using cache::BaseDir;
using cache::kCacheFormatVersion;
using cache::local_key_hex;

namespace {

std::string tool_version_or_default(const std::string& v) { return v.empty() ? TVMFFI_JIT_VERSION : v; }

// File contents enter as they are; a source without a directory is text the
// planner generated, whose #include lines may name files by absolute path.
void hash_source(util::KeyHasher& h, const SourceInput& s, const BaseDir& base) {
  h.field("source.name", base.portable_path(s.name));
  h.field("source.directory", base.portable_path(s.directory));
  h.field("source.content", s.directory.empty() ? portable_text(base, s.content) : s.content);
}

void hash_compiler(util::KeyHasher& h, const CompilerInput& c, const BaseDir& base) {
  h.field("compiler.role", c.role);
  h.field("compiler.path", base.portable_path(c.path));
  h.field("compiler.resolved", base.portable_path(c.resolved));
  h.field("compiler.identity", c.identity);
}

std::vector<std::string> portable_args(const std::vector<std::string>& args, const BaseDir& base) {
  std::vector<std::string> out;
  out.reserve(args.size());
  for (const auto& a : args) out.push_back(portable_arg(base, a));
  return out;
}

std::vector<std::string> portable_paths(const std::vector<std::string>& paths, const BaseDir& base) {
  std::vector<std::string> out;
  out.reserve(paths.size());
  for (const auto& p : paths) out.push_back(base.portable_path(p));
  return out;
}

void hash_environment(util::KeyHasher& h, const std::vector<ModuleKeyInputs::EnvVar>& env, const BaseDir& base) {
  h.field("environment", std::to_string(env.size()));
  for (const auto& v : env) {
    h.field("env.name", v.name);
    h.field(v.set ? "env.value" : "env.unset", portable_arg(base, v.value));
  }
}

void hash_extra(util::KeyHasher& h, const std::vector<std::pair<std::string, std::string>>& extra,
                const BaseDir& base) {
  h.field("extra", std::to_string(extra.size()));
  for (const auto& [tag, value] : extra) {
    h.field("extra.tag", tag);
    h.field("extra.value", portable_arg(base, value));
  }
}

}  // namespace

Key compute_module_key(const ModuleKeyInputs& in, bool keep_trace) {
  const BaseDir base(in.base_dir);
  util::KeyHasher h(keep_trace);
  h.field("kind", "module");
  h.field("cache_format", std::to_string(kCacheFormatVersion));
  h.field("tool_version", tool_version_or_default(in.tool_version));
  h.field("emit", in.emit_kind);
  h.field("name", in.name);
  h.field("sources", std::to_string(in.sources.size()));
  for (const auto& s : in.sources) hash_source(h, s, base);
  h.field("functions", std::to_string(in.functions.size()));
  for (const auto& [name, doc] : in.functions) {
    h.field("function.name", name);
    h.field("function.doc", doc);
  }
  h.field("flag_groups", std::to_string(in.flags.size()));
  for (const auto& g : in.flags) {
    h.field("flags.step", portable_label(base, g.step));
    h.list("flags", portable_args(g.flags, base));
  }
  h.list("include_paths", portable_paths(in.include_paths, base));
  h.list("archs", in.archs);
  h.field("compilers", std::to_string(in.compilers.size()));
  for (const auto& c : in.compilers) hash_compiler(h, c, base);
  h.field("tvm_ffi.version", in.tvm_ffi_version);
  h.field("tvm_ffi.include_dir", base.portable_path(in.tvm_ffi_include_dir));
  hash_environment(h, in.environment, base);
  hash_extra(h, in.extra, base);
  Key k;
  k.trace = h.trace();
  k.portable_hex = h.hex_digest();
  k.hex = local_key_hex(k.portable_hex, base.path());
  if (keep_trace) k.trace += "base_dir: " + base.path() + "\nportable_key: " + k.portable_hex + "\n";
  return k;
}

Key compute_object_key(const ObjectKeyInputs& in, bool keep_trace) {
  util::KeyHasher h(keep_trace);
  h.field("kind", "object");
  h.field("cache_format", std::to_string(kCacheFormatVersion));
  h.field("tool_version", tool_version_or_default(in.tool_version));
  h.field("language", in.language);
  const BaseDir none;  // objects are local only: every path as it is
  hash_compiler(h, in.compiler, none);
  h.list("flags", in.flags);
  hash_source(h, in.source, none);
  h.list("include_paths", in.include_paths);
  hash_environment(h, in.environment, none);
  hash_extra(h, in.extra, none);
  Key k;
  k.trace = h.trace();
  k.hex = h.hex_digest();
  return k;
}

const std::vector<std::string>& relevant_environment_names() {
  // Why each one is here: docs/cache.md, "The key's inputs". Variables that
  // only change messages' look (GCC_COLORS, TERM), where temp files go
  // (TMPDIR) or a launcher's own behaviour (CCACHE_*, SCCACHE_*) are not keys.
  static const std::vector<std::string> names = {
      // which compilers run
      "CXX", "CC", "CUDA_HOME", "NVCC_CCBIN",
      // nvcc: extra flags on every nvcc command line
      "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
      // nvcc: nvcc.profile appends to these (`INCLUDES += ...`), so values
      // from the environment reach cudafe, ptxas and the host compiler
      "INCLUDES", "SYSTEM_INCLUDES", "LIBRARIES", "CUDAFE_FLAGS", "PTXAS_FLAGS",
      // gcc/g++ (also as nvcc's host compiler): include search
      "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
      // gcc: where its own programs (cc1plus, as, collect2, ld) and libraries come from
      "GCC_EXEC_PREFIX", "COMPILER_PATH", "LIBRARY_PATH",
      // gcc: __DATE__/__TIME__ and timestamps in the output
      "SOURCE_DATE_EPOCH",
      // gcc: extra dependency output written next to ours
      "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES",
      // GNU ld: default run path, target, emulation
      "LD_RUN_PATH", "GNUTARGET", "LDEMULATION",
      // hipcc (backend hip): which clang and device libraries it runs, the
      // platform it targets, and flags it appends to every compile and link
      "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "HIP_PLATFORM", "HIP_COMPILER", "HIP_RUNTIME", "HIP_CLANG_PATH",
      "HIP_DEVICE_LIB_PATH", "DEVICE_LIB_PATH", "HIPCC_COMPILE_FLAGS_APPEND", "HIPCC_LINK_FLAGS_APPEND",
  };
  return names;
}

std::vector<ModuleKeyInputs::EnvVar> relevant_environment(
    const std::function<std::optional<std::string>(const std::string& name)>& env) {
  std::vector<ModuleKeyInputs::EnvVar> out;
  for (const auto& n : relevant_environment_names()) {
    std::optional<std::string> v = env(n);
    out.push_back({n, v.value_or(""), v.has_value()});
  }
  return out;
}

}  // namespace tvmffi_jit::compile
