#include "tvmffi_jit/compile/cached_build.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"
#include "tvmffi_jit/cache/compiler_identity.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/parallel.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// Below this much free space the cache is treated as full: a compile that
// runs out of space half-way fails with a confusing message, so build
// outside the root instead (and say why).
constexpr uint64_t kMinFreeBytes = 64ull << 20;

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

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Memoised compiler identities for one build (a compiler used by ten units is
// identified once).
class CompilerIdentities {
 public:
  CompilerIdentities(std::string memo_dir, bool writable) {
    options_.memo_dir = std::move(memo_dir);
    options_.memo_writable = writable;
  }
  const cache::CompilerInput& get(const std::string& role, const std::string& program) {
    auto it = by_program_.find(program);
    if (it == by_program_.end()) it = by_program_.emplace(program, cache::identify_compiler(role, program, options_)).first;
    return it->second;
  }
  // The host compiler nvcc will run: -ccbin/--compiler-bindir (a program or
  // a directory holding gcc), else gcc on PATH.
  std::optional<cache::CompilerInput> nvcc_host(const std::vector<std::string>& flags) {
    std::string ccbin;
    for (size_t i = 0; i < flags.size(); ++i) {
      const std::string& f = flags[i];
      if ((f == "-ccbin" || f == "--compiler-bindir") && i + 1 < flags.size()) ccbin = flags[i + 1];
      else if (util::starts_with(f, "-ccbin=")) ccbin = f.substr(7);
      else if (util::starts_with(f, "--compiler-bindir=")) ccbin = f.substr(18);
    }
    std::string program = ccbin.empty() ? "gcc" : ccbin;
    if (!ccbin.empty() && util::is_directory(ccbin)) program = util::join_path(ccbin, "gcc");
    if (!util::find_program(program)) return std::nullopt;  // nvcc will fail and say so
    return get("nvcc-host", program);
  }

 private:
  cache::IdentifyOptions options_;
  std::map<std::string, cache::CompilerInput> by_program_;
};

cache::SourceInput step_source(const CompileStep& step) {
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
  if (tc.tvm_ffi) {
    out.push_back(tc.tvm_ffi->include_dir);
    out.push_back(tc.tvm_ffi->dlpack_include_dir);
  }
  return out;
}

cache::ObjectKeyInputs object_key_inputs(const CompileStep& step, const Manifest& m, const toolchain::Toolchain& tc,
                                         CompilerIdentities& ids) {
  cache::ObjectKeyInputs in;
  in.language = language_name(step.language);
  in.compiler = ids.get(in.language, step.compiler);
  in.flags = step_flags(step);
  in.source = step_source(step);
  in.include_paths = include_paths(m, tc);
  in.environment = cache::relevant_environment();
  in.extra.push_back({"output", output_name(step.output)});
  in.extra.push_back({"object_name", step.object_name});
  if (step.language == Language::kCuda)
    if (auto host = ids.nvcc_host(step.flags)) in.extra.push_back({"nvcc_host", host->resolved + "\n" + host->identity});
  return in;
}

struct UnitJob {
  const CompileStep* step = nullptr;
  CompiledUnit* unit = nullptr;
  std::string key;
  bool reused = false;
  std::vector<cache::HeaderRecord> headers;
};

// Hard link when possible (the staging dir and the store share a filesystem),
// else copy.
void place_file(const std::string& from, const std::string& to) {
  util::remove_all(to);
  if (::link(from.c_str(), to.c_str()) == 0) return;
  util::write_file(to, util::read_file(from));
}

nlohmann::json inputs_summary(const cache::ModuleKeyInputs& in) {
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

std::string compiler_output(const std::vector<CommandRecord>& commands) {
  std::string out;
  for (const auto& c : commands)
    if (!c.output.empty()) out += "== " + c.description + "\n" + c.output + (c.output.back() == '\n' ? "" : "\n");
  return out;
}

// Inputs whose status changed after `start_ns` may have been read in their
// old state; recording their new hash would let a stale artifact hit later
// (ccache's "too new include file"). The kernel stamps files with a coarse
// clock that lags real time, so a file written before `start_ns` never
// compares newer: no false alarms for the write-then-build pattern of JIT
// callers, at the price of missing an edit in the first tick (~4 ms) after it.
bool changed_since(const std::string& path, int64_t start_ns) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return true;
  int64_t c = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  int64_t m = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return c >= start_ns || m >= start_ns;
}

std::optional<std::string> header_changed_during_build(const std::vector<cache::HeaderRecord>& headers,
                                                       int64_t start_ns) {
  for (const auto& h : headers)
    if (changed_since(h.path, start_ns)) return h.path;
  return std::nullopt;
}

// Runs the plan in `dir` with per-unit objects from and into the store.
BuildResult build_with_object_cache(const BuildPlan& plan, const Manifest& m, const toolchain::Toolchain& tc,
                                    const std::string& dir_in, const cache::Store& store,
                                    const CachedBuildOptions& options, CompilerIdentities& ids,
                                    std::vector<cache::HeaderRecord>* headers, std::optional<std::string>* moved,
                                    CachedBuildResult* out, cache::StatsCounters* stats) {
  util::make_directories(dir_in, 0700);
  const std::string dir = util::canonical_path(dir_in);
  BuildResult result;
  result.build_dir = dir;
  result.units.resize(plan.compile_steps.size());
  result.device_units.resize(plan.device_steps.size());

  std::vector<UnitJob> jobs;
  auto add_job = [&](const CompileStep* step, CompiledUnit* unit) {
    UnitJob job;
    job.step = step;
    job.unit = unit;
    jobs.push_back(std::move(job));
  };
  for (size_t i = 0; i < plan.device_steps.size(); ++i) add_job(&plan.device_steps[i], &result.device_units[i]);
  for (size_t i = 0; i < plan.compile_steps.size(); ++i) add_job(&plan.compile_steps[i], &result.units[i]);

  std::vector<size_t> to_compile;
  for (size_t i = 0; i < jobs.size(); ++i) {
    UnitJob& job = jobs[i];
    job.key = cache::compute_object_key(object_key_inputs(*job.step, m, tc, ids)).hex;
    if (!options.force) {
      cache::LookupResult r = store.lookup(store.object_entry_dir(job.key), job.key);
      if (r.hit) {
        if (job.step->generated_text)  // later steps (embed, link) may read generated files
          util::write_file(util::join_path(dir, job.step->generated_name), *job.step->generated_text);
        place_file(r.artifact_path(), util::join_path(dir, job.step->object_name));
        job.unit->object_path = util::join_path(dir, job.step->object_name);
        for (const auto& h : r.entry->headers) job.unit->dependencies.push_back(h.path);
        job.headers = r.entry->headers;
        job.reused = true;
        ++out->objects_reused;
        ++stats->object_hits;
        if (options.exec.verbose) spdlog::info("reusing the cached object of {}", job.step->display);
        continue;
      }
      if (r.corrupt) ++stats->corrupt_entries;
    }
    to_compile.push_back(i);
  }

  // Compile the rest in parallel, like execute_plan().
  std::mutex mutex;
  util::parallel_for(to_compile.size(), options.exec.jobs, [&](size_t n) {
    UnitJob& job = jobs[to_compile[n]];
    if (options.exec.verbose) spdlog::info("{}", util::format_command(job.step->argv()));
    int64_t start = now_ns();
    CommandRecord rec = run_compile_step(*job.step, dir, job.unit);
    if (!options.exec.quiet && !rec.output.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      std::fwrite(rec.output.data(), 1, rec.output.size(), stderr);
      if (rec.output.back() != '\n') std::fputc('\n', stderr);
    }
    job.headers = cache::hash_headers(job.unit->dependencies, dir, {dir}, {});
    // Store the object unless a header moved under the compiler.
    std::optional<std::string> moved_here = header_changed_during_build(job.headers, start);
    if (moved_here) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!*moved) *moved = moved_here;
    }
    if (store.writable() && !moved_here) {
      try {
        cache::Staging s = store.stage();
        std::string name = util::file_name(job.step->object_name);
        std::string copy = util::join_path(s.build_dir(), name);
        place_file(job.unit->object_path, copy);
        cache::EntryRecord rec_entry;
        rec_entry.kind = "object";
        rec_entry.name = job.step->display;
        rec_entry.key = job.key;
        rec_entry.headers = job.headers;
        rec_entry.inputs = {{"language", language_name(job.step->language)},
                            {"compiler", job.step->compiler},
                            {"source", job.step->generated_text ? job.step->generated_name : job.step->input_path}};
        rec_entry.compiler_output = rec.output;
        cache::PublishResult p = store.publish(s, store.object_entry_dir(job.key), rec_entry, {{copy, name}});
        std::lock_guard<std::mutex> lock(mutex);
        if (p.ours) {
          ++stats->stores;
          stats->bytes_stored += p.entry.artifacts.front().size;
        }
      } catch (const Error& e) {
        spdlog::warn("could not cache the object of {}: {}", job.step->display, e.what());
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    ++out->objects_compiled;
    ++stats->object_misses;
    result.commands.push_back(std::move(rec));
  });

  for (const auto& job : jobs) cache::merge_headers(*headers, job.headers);

  // NVRTC, the embed unit and the link: the executor, with the units done.
  BuildPlan rest = plan;
  rest.device_steps.clear();
  rest.compile_steps.clear();
  BuildResult tail = execute_plan(rest, dir, options.exec);
  result.artifact_path = tail.artifact_path;
  result.lowered_names = tail.lowered_names;
  for (auto& c : tail.commands) result.commands.push_back(std::move(c));
  return result;
}

// Why the cache cannot take a new entry now, or nullopt.
std::optional<std::string> unwritable_reason(cache::Store& store) {
  if (!store.check_writable()) return store.unwritable_why();
  struct statvfs vfs;
  if (::statvfs(store.root().c_str(), &vfs) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < kMinFreeBytes)
      return "the filesystem of " + store.root() + " is full (" + util::format_bytes(free_bytes) + " free)";
  }
  return std::nullopt;
}

BuildResult build_outside_cache(const BuildPlan& plan, const std::string& why, const CachedBuildOptions& options) {
  util::TempDir temp(util::temp_root(), "tvmffi-jit-" + plan.name + "-");
  temp.keep();
  spdlog::warn("cache: {}; building in {} without caching", why, temp.path());
  return execute_plan(plan, temp.path(), options.exec);
}

}  // namespace

std::string tvm_ffi_header_version(const std::string& include_dir) {
  auto text = util::try_read_file(util::join_path(include_dir, "tvm/ffi/c_api.h"));
  if (!text) return "";
  // "#define TVM_FFI_VERSION_MAJOR 0" and friends.
  auto macro = [&](const std::string& name) -> std::string {
    size_t p = text->find("#define " + name);
    if (p == std::string::npos) return "";
    p += 8 + name.size();
    size_t e = text->find('\n', p);
    return std::string(util::trim(std::string_view(*text).substr(p, e == std::string::npos ? e : e - p)));
  };
  std::string major = macro("TVM_FFI_VERSION_MAJOR");
  if (major.empty()) return "";
  return major + "." + macro("TVM_FFI_VERSION_MINOR") + "." + macro("TVM_FFI_VERSION_PATCH");
}

namespace {

cache::ModuleKeyInputs key_inputs_with(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                                       CompilerIdentities& ids) {
  cache::ModuleKeyInputs in;
  in.emit_kind = emit_kind_name(plan.emit);
  in.name = plan.name;
  auto add_step = [&](const CompileStep& step, const char* group) {
    in.sources.push_back(step_source(step));
    in.flags.push_back({std::string(group) + " " + step.display + " (" + language_name(step.language) + " -> " +
                            output_name(step.output) + ")",
                        step_flags(step)});
    in.compilers.push_back(ids.get(language_name(step.language), step.compiler));
    if (step.language == Language::kCuda)
      if (auto host = ids.nvcc_host(step.flags)) in.compilers.push_back(*host);
  };
  for (const auto& s : plan.device_steps) add_step(s, "device");
  for (const auto& s : plan.compile_steps) add_step(s, "compile");
  if (plan.nvrtc) {
    const NvrtcRequest& r = plan.nvrtc->request;
    in.sources.push_back({r.source_name, "", r.source});
    in.flags.push_back({"nvrtc", r.options});
    in.extra.push_back({"nvrtc.arch", r.arch});
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
    in.flags.push_back({std::string("link ") + link_kind_name(l.kind) + " -> " + l.output_name, link_flags});
    if (!l.program.empty()) in.compilers.push_back(ids.get("link", l.program));
  }
  in.functions = manifest.functions;
  in.include_paths = include_paths(manifest, tc);
  for (const auto& a : plan.archs) in.archs.push_back(a.text());
  if (tc.tvm_ffi) {
    in.tvm_ffi_version = tvm_ffi_header_version(tc.tvm_ffi->include_dir);
    in.tvm_ffi_include_dir = tc.tvm_ffi->include_dir;
    in.extra.push_back({"tvm_ffi.lib_dir", tc.tvm_ffi->lib_dir});
  }
  // Each distinct compiler once, in first-use order (steps name theirs by path in the flags).
  std::vector<cache::CompilerInput> distinct;
  for (auto& c : in.compilers) {
    bool seen = false;
    for (const auto& d : distinct) seen = seen || (d.role == c.role && d.path == c.path && d.identity == c.identity);
    if (!seen) distinct.push_back(std::move(c));
  }
  in.compilers = std::move(distinct);
  in.environment = cache::relevant_environment();
  in.extra.push_back({"device_compiler", device_compiler_name(plan.compiler)});
  for (const auto& k : manifest.kernel_names) in.extra.push_back({"kernel_name", k});
  in.extra.push_back({"artifact", plan.artifact_name});
  return in;
}

}  // namespace

cache::ModuleKeyInputs module_key_inputs(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                                         const std::string& compilers_dir, bool memo_writable) {
  CompilerIdentities ids(compilers_dir, memo_writable);
  return key_inputs_with(plan, manifest, tc, ids);
}

CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options) {
  // Writability is probed on a miss only: a hit stores nothing but counters
  // and compiler identity memos, and those writes may fail quietly.
  cache::Store store(cache::open_root(cache::resolve_root_path(options.cache_dir), true, false));
  CompilerIdentities ids(store.compilers_dir(), true);
  const int64_t key_start = now_ns();  // sources are read for the key from here on

  cache::ModuleKeyInputs key_inputs = key_inputs_with(plan, manifest, tc, ids);
  key_inputs.base_dir = options.base_dir;
  cache::Key key = cache::compute_module_key(key_inputs, options.keep_key_trace);
  const std::string entry_dir = store.module_entry_dir(plan.name, key.hex);

  CachedBuildResult result;
  result.key = key.hex;
  result.key_trace = key.trace;
  cache::StatsCounters stats;

  auto answer_hit = [&](const cache::LookupResult& r) {
    result.cache = "hit";
    result.entry_dir = r.entry_dir;
    result.build.build_dir = r.entry_dir;
    result.build.artifact_path = util::join_path(r.entry_dir, plan.artifact_name);
    stats.hits += 1;
    store.count(stats);
    return result;
  };

  if (options.force) {
    result.miss_reason = "--force";
  } else {
    cache::LookupResult r = store.lookup(entry_dir, key.hex);
    if (r.hit) return answer_hit(r);
    result.miss_reason = r.miss_reason;
    if (r.corrupt) ++stats.corrupt_entries;
  }
  result.cache = "miss";
  std::optional<std::string> cannot_store = unwritable_reason(store);

  util::FileLock lock;
  if (!cannot_store) {
    lock = store.lock(entry_dir, "building " + plan.name, options.lock_timeout_seconds);
    // Whoever held the lock may have just published this very entry.
    if (!options.force || lock.waited_seconds() > 0.05) {
      cache::LookupResult r = store.lookup(entry_dir, key.hex);
      if (r.hit) return answer_hit(r);
    }
  }

  // ---- remote tier (cache/remote.h): an imported or remote entry instead of a build.
  cache::RemoteTier remote(options.remote, store, &stats);
  if (!cannot_store && !options.force) {
    if (std::optional<cache::RemoteHit> hit = remote.fetch(plan.name, key, options.base_dir, entry_dir)) {
      result.cache = "remote-hit";
      result.remote_source = hit->source;
      result.entry_dir = hit->lookup.entry_dir;
      result.build.build_dir = hit->lookup.entry_dir;
      result.build.artifact_path = util::join_path(hit->lookup.entry_dir, plan.artifact_name);
      store.count(stats);
      return result;
    }
  }
  // ---- end of the remote lookup

  stats.misses += 1;
  if (cannot_store) {
    result.build = build_outside_cache(plan, *cannot_store, options);
    stats.store_failures += 1;
    store.count(stats);
    return result;
  }

  std::optional<cache::Staging> staging;
  try {
    staging.emplace(store.stage());
  } catch (const Error& e) {
    result.build = build_outside_cache(plan, e.what(), options);
    stats.store_failures += 1;
    store.count(stats);
    return result;
  }

  if (options.exec.verbose) spdlog::info("cache miss for {} ({}): building in {}", plan.name, result.miss_reason,
                                         staging->build_dir());
  std::vector<cache::HeaderRecord> headers;       // everything the module's units read
  std::vector<cache::HeaderRecord> fresh_headers;  // of those, what units compiled now read
  std::optional<std::string> moved_header;
  const int64_t start = now_ns();
  if (plan.link) {
    result.build = build_with_object_cache(plan, manifest, tc, staging->build_dir(), store, options, ids, &headers,
                                           &moved_header, &result, &stats);
  } else {
    // One compile whose output is the artifact (cubin/fatbin/PTX): the module entry is its cache.
    result.build = execute_plan(plan, staging->build_dir(), options.exec);
    for (const auto& u : result.build.units)
      cache::merge_headers(fresh_headers, cache::hash_headers(u.dependencies, result.build.build_dir,
                                                              {result.build.build_dir}, {}));
    if (plan.nvrtc) {
      // NVRTC writes no depfile: record the headers its #include lines reach
      // (a superset; toolkit headers are covered by the NVRTC identity).
      IncludeScan scan = nvrtc_includes(plan.nvrtc->request);
      if (!scan.complete() && options.exec.verbose)
        spdlog::info("cache: {}: includes not followed: {}", plan.name,
                     util::join(scan.computed.empty() ? scan.unresolved : scan.computed, ", "));
      cache::merge_headers(fresh_headers,
                           cache::hash_headers(scan.files, result.build.build_dir, {result.build.build_dir}, {}));
    }
    headers = fresh_headers;
  }
  // Objects reused from the cache were checked against their recorded
  // headers; a header of a unit compiled now that moved during the build may
  // have been read in its old state.
  if (!moved_header) moved_header = header_changed_during_build(fresh_headers, start);
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps)
      if (!moved_header && !step.generated_text && changed_since(step.input_path, key_start))
        moved_header = step.input_path;
  if (auto moved = moved_header) {
    spdlog::warn("cache: {} changed while {} was being built; not caching this build", *moved, plan.name);
    staging->keep();
    stats.store_failures += 1;
    store.count(stats);
    return result;
  }

  cache::EntryRecord record;
  record.kind = "module";
  record.name = plan.name;
  record.key = key.hex;
  record.portable_key = key.portable_hex;
  record.base_dir = options.base_dir;
  record.headers = headers;
  record.inputs = inputs_summary(key_inputs);
  record.compiler_output = compiler_output(result.build.commands);
  try {
    cache::PublishResult p = store.publish(*staging, entry_dir, record, {{result.build.artifact_path, plan.artifact_name}});
    result.entry_dir = p.entry_dir;
    result.stored = p.ours;
    result.build.artifact_path = util::join_path(p.entry_dir, plan.artifact_name);
    if (p.ours) {
      stats.stores += 1;
      stats.bytes_stored += p.entry.artifacts.front().size;
      remote.put(p.entry_dir, key);  // ---- remote tier: upload what this process built
    }
  } catch (const Error& e) {
    if (e.code() == ExitCode::kMissingTool) throw;
    spdlog::warn("cache: could not store {}: {}; the artifact stays in {}", plan.name, e.what(),
                 result.build.build_dir);
    staging->keep();
    stats.store_failures += 1;
  }
  store.count(stats);
  return result;
}

toolchain::TvmFfiLocation find_tvm_ffi_memoized(const toolchain::TvmFfiSearch& search, const std::string& cache_dir) {
  if (search.root || toolchain::non_empty(search.env, "TVM_FFI_ROOT")) return toolchain::find_tvm_ffi(search);
  // What decides the answer of the programs find_tvm_ffi would ask.
  auto program_state = [](const std::string& program) -> nlohmann::json {
    auto path = util::find_program(program);
    if (!path) return nullptr;
    std::string resolved;
    try {
      resolved = util::canonical_path(*path);
    } catch (const Error&) {
      return nullptr;
    }
    auto st = util::file_stamp(resolved);
    if (!st) return nullptr;
    return {{"path", *path}, {"resolved", resolved}, {"size", st->size}, {"mtime_ns", st->mtime_ns},
            {"inode", st->inode}, {"device", st->device}};
  };
  nlohmann::json state = {{"version", 1},
                          {"PATH", search.env("PATH").value_or("")},
                          {"PYTHONPATH", search.env("PYTHONPATH").value_or("")},
                          {"config", program_state(search.config_program)},
                          {"python", program_state(search.python_program)}};
  std::string root;
  try {
    root = cache::resolve_root_path(cache_dir);
  } catch (const Error&) {
    return toolchain::find_tvm_ffi(search);
  }
  std::string memo = util::join_path(util::join_path(root, "toolchain"), "tvm-ffi.json");
  if (auto text = util::try_read_file(memo)) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.value("state", nlohmann::json()) == state && j.contains("location")) {
      const auto& l = j["location"];
      toolchain::TvmFfiLocation loc{l.value("include_dir", ""), l.value("dlpack_include_dir", ""),
                                    l.value("lib_dir", ""), l.value("found_by", "")};
      if (util::is_regular_file(util::join_path(loc.include_dir, "tvm/ffi/function.h")) &&
          util::is_regular_file(util::join_path(loc.dlpack_include_dir, "dlpack/dlpack.h")) &&
          util::is_regular_file(util::join_path(loc.lib_dir, "libtvm_ffi.so")))
        return loc;
    }
  }
  toolchain::TvmFfiLocation loc = toolchain::find_tvm_ffi(search);
  try {
    cache::CacheRoot r = cache::open_root(root, true);
    if (r.writable) {
      util::make_directories(util::join_path(root, "toolchain"), 0700);
      nlohmann::json j = {{"state", state},
                          {"location",
                           {{"include_dir", loc.include_dir},
                            {"dlpack_include_dir", loc.dlpack_include_dir},
                            {"lib_dir", loc.lib_dir},
                            {"found_by", loc.found_by}}}};
      util::write_file_atomic(memo, j.dump(2) + "\n", 0600);
    }
  } catch (const Error& e) {
    spdlog::debug("not memoising the tvm-ffi location: {}", e.what());  // the build reports an unsafe root itself
  }
  return loc;
}

}  // namespace tvmffi_jit::compile
