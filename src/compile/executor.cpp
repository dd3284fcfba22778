#include "tvmffi_jit/compile/executor.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>

#include "compile/backends.h"
#include "tvmffi_jit/compile/build_log.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/lock.h"
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
  rec.cpu_seconds = r.cpu_seconds;
  rec.max_rss_bytes = r.max_rss_bytes;
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

// ---- incremental builds (ExecuteOptions::incremental, compile/build_log.h)

// What decides a unit's output besides its inputs' content: the argv as
// argv() gives it (no launcher, no --threads: neither changes the output)
// and, for a generated source, its text.
std::string unit_command(const CompileStep& step) {
  std::vector<std::pair<std::string, std::string>> extras;
  if (step.generated_text) extras.emplace_back("generated " + step.generated_name, util::sha256_hex(*step.generated_text));
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

std::string embed_command(const BuildPlan& plan) {
  std::vector<std::string> argv = {plan.embed_compiler, "-fPIC", "-o", plan.embed_object_name};
  for (const auto& e : plan.embeds) argv.push_back(e.name + "=" + (e.built_name.empty() ? e.path : e.built_name));
  return BuildLog::fingerprint(argv);
}

std::vector<BuildLog::Input> embed_inputs(const BuildPlan& plan) {
  std::vector<BuildLog::Input> in = {{plan.embed_compiler}};
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

// Every step id the plan has, for pruning the log.
std::vector<std::string> step_ids(const BuildPlan& plan) {
  std::vector<std::string> ids;
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& s : *steps) ids.push_back(s.object_name);
  if (!plan.embeds.empty()) ids.push_back(plan.embed_object_name);
  if (plan.link) ids.push_back(plan.link->output_name);
  return ids;
}

// The incremental state of one execute_plan(): the directory lock and the
// log, saved however the build ends, so the units that did compile before a
// failure are not compiled again.
class Incremental {
 public:
  Incremental(const std::string& dir, const BuildPlan& plan, bool verbose) : ids_(step_ids(plan)), verbose_(verbose) {
    util::LockOptions lo;
    lo.note = "building " + plan.name + " in " + dir;
    lo.on_wait = [dir](const util::LockHolder& h) {
      spdlog::warn("waiting for another build in {} ({})", dir, h.text.empty() ? "holder unknown" : h.text);
    };
    lock_ = util::FileLock::acquire(util::join_path(dir, BuildLog::kLockName), lo);
    log_.emplace(dir);
  }
  ~Incremental() {
    try {
      log_->save(ids_);
    } catch (const Error& e) {
      spdlog::warn("could not save the build log (the next build runs every step): {}", e.what());
    }
  }
  Incremental(const Incremental&) = delete;
  Incremental& operator=(const Incremental&) = delete;

  // true: skip the step. Else it is forgotten until it succeeds again.
  bool up_to_date(const std::string& id, const std::string& command) {
    std::optional<std::string> why = log_->why_run(id, command);
    if (!why) return true;
    if (verbose_) spdlog::info("{}: runs: {}", id, *why);
    log_->forget(id);
    return false;
  }
  BuildLog& log() { return *log_; }

 private:
  std::vector<std::string> ids_;
  bool verbose_;
  util::FileLock lock_;
  std::optional<BuildLog> log_;
};

// Links into a new file beside the artifact and renames it over: a process
// that has the old module loaded keeps its mapping of the old inode, and no
// reader ever sees a half-written module.
CommandRecord link_by_rename(const LinkStep& link, const std::string& dir, const ExecuteOptions& options) {
  LinkStep temp = link;
  temp.output_name = "." + link.output_name + ".tmp." + std::to_string(::getpid());
  const std::string temp_path = util::join_path(dir, temp.output_name);
  util::remove_all(temp_path);
  std::vector<std::string> argv = temp.argv();
  log_command(argv, options);
  CommandRecord rec;
  try {
    rec = detail::run_checked(argv, dir, "linking " + link.output_name);
  } catch (...) {
    util::remove_all(temp_path);
    throw;
  }
  if (::rename(temp_path.c_str(), util::join_path(dir, link.output_name).c_str()) != 0) {
    const int err = errno;
    util::remove_all(temp_path);
    throw io_error(errno_message("cannot rename " + temp_path + " to " + link.output_name, err));
  }
  return rec;
}

}  // namespace

JobTrace::JobTrace() : start_(Clock::now()) {}

double JobTrace::now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void JobTrace::add(const std::string& module, const CommandRecord& record) {
  nlohmann::json j;
  j["module"] = module;
  j["step"] = record.description;
  j["queued"] = record.queued_at;
  j["start"] = record.started_at;
  j["end"] = record.started_at + record.seconds;
  j["cpu"] = record.cpu_seconds;
  j["rss"] = record.max_rss_bytes;
  j["threads"] = record.threads;
  std::string line = util::dump_json(j, -1) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  lines_ += line;
}

std::string JobTrace::json_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

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

  std::optional<Incremental> incremental;
  if (options.incremental) incremental.emplace(dir, plan, options.verbose);
  std::vector<char> unit_up_to_date(units.size(), 0);

  std::mutex mutex;
  util::parallel_for(units.size(), options.jobs, [&](size_t i) {
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
        util::Progress::global().next(label + " (up to date)");
        u.unit = read_unit(u.step, dir);
        unit_up_to_date[i] = 1;
        return;
      }
    }
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
    const int64_t started_ns = BuildLog::now_ns();
    CommandRecord rec = compile_unit(u.step, dir, options);
    u.unit = read_unit(u.step, dir);
    echo_output(rec, options);
    if (incremental)
      incremental->log().record(u.step.object_name, command, unit_inputs(u.step, u.unit),
                                {u.step.object_name, u.step.depfile_name}, started_ns);
    if (hooks.after_compile) hooks.after_compile(u, dir, rec);
    std::lock_guard<std::mutex> lock(mutex);
    result.commands.push_back(std::move(rec));
  });

  for (size_t i = 0; i < units.size(); ++i)
    if (unit_up_to_date[i]) result.up_to_date.push_back(units[i].step.object_name);

  // NVRTC runs in-process on every build (no depfile to tell its inputs).
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
    const std::string command = incremental ? embed_command(plan) : "";
    if (incremental && incremental->up_to_date(plan.embed_object_name, command)) {
      util::Progress::global().next("embed " + util::join(names, ", ") + " (up to date)");
      result.up_to_date.push_back(plan.embed_object_name);
    } else {
      util::Progress::global().next("embed " + util::join(names, ", "));
      const int64_t started_ns = BuildLog::now_ns();
      CommandRecord rec = detail::compile_embed_unit(plan, dir);
      if (options.verbose) spdlog::info("{}", util::format_command(rec.argv));
      echo_output(rec, options);
      result.commands.push_back(std::move(rec));
      if (incremental)
        incremental->log().record(plan.embed_object_name, command, embed_inputs(plan), {plan.embed_object_name},
                                  started_ns);
    }
  }

  if (plan.link) {
    const LinkStep& link = *plan.link;
    std::string out = util::join_path(dir, link.output_name);
    const std::string step = (link.kind == LinkStep::Kind::kCopyObject ? "copy " : "link ") + link.output_name;
    const std::string command = incremental ? link_command(link) : "";
    const int64_t started_ns = BuildLog::now_ns();
    if (incremental && incremental->up_to_date(link.output_name, command)) {
      util::Progress::global().next(step + " (up to date)");
      result.up_to_date.push_back(link.output_name);
    } else {
      // In a kept directory the artifact may be loaded by a running process:
      // it is replaced by rename, never removed first or rewritten in place.
      if (!incremental) util::remove_all(out);
      util::Progress::global().next(step);
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
        util::JobGate::Ticket ticket;
        const double queued_at = options.trace ? options.trace->now() : 0;
        if (options.gate) {
          const uint64_t bytes =
              options.memory ? options.memory->host.reservation() : host_job_bytes(options.cuda_job_bytes);
          ticket = options.gate->acquire(1, bytes, util::JobGate::Priority::kFinish, 0, options.party);
        }
        const double started_at = options.trace ? options.trace->now() : 0;
        if (!link.depfile_name.empty()) util::remove_all(util::join_path(dir, link.depfile_name));
        CommandRecord rec;
        if (incremental) {
          rec = link_by_rename(link, dir, options);
        } else {
          std::vector<std::string> argv = link.argv();
          log_command(argv, options);
          rec = detail::run_checked(argv, dir, "linking " + link.output_name);
        }
        // What the linker read (-Wl,--dependency-file): the cache keys it.
        if (!link.depfile_name.empty())
          if (auto text = util::try_read_file(util::join_path(dir, link.depfile_name))) {
            result.link_dependencies.emplace();
            for (const auto& dep : cache::parse_depfile(*text)) result.link_dependencies->push_back(resolve_in(dir, dep));
          }
        rec.queued_at = queued_at;
        rec.started_at = started_at;
        if (options.memory) options.memory->host.observe(rec.max_rss_bytes);
        if (options.trace) options.trace->add(options.module, rec);
        echo_output(rec, options);
        result.commands.push_back(std::move(rec));
      }
      if (incremental) {
        std::vector<BuildLog::Input> inputs = link_inputs(link);
        if (result.link_dependencies)
          for (const auto& dep : *result.link_dependencies) inputs.push_back({dep});
        incremental->log().record(link.output_name, command, inputs, {link.output_name}, started_ns);
      }
    }
  }

  result.artifact_path = util::join_path(dir, plan.artifact_name);
  if (!util::is_regular_file(result.artifact_path))
    throw build_error("the build finished but did not produce " + result.artifact_path);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace tvmffi_jit::compile
