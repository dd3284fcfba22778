#include "tvmffi_jit/compile/executor.h"

#include <chrono>
#include <mutex>
#include <optional>

#include "compile/backends.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/parallel.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

using Clock = std::chrono::steady_clock;

std::string resolve_in(const std::string& dir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return util::absolute_path(path);
  return util::absolute_path(util::join_path(dir, path));
}

// Writes generated text only when it differs, so a rebuild in the same
// directory keeps the file's mtime (tvm_ffi's _maybe_write).
void write_if_changed(const std::string& path, const std::string& text) {
  if (auto old = util::try_read_file(path); old && *old == text) return;
  util::write_file_atomic(path, text);
}

// Output of successful commands (warnings, ptxas info) is shown, not
// swallowed (apache/tvm-ffi#565): it is often the only hint of a problem.
// Through the progress line, which erases itself first and serialises writers.
void echo_output(const CommandRecord& rec, const ExecuteOptions& options) {
  if (options.hide_compiler_output || rec.output.empty()) return;
  util::Progress::global().print_above(rec.output);
}

void log_command(const std::vector<std::string>& argv, const ExecuteOptions& options) {
  if (options.verbose) spdlog::info("{}", util::format_command(argv));
}

CompiledUnit read_unit(const CompileStep& step, const std::string& dir) {
  CompiledUnit unit;
  unit.object_path = util::join_path(dir, step.object_name);
  unit.depfile_path = util::join_path(dir, step.depfile_name);
  std::string input = resolve_in(dir, step.compiler_input());
  if (auto text = util::try_read_file(unit.depfile_path)) {
    for (const auto& dep : cache::parse_depfile(*text)) {
      std::string abs = resolve_in(dir, dep);
      if (abs != input) unit.dependencies.push_back(abs);
    }
  }
  return unit;
}

}  // namespace

namespace detail {

CommandRecord run_checked(const std::vector<std::string>& argv, const std::string& dir, const std::string& what) {
  util::ProcessOptions po;
  po.cwd = dir;
  po.merge_stderr = true;
  util::ProcessResult r = util::run_process(argv, po);
  CommandRecord rec;
  rec.argv = argv;
  rec.description = what;
  rec.output = r.out;
  rec.seconds = r.seconds;
  if (!r.ok()) {
    std::string out = r.out;
    if (!out.empty() && out.back() != '\n') out += '\n';
    throw build_error(what + " failed (" + r.status_text() + "):\n  cd " + util::shell_quote(dir) + " && " +
                      util::format_command(argv) + "\n" + out);
  }
  return rec;
}

}  // namespace detail

namespace {

// What the plan expects a successful compile of `step` to leave in `dir`, or
// nullopt when it is all there. A compiler (or a launcher in front of it)
// that exits 0 without writing its object would otherwise fail later, at the
// link, with a message about the wrong step.
std::optional<std::string> missing_output(const CompileStep& step, const std::string& dir) {
  if (!util::is_regular_file(util::join_path(dir, step.object_name))) return step.object_name;
  return std::nullopt;
}

// Runs the compiler of one unit in `dir` (its generated source written
// first) and checks what it wrote. Throws as execute_plan().
CommandRecord compile_unit(const CompileStep& step, const std::string& dir, const ExecuteOptions& options) {
  if (step.generated_text) write_if_changed(util::join_path(dir, step.generated_name), *step.generated_text);
  // A stale object from an earlier build in the same directory must not
  // survive a failed compile.
  util::remove_all(util::join_path(dir, step.object_name));
  util::remove_all(util::join_path(dir, step.depfile_name));
  // launch.h: the job gate, the launcher, its output check and fallback.
  CommandRecord rec = run_step_command(step, dir, &options);
  const std::vector<std::string>& argv = rec.argv;
  if (auto missing = missing_output(step, dir))
    throw build_error("compiling " + step.display + " exited 0 but did not write " + *missing + ":\n  cd " +
                      util::shell_quote(dir) + " && " + util::format_command(argv) + "\n" + rec.output);
  return rec;
}

}  // namespace

size_t progress_steps(const BuildPlan& plan) {
  return plan.device_steps.size() + plan.compile_steps.size() + (plan.nvrtc ? 1 : 0) + (plan.embeds.empty() ? 0 : 1) +
         (plan.link ? 1 : 0);
}

BuildResult execute_plan(const BuildPlan& plan, const std::string& build_dir, const ExecuteOptions& options,
                         const CompileHooks& hooks) {
  const auto start = Clock::now();
  util::ProgressScope progress(progress_steps(plan));
  util::make_directories(build_dir);
  BuildResult result;
  result.build_dir = util::canonical_path(build_dir);
  const std::string& dir = result.build_dir;
  result.units.resize(plan.compile_steps.size());
  result.device_units.resize(plan.device_steps.size());

  // Every compile is independent (embedded cubins included), so they share
  // one pool; NVRTC, the embed unit and the link wait for all of them.
  std::vector<UnitRef> units;
  for (size_t i = 0; i < plan.device_steps.size(); ++i)
    units.push_back({units.size(), plan.device_steps[i], result.device_units[i]});
  for (size_t i = 0; i < plan.compile_steps.size(); ++i)
    units.push_back({units.size(), plan.compile_steps[i], result.units[i]});

  std::mutex mutex;
  util::parallel_for(units.size(), options.jobs, [&](size_t i) {
    const UnitRef& u = units[i];
    const std::string label = util::file_name(u.step.compiler) + " " + u.step.display;
    if (hooks.before_compile) {
      if (std::optional<CommandRecord> served = hooks.before_compile(u, dir)) {
        util::Progress::global().next(label + " (cached)");
        echo_output(*served, options);
        std::lock_guard<std::mutex> lock(mutex);
        result.reused.push_back(std::move(*served));
        return;
      }
    }
    util::Progress::global().next(label);
    CommandRecord rec = compile_unit(u.step, dir, options);
    u.unit = read_unit(u.step, dir);
    echo_output(rec, options);
    if (hooks.after_compile) hooks.after_compile(u, dir, rec);
    std::lock_guard<std::mutex> lock(mutex);
    result.commands.push_back(std::move(rec));
  });

  if (plan.nvrtc) {
    util::Progress::global().next("nvrtc " + plan.nvrtc->request.source_name);
    if (options.verbose) spdlog::info("nvrtc {} --gpu-architecture={}", plan.nvrtc->request.source_name, plan.nvrtc->request.arch);
    CommandRecord rec = detail::run_nvrtc_step(*plan.nvrtc, dir, &result);
    echo_output(rec, options);
    result.commands.push_back(std::move(rec));
  }

  if (!plan.embeds.empty()) {
    std::vector<std::string> names;
    for (const auto& e : plan.embeds) names.push_back(e.name);
    util::Progress::global().next("embed " + util::join(names, ", "));
    CommandRecord rec = detail::compile_embed_unit(plan, dir);
    if (options.verbose) spdlog::info("{}", util::format_command(rec.argv));
    echo_output(rec, options);
    result.commands.push_back(std::move(rec));
  }

  if (plan.link) {
    const LinkStep& link = *plan.link;
    std::string out = util::join_path(dir, link.output_name);
    util::remove_all(out);
    util::Progress::global().next((link.kind == LinkStep::Kind::kCopyObject ? "copy " : "link ") + link.output_name);
    if (link.kind == LinkStep::Kind::kCopyObject) {
      auto copy_start = Clock::now();
      std::string input = resolve_in(dir, link.inputs.at(0));
      if (options.verbose) spdlog::info("cp {} {}", util::shell_quote(input), util::shell_quote(link.output_name));
      util::write_file_atomic(out, util::read_file(input));
      CommandRecord rec;
      rec.description = "copy " + link.inputs[0] + " to " + link.output_name;
      rec.seconds = std::chrono::duration<double>(Clock::now() - copy_start).count();
      result.commands.push_back(std::move(rec));
    } else {
      std::vector<std::string> argv = link.argv();
      util::JobGate::Ticket ticket;
      if (options.gate) ticket = options.gate->acquire(1, host_job_bytes(options.cuda_job_bytes));
      log_command(argv, options);
      if (!link.depfile_name.empty()) util::remove_all(util::join_path(dir, link.depfile_name));
      CommandRecord rec = detail::run_checked(argv, dir, "linking " + link.output_name);
      if (!link.depfile_name.empty())
        if (auto text = util::try_read_file(util::join_path(dir, link.depfile_name))) {
          result.link_dependencies.emplace();
          for (const auto& dep : cache::parse_depfile(*text)) result.link_dependencies->push_back(resolve_in(dir, dep));
        }
      echo_output(rec, options);
      result.commands.push_back(std::move(rec));
    }
  }

  result.artifact_path = util::join_path(dir, plan.artifact_name);
  if (!util::is_regular_file(result.artifact_path))
    throw build_error("the build finished but did not produce " + result.artifact_path);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace tvmffi_jit::compile
