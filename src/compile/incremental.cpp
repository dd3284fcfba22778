#include "compile/incremental.h"

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::compile {

namespace {

// Every step id the plan has, for pruning the log.
std::vector<std::string> step_ids(const BuildPlan& plan) {
  std::vector<std::string> ids;
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& s : *steps) ids.push_back(s.object_name);
  if (plan.embed_step) ids.push_back(plan.embed_step->object_name);
  if (plan.link) ids.push_back(plan.link->output_name);
  return ids;
}

}  // namespace

// What decides a unit's output besides its inputs' content: the argv as
// argv() gives it (no launcher, no --threads: neither changes the output)
// and, for a generated source, its text.
std::string unit_command(const CompileStep& step) {
  std::vector<std::pair<std::string, std::string>> extras;
  if (step.generated_text) extras.emplace_back("generated " + step.generated_name, util::sha256_hex(*step.generated_text));
  if (step.split_compile == kSplitCompileAuto) extras.emplace_back("split_compile", "auto");
  return BuildLog::fingerprint(step.argv(), extras);
}

// A unit's inputs: the compiler, the source (a generated one is in the
// command instead) and every file its depfile names.
std::vector<BuildLog::Input> unit_inputs(const CompileStep& step, const CompiledUnit& unit) {
  std::vector<BuildLog::Input> in = {{step.compiler}};
  if (!step.generated_text) in.push_back({step.input_path});
  for (const auto& dep : unit.dependencies) in.push_back({dep});
  return in;
}

// The embed unit's inputs: the compiler and the embedded files (a built one
// as an output of this plan); its assembler source names them, and is in the
// command (unit_command).
std::vector<BuildLog::Input> embed_inputs(const BuildPlan& plan) {
  std::vector<BuildLog::Input> in = {{plan.embed_step->compiler}};
  for (const auto& e : plan.embeds) in.push_back(e.built_name.empty() ? BuildLog::Input{e.path} : BuildLog::Input{e.built_name, true});
  return in;
}

std::string link_command(const LinkStep& link) {
  std::vector<std::string> argv = link.argv();
  if (link.kind == LinkStep::Kind::kCopyObject) argv = {"copy", link.inputs.at(0), link.output_name};
  return BuildLog::fingerprint(argv);
}

std::vector<BuildLog::Input> link_inputs(const LinkStep& link) {
  std::vector<BuildLog::Input> in;
  if (!link.program.empty()) in.push_back({link.program});
  for (const auto& i : link.inputs) in.push_back({i, i.empty() || i[0] != '/'});  // relative: an output of this plan
  return in;
}

Incremental::Incremental(const std::string& dir, const BuildPlan& plan, bool verbose)
    : ids_(step_ids(plan)), verbose_(verbose) {
  util::LockOptions lo;
  lo.note = "building " + plan.name + " in " + dir;
  lo.on_wait = [dir](const util::LockHolder& h) {
    spdlog::warn("waiting for another build in {} ({})", dir, h.text.empty() ? "holder unknown" : h.text);
  };
  lock_ = util::FileLock::acquire(util::join_path(dir, BuildLog::kLockName), lo);
  log_.emplace(dir);
}

Incremental::~Incremental() {
  try {
    log_->save(ids_);
  } catch (const Error& e) {
    spdlog::warn("could not save the build log (the next build runs every step): {}", e.what());
  }
}

bool Incremental::up_to_date(const std::string& id, const std::string& command) {
  Expected<void> current = log_->check_up_to_date(id, command);
  if (current) return true;
  if (verbose_) spdlog::info("{}: runs: {}", id, current.why());
  log_->forget(id);
  return false;
}

}  // namespace tvmffi_jit::compile
