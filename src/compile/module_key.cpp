#include "compile/module_key.h"

#include "compile/flag_inputs.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

const char* output_name(CompileOutput o) {
  switch (o) {
    case CompileOutput::kObject: return "object";
    case CompileOutput::kCubin: return "cubin";
    case CompileOutput::kFatbin: return "fatbin";
    case CompileOutput::kPtx: return "ptx";
  }
  return "?";
}

const char* link_kind_name(LinkStep::Kind k) {
  switch (k) {
    case LinkStep::Kind::kSharedLibrary: return "shared-library";
    case LinkStep::Kind::kMergeObjects: return "merge-objects";
    case LinkStep::Kind::kCopyObject: return "copy-object";
  }
  return "?";
}

SourceInput step_source(const CompileStep& step) {
  if (step.generated_text) return {step.generated_name, "", *step.generated_text};
  std::string abs = util::absolute_path(step.input_path);
  return {util::file_name(abs), util::parent_path(abs), util::read_file(abs)};
}

std::vector<std::string> step_flags(const CompileStep& step) {
  std::vector<std::string> argv = step.argv();
  return std::vector<std::string>(argv.begin() + 1, argv.end());  // the program enters as an identity
}

std::vector<std::string> include_paths(const Manifest& m, const toolchain::Toolchain& tc) {
  std::vector<std::string> out;
  for (const auto& p : m.extra_include_paths) out.push_back(util::absolute_path(p));
  for (const auto& p : m.system_include_paths) out.push_back(util::absolute_path(p));
  if (tc.tvm_ffi) {
    out.push_back(tc.tvm_ffi->include_dir);
    out.push_back(tc.tvm_ffi->dlpack_include_dir);
  }
  return out;
}

// What the step's flags make it read (compile/flag_inputs.h), into `extra`;
// why not, when what they read cannot be keyed exactly.
Expected<void> add_flag_reads(const std::vector<std::string>& flags, const std::vector<std::string>& include_dirs,
                              std::vector<std::pair<std::string, std::string>>& extra) {
  FlagReads r = flag_reads(flags, include_dirs);
  for (auto& k : r.keyed) extra.push_back(std::move(k));
  if (r.unkeyable) return Unexpected{std::move(*r.unkeyable)};
  return {};
}

}  // namespace

ObjectKeyInputs object_key_inputs(const CompileStep& step, const Manifest& m, const toolchain::Toolchain& tc,
                                         CompilerIdentities& ids,
                                         const std::vector<ModuleKeyInputs::EnvVar>& environment) {
  ObjectKeyInputs in;
  in.language = language_name(step.language);
  in.compiler = ids.get(in.language, step.compiler);
  in.flags = step_flags(step);
  in.source = step_source(step);
  in.include_paths = include_paths(m, tc);
  in.environment = environment;
  in.extra.push_back({"output", output_name(step.output)});
  in.extra.push_back({"object_name", step.object_name});
  // nvcc's --split-compile chosen per job: the output may differ from an
  // unsplit compile's, so "auto" is keyed (the number is not: any is accepted).
  if (step.split_compile == kSplitCompileAuto) in.extra.push_back({"split_compile", "auto"});
  if (step.language == Language::kCuda)
    if (auto host = ids.nvcc_host(step.flags)) in.extra.push_back({"nvcc_host", host->resolved + "\n" + host->identity});
  // What cannot be keyed is the module's to report (key_inputs_with): a
  // module that cannot be keyed exactly is built, never stored.
  (void)add_flag_reads(in.flags, include_search_dirs(step, "", environment), in.extra);
  return in;
}

std::optional<std::string> project_path_outside_base(const ModuleKeyInputs& in, const Manifest& manifest) {
  if (in.base_dir.empty()) return std::nullopt;
  const cache::BaseDir base(in.base_dir);
  auto outside = [&](const std::string& p) { return !p.empty() && base.portable_path(p) == p; };
  for (const auto& s : in.sources)
    if (outside(s.directory)) return s.directory;
  for (const auto& p : manifest.extra_include_paths)
    if (outside(util::absolute_path(p))) return util::absolute_path(p);
  return std::nullopt;
}

nlohmann::json inputs_summary(const ModuleKeyInputs& in) {
  nlohmann::json j;
  j["emit"] = in.emit_kind;
  j["sources"] = nlohmann::json::array();
  for (const auto& s : in.sources)
    j["sources"].push_back({{"name", s.name}, {"directory", s.directory}, {"sha256", util::sha256_hex(s.content)}});
  j["functions"] = nlohmann::json::array();
  for (const auto& f : in.functions) j["functions"].push_back(f.first);
  j["flags"] = nlohmann::json::object();
  for (const auto& g : in.flags) j["flags"][g.step] = g.flags;
  j["include_paths"] = in.include_paths;
  j["archs"] = in.archs;
  j["compilers"] = nlohmann::json::array();
  for (const auto& c : in.compilers)
    j["compilers"].push_back({{"role", c.role}, {"path", c.path}, {"resolved", c.resolved},
                              {"identity", std::string(util::trim(util::split_lines(c.identity).empty()
                                                                      ? c.identity
                                                                      : util::split_lines(c.identity).front()))}});
  j["tvm_ffi"] = {{"version", in.tvm_ffi_version}, {"include_dir", in.tvm_ffi_include_dir}};
  j["environment"] = nlohmann::json::object();
  for (const auto& v : in.environment) j["environment"][v.name] = v.set ? nlohmann::json(v.value) : nlohmann::json();
  return j;
}

KeyedPlan key_inputs_with(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                          CompilerIdentities& ids, const std::vector<ModuleKeyInputs::EnvVar>& environment) {
  KeyedPlan keyed;
  ModuleKeyInputs& in = keyed.inputs;
  auto note_unkeyable = [&](const Expected<void>& keyable) {
    if (!keyable && !keyed.unkeyable) keyed.unkeyable = keyable.why();
  };
  in.emit_kind = emit_kind_name(plan.emit);
  in.name = plan.name;
  auto add_step = [&](const CompileStep& step, const char* group) {
    in.sources.push_back(step_source(step));
    in.flags.push_back({std::string(group) + " " + step.display + " (" + language_name(step.language) + " -> " +
                            output_name(step.output) + ")",
                        step_flags(step)});
    note_unkeyable(add_flag_reads(in.flags.back().flags, include_search_dirs(step, "", environment), in.extra));
    in.compilers.push_back(ids.get(language_name(step.language), step.compiler));
    if (step.split_compile == kSplitCompileAuto) in.extra.push_back({"split_compile " + step.display, "auto"});
    if (step.language == Language::kCuda)
      if (auto host = ids.nvcc_host(step.flags)) in.compilers.push_back(*host);
  };
  for (const auto& s : plan.device_steps) add_step(s, "device");
  for (const auto& s : plan.compile_steps) add_step(s, "compile");
  if (plan.nvrtc) {
    const NvrtcRequest& r = plan.nvrtc->request;
    in.sources.push_back({r.source_name, "", r.source});
    in.flags.push_back({"nvrtc", r.options});
    in.extra.push_back({"nvrtc.arch", nvrtc_architecture(r)});
    in.extra.push_back({"nvrtc.output", plan.nvrtc->output_name});
    for (const auto& p : r.include_paths) in.extra.push_back({"nvrtc.include", p});
    for (const auto& e : r.name_expressions) in.extra.push_back({"nvrtc.name_expression", e});
    in.compilers.push_back({"nvrtc", "", "", nvrtc_identity()});
  }
  for (const auto& e : plan.embeds) {
    // A user-given binary enters by content; a built one through its device step.
    in.extra.push_back({"embed", e.name + "=" + (e.path.empty() ? "built:" + e.built_name
                                                                 : "sha256:" + util::sha256_file_hex(e.path))});
  }
  if (!plan.embeds.empty()) in.compilers.push_back(ids.get("embed", plan.embed_compiler));
  if (plan.link) {
    const LinkStep& l = *plan.link;
    std::vector<std::string> link_flags = l.flags;
    for (const auto& input : l.inputs) {
      // Objects given as sources are inputs by content, not by path.
      if (!input.empty() && input[0] == '/') link_flags.push_back("input sha256:" + util::sha256_file_hex(input));
      else link_flags.push_back("input " + input);
    }
    note_unkeyable(add_flag_reads(l.flags, {}, in.extra));
    in.flags.push_back({std::string("link ") + link_kind_name(l.kind) + " -> " + l.output_name, link_flags});
    if (!l.program.empty()) in.compilers.push_back(ids.get("link", l.program));
  }
  in.functions = manifest.functions;
  in.include_paths = include_paths(manifest, tc);
  for (const auto& a : plan.archs) in.archs.push_back(a.text());
  if (tc.tvm_ffi) {
    in.tvm_ffi_version = toolchain::tvm_ffi_header_version(tc.tvm_ffi->include_dir).value_or("");
    in.tvm_ffi_include_dir = tc.tvm_ffi->include_dir;
    in.extra.push_back({"tvm_ffi.lib_dir", tc.tvm_ffi->lib_dir});
  }
  // Each distinct compiler once, in first-use order (steps name theirs by path in the flags).
  std::vector<CompilerInput> distinct;
  for (auto& c : in.compilers) {
    bool seen = false;
    for (const auto& d : distinct) seen = seen || (d.role == c.role && d.path == c.path && d.identity == c.identity);
    if (!seen) distinct.push_back(std::move(c));
  }
  in.compilers = std::move(distinct);
  in.environment = environment;
  in.extra.push_back({"device_compiler", device_compiler_name(plan.compiler)});
  for (const auto& k : manifest.kernel_names) in.extra.push_back({"kernel_name", k});
  in.extra.push_back({"artifact", plan.artifact_name});
  return keyed;
}

}  // namespace tvmffi_jit::compile
