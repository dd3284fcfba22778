#include "tvmffi_jit/compile/executor.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>

#include "compile/command.h"
#include "compile/incremental.h"
#include "compile/nvrtc_step.h"
#include "tvmffi_jit/compile/build_log.h"
#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/parallel.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

using Clock = std::chrono::steady_clock;

// A path a compiler or linker was given or reported, relative to the `dir` it
// ran in, as the file it opened ("-I/p/link/.." reads beside link's target).
std::string resolve_in(const std::string& dir, const std::string& path) {
  return util::opened_path(!path.empty() && path[0] == '/' ? path : util::join_path(dir, path));
}

// Writes generated text only when it differs, so a rebuild in the same
// directory keeps the file's mtime (tvm_ffi's _maybe_write).
void write_if_changed(const std::string& path, const std::string& text) {
  if (auto old = util::try_read_file(path); old && *old == text) return;
  util::write_file_atomic(path, text);
}

// The output a finished step shows (its warnings), or nothing under
// hide_compiler_output.
std::string_view shown_output(const CommandRecord& rec, const ExecuteOptions& options) {
  return options.hide_compiler_output ? std::string_view() : std::string_view(rec.output);
}

void log_command(const std::vector<std::string>& argv, const ExecuteOptions& options) {
  if (options.verbose) spdlog::info("{}", util::format_command(argv));
}

CompiledUnit read_unit(const CompileStep& step, const std::string& dir) {
  CompiledUnit unit;
  unit.object_path = util::join_path(dir, step.object_name);
  if (step.depfile_name.empty()) return unit;  // a step that writes none (the embed unit)
  unit.depfile_path = util::join_path(dir, step.depfile_name);
  std::string input = resolve_in(dir, step.compiler_input());
  if (auto text = util::try_read_file(unit.depfile_path)) {
    for (const auto& dep : parse_depfile(*text)) {
      std::string abs = resolve_in(dir, dep);
      if (abs != input) unit.dependencies.push_back(abs);
    }
  }
  return unit;
}

// The function among the unit's exports that the compiler says is not
// declared (gcc: 'f' was not declared, clang: undeclared identifier 'f',
// nvcc: identifier "f" is undefined), if any.
std::optional<std::string> undeclared_export(const CompileStep& step, const std::string& output) {
  for (const auto& f : step.exports)
    for (const auto& [open, close] : {std::pair{"'", "'"}, std::pair{"\u2018", "\u2019"}}) {
      const std::string quoted = open + f + close;
      if (output.find(quoted + " was not declared") != std::string::npos ||
          output.find("undeclared identifier " + quoted) != std::string::npos ||
          output.find("identifier \"" + f + "\" is undefined") != std::string::npos)
        return f;
    }
  return std::nullopt;
}

// Runs the compiler of one unit in `dir` (its generated source written
// first) and checks what it wrote: a failed or silent compiler is returned,
// what cannot go on (I/O, a compiler that cannot start) throws.
Expected<CommandRecord, CommandFailure> compile_unit(const CompileStep& step, const std::string& dir,
                                                     const ExecuteOptions& options) {
  if (step.generated_text) write_if_changed(util::join_path(dir, step.generated_name), *step.generated_text);
  // A stale object from an earlier build in the same directory must not
  // survive a failed compile.
  util::remove_all(util::join_path(dir, step.object_name));
  if (!step.depfile_name.empty()) util::remove_all(util::join_path(dir, step.depfile_name));
  // launch.h: the job gate, the launcher, its output check and fallback.
  auto rec = run_step_command(step, dir, options);
  if (!rec) {
    // An export defined in another source of a mixed module (a .cu beside
    // the .cc that holds the wrappers) fails with dozens of lines of macro
    // errors; one line first says what to do.
    if (auto f = undeclared_export(step, rec.error().record.output))
      return Unexpected<CommandFailure>{CommandFailure{
          rec.error().kind,
          "exported function " + quote_for_message(*f) + " is not declared in " + step.exports_source +
              ", the source that holds the export wrappers (as in tvm_ffi.cpp): declare it there (a prototype "
              "is enough when another source defines it)\n" + rec.error().message,
          rec.error().record}};
    return rec;
  }
  // A compiler (or a launcher in front of it) that exits 0 without writing
  // its outputs would otherwise fail later, at the link, with a message about
  // the wrong step.
  if (auto missing = missing_compile_output(step, dir))
    return Unexpected<CommandFailure>{CommandFailure{
        CommandFailureKind::kNoOutput,
        "compiling " + step.display + " exited 0 but " + *missing + ":\n  cd " + util::shell_quote(dir) +
            " && " + util::format_command(rec->argv) + "\n" + rec->output,
        *rec}};
  return rec;
}

// The outputs a step leaves for the build log to stamp.
std::vector<std::string> step_outputs(const CompileStep& step) {
  if (step.depfile_name.empty()) return {step.object_name};
  return {step.object_name, step.depfile_name};
}

// Links into a new file beside the artifact and renames it over: a process
// that has the old module loaded keeps its mapping of the old inode, and no
// reader ever sees a half-written module.
Expected<CommandRecord, CommandFailure> link_by_rename(const LinkStep& link, const std::string& dir,
                                                       const ExecuteOptions& options) {
  LinkStep temp = link;
  temp.output_name = "." + link.output_name + ".tmp." + std::to_string(::getpid());
  const std::string temp_path = util::join_path(dir, temp.output_name);
  util::remove_all(temp_path);
  std::vector<std::string> argv = temp.argv();
  log_command(argv, options);
  std::optional<Expected<CommandRecord, CommandFailure>> rec;
  try {
    rec.emplace(detail::run_command(argv, dir, "linking " + link.output_name, options));
  } catch (...) {  // cleanup only: a linker that cannot start, or a termination signal
    util::remove_all(temp_path);
    throw;
  }
  if (!*rec) {
    util::remove_all(temp_path);
    return *rec;
  }
  if (::rename(temp_path.c_str(), util::join_path(dir, link.output_name).c_str()) != 0) {
    const int err = errno;
    util::remove_all(temp_path);
    throw io_error(errno_message("cannot rename " + temp_path + " to " + link.output_name, err));
  }
  return *rec;
}

}  // namespace

size_t progress_steps(const BuildPlan& plan) {
  return plan.device_steps.size() + plan.compile_steps.size() + (plan.nvrtc ? 1 : 0) + (plan.embed_step ? 1 : 0) +
         (plan.link ? 1 : 0);
}

namespace {

// begin() on construction, end() on destruction (also when a step throws).
class StatusRun {
 public:
  StatusRun(StatusSink& sink, size_t steps) : sink_(sink) { sink_.begin(steps); }
  ~StatusRun() { sink_.end(); }
  StatusRun(const StatusRun&) = delete;
  StatusRun& operator=(const StatusRun&) = delete;

 private:
  StatusSink& sink_;
};

// A step that did not run its command: shown as started and finished at once.
void show_skipped(StatusSink& status, const std::string& label, std::string_view output = {}) {
  status.started(label);
  status.finished(label, output);
}

// The units of a plan (device steps, then compile steps), run in parallel on
// `options.jobs` workers: each is skipped as up to date, served by a hook, or
// compiled. The first failed compile stops the scheduling of units not yet
// started (those running finish) and is returned; nothing after the units
// runs then. Scheduling across modules of a batch is the job gate's (through
// run_step_command), not this function's.
std::optional<CommandFailure> run_units(std::vector<UnitRef>& units, const std::string& dir,
                                        const ExecuteOptions& options, const CompileHooks& hooks,
                                        Incremental* incremental, BuildResult& result) {
  StatusSink& status = options.status_sink();
  std::vector<char> unit_up_to_date(units.size(), 0);
  std::mutex mutex;
  std::optional<CommandFailure> failure;
  std::atomic<bool> stop{false};
  util::parallel_for(units.size(), options.jobs, [&](size_t i) {
    if (stop.load()) return;
    const UnitRef& u = units[i];
    const std::string label =
        util::file_name(u.step.compiler) + " " + (options.module.empty() ? "" : options.module + ": ") + u.step.display;
    std::string command;
    if (incremental) {
      // The generated source is (re)written first either way: later steps
      // and a re-run of a failed command read it from the directory.
      if (u.step.generated_text) write_if_changed(util::join_path(dir, u.step.generated_name), *u.step.generated_text);
      command = unit_command(u.step);
      if (incremental->up_to_date(u.step.object_name, command)) {
        show_skipped(status, label + " (up to date)");
        u.unit = read_unit(u.step, dir);
        unit_up_to_date[i] = 1;
        return;
      }
    }
    if (hooks.before_compile) {
      if (std::optional<CommandRecord> served = hooks.before_compile(u, dir)) {
        show_skipped(status, label + " (cached)", shown_output(*served, options));
        std::lock_guard<std::mutex> lock(mutex);
        result.reused.push_back(std::move(*served));
        return;
      }
    }
    status.started(label);
    const int64_t started_ns = BuildLog::now_ns();
    auto rec = compile_unit(u.step, dir, options);
    if (!rec) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failure) failure = std::move(rec).error();
      stop = true;
      return;
    }
    u.unit = read_unit(u.step, dir);
    status.finished(label, shown_output(*rec, options));
    if (incremental)
      incremental->log().record(u.step.object_name, command, unit_inputs(u.step, u.unit), step_outputs(u.step),
                                started_ns);
    if (hooks.after_compile) hooks.after_compile(u, dir, *rec);
    std::lock_guard<std::mutex> lock(mutex);
    result.commands.push_back(std::move(*rec));
  });
  for (size_t i = 0; i < units.size(); ++i)
    if (unit_up_to_date[i]) result.up_to_date.push_back(units[i].step.object_name);
  return failure;
}

// The embed unit (BuildPlan::embed_step), once every device step has built
// the cubins it includes: an ordinary compile of a generated source.
std::optional<CommandFailure> run_embed(const BuildPlan& plan, const std::string& dir, const ExecuteOptions& options,
                                        Incremental* incremental, BuildResult& result) {
  const CompileStep& step = *plan.embed_step;
  StatusSink& status = options.status_sink();
  std::vector<std::string> names;
  for (const auto& e : plan.embeds) names.push_back(e.name);
  const std::string label = "embed " + util::join(names, ", ");
  std::string command;
  if (incremental) {
    write_if_changed(util::join_path(dir, step.generated_name), *step.generated_text);
    command = unit_command(step);
    if (incremental->up_to_date(step.object_name, command)) {
      show_skipped(status, label + " (up to date)");
      result.up_to_date.push_back(step.object_name);
      return std::nullopt;
    }
  }
  status.started(label);
  const int64_t started_ns = BuildLog::now_ns();
  auto rec = compile_unit(step, dir, options);
  if (!rec) return std::move(rec).error();
  status.finished(label, shown_output(*rec, options));
  if (incremental) incremental->log().record(step.object_name, command, embed_inputs(plan), step_outputs(step), started_ns);
  result.commands.push_back(std::move(*rec));
  return std::nullopt;
}

// The link (or the copy of a single object), after everything else.
std::optional<CommandFailure> run_link(const LinkStep& link, const std::string& dir, const ExecuteOptions& options,
                                       Incremental* incremental, BuildResult& result) {
  StatusSink& status = options.status_sink();
  std::string out = util::join_path(dir, link.output_name);
  const std::string step = (link.kind == LinkStep::Kind::kCopyObject ? "copy " : "link ") + link.output_name;
  const std::string command = incremental ? link_command(link) : "";
  const int64_t started_ns = BuildLog::now_ns();
  if (incremental && incremental->up_to_date(link.output_name, command)) {
    show_skipped(status, step + " (up to date)");
    result.up_to_date.push_back(link.output_name);
    return std::nullopt;
  }
  // In a kept directory the artifact may be loaded by a running process:
  // it is replaced by rename, never removed first or rewritten in place.
  if (!incremental) util::remove_all(out);
  status.started(step);
  if (link.kind == LinkStep::Kind::kCopyObject) {
    auto copy_start = Clock::now();
    std::string input = resolve_in(dir, link.inputs.at(0));
    if (options.verbose) spdlog::info("cp {} {}", util::shell_quote(input), util::shell_quote(link.output_name));
    util::write_file_atomic(out, util::read_file(input));
    CommandRecord rec;
    rec.description = "copy " + link.inputs[0] + " to " + link.output_name;
    rec.seconds = std::chrono::duration<double>(Clock::now() - copy_start).count();
    status.finished(step, {});
    result.commands.push_back(std::move(rec));
  } else {
    util::JobGate::Ticket ticket;
    const double queued_at = options.trace ? options.trace->now() : 0;
    std::optional<CostEstimate> estimate;
    if (options.costs) estimate = options.costs->estimate_link(options.plan_name);
    if (options.gate) {
      const uint64_t bytes = options.memory ? options.memory->host.reservation() : host_job_bytes(options.cuda_job_bytes);
      // Links wait by module name among themselves, never by arrival.
      ticket = options.gate->acquire(1, bytes, util::JobGate::Priority::kFinish,
                                     util::JobGate::Shape{0, -1, options.plan_name}, options.party);
    }
    const double started_at = options.trace ? options.trace->now() : 0;
    if (!link.depfile_name.empty()) util::remove_all(util::join_path(dir, link.depfile_name));
    Expected<CommandRecord, CommandFailure> linked = CommandRecord{};
    if (incremental) {
      linked = link_by_rename(link, dir, options);
    } else {
      std::vector<std::string> argv = link.argv();
      log_command(argv, options);
      linked = detail::run_command(argv, dir, "linking " + link.output_name, options);
    }
    if (!linked) return std::move(linked).error();
    CommandRecord& rec = *linked;
    // What the linker read (-Wl,--dependency-file): the cache keys it.
    if (!link.depfile_name.empty())
      if (auto text = util::try_read_file(util::join_path(dir, link.depfile_name))) {
        result.link_dependencies.emplace();
        for (const auto& dep : parse_depfile(*text)) result.link_dependencies->push_back(resolve_in(dir, dep));
      }
    rec.queued_at = queued_at;
    rec.started_at = started_at;
    rec.slots = options.gate ? 1 : 0;
    if (estimate) {
      rec.estimated_cpu_seconds = estimate->cost.cpu_seconds;
      rec.estimate_source = estimate_source_name(estimate->source);
      options.costs->record_link(options.plan_name, JobCost{"", rec.cpu_seconds, rec.seconds, rec.max_rss_bytes});
    }
    if (options.memory) options.memory->host.observe(rec.max_rss_bytes);
    if (options.trace) options.trace->add(options.traced_module(), rec);
    status.finished(step, shown_output(rec, options));
    result.commands.push_back(std::move(rec));
  }
  if (incremental) {
    std::vector<BuildLog::Input> inputs = link_inputs(link);
    if (result.link_dependencies)
      for (const auto& dep : *result.link_dependencies) inputs.push_back({dep});
    incremental->log().record(link.output_name, command, inputs, {link.output_name}, started_ns);
  }
  return std::nullopt;
}

}  // namespace

Expected<BuildResult, CommandFailure> try_execute_plan(const BuildPlan& plan, const std::string& build_dir,
                                                       const ExecuteOptions& given_options, const CompileHooks& hooks) {
  const auto start = Clock::now();
  ExecuteOptions options = given_options;
  options.plan_name = plan.name;
  StatusSink& status = options.status_sink();
  StatusRun status_run(status, progress_steps(plan));
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

  std::optional<Incremental> incremental;
  if (options.incremental) incremental.emplace(dir, plan, options.verbose);
  Incremental* log = incremental ? &*incremental : nullptr;

  if (auto failed = run_units(units, dir, options, hooks, log, result)) return Unexpected<CommandFailure>{std::move(*failed)};

  // NVRTC runs in-process on every build (no depfile to tell its inputs).
  if (plan.nvrtc) {
    const std::string label = "nvrtc " + plan.nvrtc->request.source_name;
    status.started(label);
    if (options.verbose) spdlog::info("nvrtc {} --gpu-architecture={}", plan.nvrtc->request.source_name,
                                      nvrtc_architecture(plan.nvrtc->request));
    auto rec = detail::run_nvrtc_step(*plan.nvrtc, dir, &result);
    if (!rec) return Unexpected<CommandFailure>{std::move(rec).error()};
    status.finished(label, shown_output(*rec, options));
    result.commands.push_back(std::move(*rec));
  }

  if (plan.embed_step)
    if (auto failed = run_embed(plan, dir, options, log, result)) return Unexpected<CommandFailure>{std::move(*failed)};

  if (plan.link)
    if (auto failed = run_link(*plan.link, dir, options, log, result))
      return Unexpected<CommandFailure>{std::move(*failed)};

  result.artifact_path = util::join_path(dir, plan.artifact_name);
  if (!util::is_regular_file(result.artifact_path))
    throw build_error("the build finished but did not produce " + result.artifact_path);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

BuildResult execute_plan(const BuildPlan& plan, const std::string& build_dir, const ExecuteOptions& options,
                         const CompileHooks& hooks) {
  Expected<BuildResult, CommandFailure> built = try_execute_plan(plan, build_dir, options, hooks);
  if (!built) {
    const CommandFailure& failed = built.error();
    throw CommandFailedError(failed.message, failed.record);
  }
  return std::move(built).value();
}

}  // namespace tvmffi_jit::compile
