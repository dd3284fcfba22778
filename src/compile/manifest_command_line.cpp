// The command line's part of a module (sources, --name, --function, -I,
// --arch, ...), applied over the manifest's and checked as its keys are.
#include "tvmffi_jit/compile/manifest.h"

#include "compile/manifest_checks.h"
#include "compile/manifest_values.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// The directory relative command-line paths start from; "" when the current
// directory is gone (deleted under a running shell): absolute paths still work,
// and a relative one fails in util::absolute_path() saying why.
std::string command_line_base_dir() { return util::find_current_directory().value_or(""); }

void add_sources(const ManifestReader& r, Manifest& m, const std::vector<std::string>& sources) {
  for (const auto& given : sources) {
    std::string resolved = given.empty() ? "" : resolve_manifest_path(r.base_dir, given);
    if (auto ok = check_source(m, given, resolved); !ok) r.fail("source " + quote_for_message(given), ok.why());
    m.sources.push_back(resolved);
  }
}

// --function f or f=doc, repeated.
void add_functions(const ManifestReader& r, Manifest& m, const std::vector<std::string>& specs) {
  for (const auto& spec : specs) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq);
    std::string doc = eq == std::string::npos ? "" : spec.substr(eq + 1);
    add_function(r, m, "--function " + spec, name, doc);
  }
}

// -I or --isystem (`flag`, as messages name it), repeated.
void add_include_flags(const ManifestReader& r, std::vector<std::string>& to, const std::vector<std::string>& dirs,
                      const std::string& flag) {
  for (const auto& given : dirs) {
    std::string resolved = given.empty() ? "" : resolve_manifest_path(r.base_dir, given);
    if (auto ok = check_include_dir(given, resolved); !ok) r.fail(flag + " " + given, ok.why());
    to.push_back(resolved);
  }
}

void append_cli_flags(std::vector<std::string>& to, const std::vector<std::string>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

// --arch, repeated: gfx... names a ROCm target (backend hip), anything else a CUDA arch.
void add_archs(const ManifestReader& r, Manifest& m, const std::vector<std::string>& texts) {
  for (const auto& text : texts) {
    if (util::starts_with(util::trim(text), "gfx")) {
      auto archs = toolchain::try_parse_rocm_arch_list(text);
      if (!archs) r.fail("--arch " + text, archs.why());
      toolchain::merge_rocm_arch_lists(m.command_line_rocm_arch, *archs);
    } else {
      auto archs = toolchain::try_parse_arch_list(text);
      if (!archs) r.fail("--arch " + text, archs.why());
      toolchain::merge_arch_lists(m.command_line_arch, *archs);
    }
  }
}

// An enum word of a flag (--backend, --emit, --compiler) through its value function.
template <typename T>
std::optional<T> flag_word(const ManifestReader& r, const char* flag, const std::optional<std::string>& word,
                           Expected<T> (*value)(const std::string&)) {
  if (!word) return std::nullopt;
  auto parsed = value(*word);
  if (!parsed) r.fail(flag, parsed.why());
  return *parsed;
}

void add_kernel_names(const ManifestReader& r, Manifest& m, const std::vector<std::string>& names) {
  for (const auto& k : names) {
    if (util::trim(k).empty()) r.fail("--kernel-name", "empty kernel name expression");
    m.kernel_names.push_back(k);
  }
}

// --embed-cubin NAME=FILE, repeated.
void add_embeds(const ManifestReader& r, Manifest& m, const std::vector<std::string>& specs) {
  for (const auto& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) r.fail("--embed-cubin " + spec, "expected NAME=FILE");
    add_embed(r, m, "--embed-cubin " + spec, spec.substr(0, eq), spec.substr(eq + 1));
  }
}

void set_launchers(Manifest& m, const CommandLineInputs& cli) {
  if (cli.cxx_launcher) {
    m.cxx_launcher = util::split_any(*cli.cxx_launcher, " \t\n");
    m.cxx_launcher_source = "--cxx-launcher";
  }
  if (cli.cuda_launcher) {
    m.cuda_launcher = util::split_any(*cli.cuda_launcher, " \t\n");
    m.cuda_launcher_source = "--cuda-launcher";
  }
}

// A module with no name from the manifest or --name is named after its first source.
void name_after_first_source(const ManifestReader& r, Manifest& m) {
  if (!m.name.empty() || m.sources.empty()) return;
  std::string stem = util::file_name(m.sources.front());
  stem = stem.substr(0, stem.rfind('.'));
  if (auto ok = check_module_name(stem); !ok)
    r.fail("--name", "the module is named after the first source, but its " + ok.why() + ": pass --name NAME");
  m.name = stem;
}

}  // namespace

void apply_command_line(Manifest& m, const CommandLineInputs& cli) {
  ManifestReader r{kCommandLine, command_line_base_dir()};
  add_sources(r, m, cli.sources);
  if (cli.name) {
    if (auto ok = check_module_name(*cli.name); !ok) r.fail("--name", ok.why());
    m.name = *cli.name;
  }
  add_functions(r, m, cli.functions);
  append_cli_flags(m.extra_cflags, cli.cflags);
  append_cli_flags(m.extra_cuda_cflags, cli.cuda_cflags);
  append_cli_flags(m.extra_ldflags, cli.ldflags);
  add_include_flags(r, m.extra_include_paths, cli.include_paths, "-I");
  add_include_flags(r, m.system_include_paths, cli.system_include_paths, "--isystem");
  m.cuda_runtime = m.cuda_runtime || cli.cuda_runtime;
  m.cuda_driver = m.cuda_driver || cli.cuda_driver;
  if (auto backend = flag_word(r, "--backend", cli.backend, backend_value)) m.backend = *backend;
  add_archs(r, m, cli.arch);
  if (auto emit = flag_word(r, "--emit", cli.emit, emit_value)) m.emit = *emit;
  if (auto compiler = flag_word(r, "--compiler", cli.compiler, compiler_value)) m.compiler = *compiler;
  add_kernel_names(r, m, cli.kernel_names);
  add_embeds(r, m, cli.embed_cubin);
  set_launchers(m, cli);
  name_after_first_source(r, m);
  check_combination(m, &cli);
  if (m.name.empty()) r.fail("--name", "required: pass --name NAME (or give a manifest with \"name\")");
}

}  // namespace tvmffi_jit::compile
