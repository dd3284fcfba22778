#include "tvmffi_jit/compile/cached_build.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"
#include "tvmffi_jit/cache/compiler_identity.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// Below this much free space the cache is treated as full: a compile that
// runs out of space half-way fails with a confusing message, so build
// outside the root instead (and say why).
constexpr uint64_t kMinFreeBytes = 64ull << 20;

// The tvm-ffi location memo is a few hundred bytes; a bigger one is not ours.
constexpr uint64_t kMaxMemoBytes = 1ull << 20;

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
                                         CompilerIdentities& ids,
                                         const std::vector<cache::ModuleKeyInputs::EnvVar>& environment) {
  cache::ObjectKeyInputs in;
  in.language = language_name(step.language);
  in.compiler = ids.get(in.language, step.compiler);
  in.flags = step_flags(step);
  in.source = step_source(step);
  in.include_paths = include_paths(m, tc);
  in.environment = environment;
  in.extra.push_back({"output", output_name(step.output)});
  in.extra.push_back({"object_name", step.object_name});
  if (step.language == Language::kCuda)
    if (auto host = ids.nvcc_host(step.flags)) in.extra.push_back({"nvcc_host", host->resolved + "\n" + host->identity});
  return in;
}

// The value of a keyed variable, or "" when unset.
std::string env_value(const std::vector<cache::ModuleKeyInputs::EnvVar>& env, const std::string& name) {
  for (const auto& v : env)
    if (v.name == name && v.set) return v.value;
  return "";
}

// The directories a compile searches for a header, in the order gcc tries
// them (its manual, "Options for Directory Search", and "Environment
// Variables"): the source's own directory (quote includes), -iquote, -I
// (nvcc: --include-path), CPATH, -isystem (nvcc: --system-include),
// C_INCLUDE_PATH or CPLUS_INCLUDE_PATH, -idirafter. The compiler's built-in
// directories are not listed: only a new file in one of these can shadow a
// recorded header (cache::record_shadows). Relative directories are the
// compiler's, i.e. relative to the build dir it runs in.
std::vector<std::string> include_search_dirs(const CompileStep& step, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> quote, angle, cpath, system, env_system, after;
  const bool nvcc = step.language == Language::kCuda;
  // "-Ifoo", "-I foo", and nvcc's "--include-path=foo" / "--include-path foo".
  auto option_value = [&](size_t& i, const std::string& flag, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const std::string name = n;
      if (flag == name && i + 1 < step.flags.size()) return std::optional<std::string>(step.flags[++i]);
      const bool long_option = util::starts_with(name, "--");
      if (long_option && util::starts_with(flag, name + "=")) return std::optional<std::string>(flag.substr(name.size() + 1));
      if (!long_option && flag.size() > name.size() && util::starts_with(flag, name))
        return std::optional<std::string>(flag.substr(name.size()));
    }
    return std::optional<std::string>();
  };
  for (size_t i = 0; i < step.flags.size(); ++i) {
    const std::string& f = step.flags[i];
    if (nvcc && (f == "-Xcompiler" || f == "--compiler-options")) {
      ++i;  // the host compiler's own options: not searched by cudafe
      continue;
    }
    // Longer names first: "-isystem" must not be read as "-i" + "system".
    if (auto v = option_value(i, f, {"-iquote"})) quote.push_back(*v);
    else if (auto v2 = option_value(i, f, {"-isystem", "--system-include"})) system.push_back(*v2);
    else if (auto v3 = option_value(i, f, {"-idirafter"})) after.push_back(*v3);
    else if (auto v4 = option_value(i, f, {"-I", "--include-path"})) angle.push_back(*v4);
  }
  // (An empty element means the current directory to gcc: the build dir, where nothing new can appear.)
  cpath = util::split_any(env_value(env, "CPATH"), ":");
  env_system = util::split_any(env_value(env, step.language == Language::kC ? "C_INCLUDE_PATH" : "CPLUS_INCLUDE_PATH"), ":");

  std::vector<std::string> out;
  if (!step.generated_text && !step.input_path.empty()) out.push_back(util::parent_path(util::absolute_path(step.input_path)));
  for (const auto* group : {&quote, &angle, &cpath, &system, &env_system, &after})
    for (const auto& d : *group) out.push_back(d[0] == '/' ? d : util::join_path(build_dir, d));
  return out;
}

// The directories the linker searches for `-l` libraries before its built-in
// ones, in order: -L (as given, relative ones to the build dir it runs in),
// then LIBRARY_PATH (which the gcc driver passes on as -L after the
// command line's).
std::vector<std::string> library_search_dirs(const LinkStep& link, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env) {
  std::vector<std::string> dirs;
  for (size_t i = 0; i < link.flags.size(); ++i) {
    const std::string& f = link.flags[i];
    if (f == "-L" && i + 1 < link.flags.size()) dirs.push_back(link.flags[++i]);
    else if (f.size() > 2 && util::starts_with(f, "-L")) dirs.push_back(f.substr(2));
  }
  for (const auto& d : util::split_any(env_value(env, "LIBRARY_PATH"), ":")) dirs.push_back(d);
  for (auto& d : dirs)
    if (d[0] != '/') d = util::join_path(build_dir, d);
  return dirs;
}

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

// Compiler output kept in an entry and replayed on a hit (as ccache replays a
// compile's stderr): whole up to this size, which holds any run of warnings
// worth reading; a flood (a template error cascade in a -w build gone wrong)
// is cut at a line end and says how much was dropped.
constexpr size_t kMaxStoredOutputBytes = 64 << 10;

std::string capped_output(const std::string& text) {
  if (text.size() <= kMaxStoredOutputBytes) return text;
  size_t cut = text.rfind('\n', kMaxStoredOutputBytes - 1);
  cut = (cut == std::string::npos || cut == 0) ? kMaxStoredOutputBytes : cut + 1;
  // Never end inside a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "tvmffi-jit: [" + std::to_string(text.size() - cut) +
         " more bytes of compiler output were not kept in the cache]\n";
}

// What the module's build showed, in order: replayed units, then the
// commands that ran. Replayed verbatim on a module hit.
std::string compiler_output(const BuildResult& build) {
  std::string out;
  for (const auto* records : {&build.reused, &build.commands})
    for (const auto& c : *records)
      if (!c.output.empty()) out += c.output + (c.output.back() == '\n' ? "" : "\n");
  return capped_output(out);
}

// Shows what a cache entry's compilers printed when it was built, as a
// build would have.
void replay_output(const std::string& stored, const ExecuteOptions& exec) {
  if (stored.empty() || exec.hide_compiler_output) return;
  util::Progress::global().print_above(capped_output(stored));
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

// The per-unit object cache and the header record of a build, as executor
// hooks (compile/executor.h): before a unit compiles, its object is looked up
// by the unit's own key; after it compiles, the headers it read are hashed and
// its object is stored. With `reuse_objects` off (a plan whose one compile is
// the artifact, cached as the module entry) only the headers are recorded.
class UnitCache {
 public:
  UnitCache(const BuildPlan& plan, const Manifest& m, const toolchain::Toolchain& tc, const cache::Store& store,
            CompilerIdentities& ids, const CachedBuildOptions& options, bool reuse_objects)
      : store_(store), options_(options), reuse_objects_(reuse_objects) {
    // Keys are computed up front, on this thread: compiler identities are
    // memoised in `ids`, which the workers must not share.
    for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
      for (const auto& step : *steps) {
        Unit u;
        if (reuse_objects_) {
          cache::Key key =
              cache::compute_object_key(object_key_inputs(step, m, tc, ids, *options.environment), options.keep_key_trace);
          if (options.keep_key_trace)
            spdlog::debug("cache: object key of {}: {}, hashed from:\n{}", step.display, key.hex, key.trace);
          u.key = key.hex;
        }
        units_.push_back(std::move(u));
      }
  }

  compile::CompileHooks hooks() {
    compile::CompileHooks h;
    h.before_compile = [this](const UnitRef& ref, const std::string& dir) { return before_compile(ref, dir); };
    h.after_compile = [this](const UnitRef& ref, const std::string& dir, const CommandRecord& rec) {
      after_compile(ref, dir, rec);
    };
    return h;
  }

  // The cached objects the link reads, with the digests they were checked
  // against (reused) or hashed with (compiled): a module entry records them
  // so that `cache verify --remove` can find the modules a bad object went into.
  std::vector<cache::ObjectRecord> objects() const {
    std::vector<cache::ObjectRecord> all;
    if (!reuse_objects_) return all;
    for (const auto& u : units_)
      if (!u.sha256.empty()) all.push_back({u.key, u.sha256});
    return all;
  }

  // Everything the units read (a reused unit: the headers its entry recorded).
  std::vector<cache::HeaderRecord> headers() const {
    std::vector<cache::HeaderRecord> all;
    for (const auto& u : units_) cache::merge_headers(all, u.headers);
    return all;
  }
  // A header that changed while a unit compiled, if any: that unit may have
  // read it in its old state, so neither it nor the module may be stored.
  const std::optional<std::string>& moved_header() const { return moved_; }
  size_t reused() const { return reused_; }
  size_t compiled() const { return compiled_; }
  const cache::StatsCounters& stats() const { return stats_; }

 private:
  struct Unit {
    std::string key;  // empty unless reuse_objects
    int64_t start_ns = 0;
    std::vector<cache::HeaderRecord> headers;
    std::string sha256;  // of the object that goes into the link
    InFlightUnits::Claim claim;  // held from a miss until the object is stored (batch builds)
  };

  std::optional<CommandRecord> before_compile(const UnitRef& ref, const std::string& dir) {
    Unit& u = units_.at(ref.index);
    u.start_ns = now_ns();
    if (!reuse_objects_ || options_.force) return std::nullopt;
    // Objects are re-hashed before they are linked: a same-size corruption
    // would otherwise spread into every module linked from them.
    cache::LookupOptions verify_object;
    verify_object.verify_digest_up_to = cache::kVerifyAll;
    cache::LookupResult r = store_.lookup(store_.object_entry_dir(u.key), u.key, verify_object);
    spdlog::debug("cache: object of {}: {}", ref.step.display, r.hit ? "hit in " + r.entry_dir : "miss (" + r.miss_reason + ")");
    // Another module of a batch compiling this very unit now: wait for it and
    // take its object from the store (compile here only if it did not store one).
    while (!r.hit && options_.in_flight) {
      u.claim = options_.in_flight->claim(u.key);
      // Whoever held the key may have stored the object, also just before
      // this claim: look again either way.
      r = store_.lookup(store_.object_entry_dir(u.key), u.key, verify_object);
      if (u.claim.owned()) break;
    }
    if (r.hit) u.claim = {};  // nothing to compile: let waiters look it up
    if (!r.hit) {
      if (r.corrupt) count([](cache::StatsCounters& s) { ++s.corrupt_entries; });
      return std::nullopt;
    }
    const CompileStep& step = ref.step;
    if (step.generated_text)  // later steps (embed, link) may read generated files
      util::write_file(util::join_path(dir, step.generated_name), *step.generated_text);
    place_file(r.artifact_path(), util::join_path(dir, step.object_name));
    ref.unit.object_path = util::join_path(dir, step.object_name);
    for (const auto& h : r.entry->headers) ref.unit.dependencies.push_back(h.path);
    u.headers = r.entry->headers;
    u.sha256 = r.entry->artifacts.front().sha256;
    if (options_.exec.verbose) spdlog::info("reusing the cached object of {}", step.display);
    CommandRecord rec;
    rec.description = "reused the cached object of " + step.display;
    rec.output = capped_output(r.entry->compiler_output);
    count([](cache::StatsCounters& s) { ++s.object_hits; }, &reused_);
    return rec;
  }

  void after_compile(const UnitRef& ref, const std::string& dir, const CommandRecord& rec) {
    Unit& u = units_.at(ref.index);
    u.headers = cache::hash_headers(ref.unit.dependencies, dir, {dir}, {}, store_.digest_memo(true));
    cache::record_shadows(u.headers, include_search_dirs(ref.step, dir, *options_.environment));
    std::optional<std::string> moved = header_changed_during_build(u.headers, u.start_ns);
    if (moved) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!moved_) moved_ = moved;
    }
    if (rec.launcher_fallback) count([](cache::StatsCounters& s) { ++s.launcher_fallbacks; });
    if (!reuse_objects_) return;
    u.sha256 = util::sha256_file_hex(ref.unit.object_path);
    count([](cache::StatsCounters& s) { ++s.object_misses; }, &compiled_);
    if (store_.writable() && !moved) store_object(ref.step, u.key, ref.unit, u.headers, rec);
    u.claim = {};  // stored (or not storable): units waiting for it look it up now
  }

  void store_object(const CompileStep& step, const std::string& key, const CompiledUnit& unit,
                    const std::vector<cache::HeaderRecord>& headers, const CommandRecord& rec) {
    try {
      cache::Staging s = store_.stage();
      std::string name = util::file_name(step.object_name);
      std::string copy = util::join_path(s.build_dir(), name);
      place_file(unit.object_path, copy);
      cache::EntryRecord entry;
      entry.kind = "object";
      entry.name = step.display;
      entry.key = key;
      entry.headers = headers;
      entry.inputs = {{"language", language_name(step.language)},
                      {"compiler", step.compiler},
                      {"source", step.generated_text ? step.generated_name : step.input_path}};
      entry.compiler_output = capped_output(rec.output);
      cache::PublishResult p = store_.publish(s, store_.object_entry_dir(key), entry, {{copy, name}});
      if (p.ours) {
        const uint64_t size = p.entry.artifacts.front().size;
        count([size](cache::StatsCounters& st) {
          ++st.stores;
          st.bytes_stored += size;
        });
      }
    } catch (const Error& e) {
      spdlog::warn("could not cache the object of {}: {}", step.display, e.what());
    }
  }

  template <typename F>
  void count(F&& change, size_t* counter = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    change(stats_);
    if (counter) ++*counter;
  }

  const cache::Store& store_;
  const CachedBuildOptions& options_;
  const bool reuse_objects_;
  std::vector<Unit> units_;  // indexed like UnitRef::index; each touched by its unit's worker only
  std::mutex mutex_;         // guards the members below
  std::optional<std::string> moved_;
  size_t reused_ = 0;
  size_t compiled_ = 0;
  cache::StatsCounters stats_;
};

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

// Runs the plan in `dir`, a directory this process deletes when it is done
// with it. A failed compile or link keeps it (`keep`) and says so, so that the
// "cd <dir> && ..." line of the message works; `removed_by` tells the user
// who deletes it. Any other failure, and a termination signal, leave `dir`
// to its owner's destructor.
BuildResult execute_in_disposable_dir(const BuildPlan& plan, const std::string& dir, const ExecuteOptions& exec,
                                      const CompileHooks& hooks, const std::function<void()>& keep,
                                      const std::string& removed_by) {
  try {
    return execute_plan(plan, dir, exec, hooks);
  } catch (const Error& e) {
    if (e.code() != ExitCode::kBuildFailed || util::termination_signal() != 0) throw;
    keep();
    std::string message = e.what();
    if (!message.empty() && message.back() != '\n') message += '\n';
    throw build_error(message + "(the build directory " + dir + " is kept so that the command above can be re-run; " +
                      removed_by + ")");
  }
}

BuildResult build_outside_cache(const BuildPlan& plan, const std::string& why, const CachedBuildOptions& options) {
  spdlog::warn("cache: {}; building without caching", why);
  return build_without_cache(plan, options.exec);
}

}  // namespace

BuildResult build_without_cache(const BuildPlan& plan, const ExecuteOptions& exec) {
  util::TempDir temp(util::temp_root(), "tvmffi-jit-" + plan.name + "-");
  if (exec.verbose) spdlog::info("building {} in {}", plan.name, temp.path());
  BuildResult result = execute_in_disposable_dir(plan, temp.path(), exec, {}, [&] { temp.keep(); },
                                                 "remove it when done");
  temp.keep();  // the artifact is in it: the caller's now
  return result;
}

InFlightUnits::Claim::Claim(Claim&& o) noexcept : owner_(o.owner_), key_(std::move(o.key_)), owned_(o.owned_) {
  o.owner_ = nullptr;
}

InFlightUnits::Claim& InFlightUnits::Claim::operator=(Claim&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->release(key_);
    owner_ = o.owner_;
    key_ = std::move(o.key_);
    owned_ = o.owned_;
    o.owner_ = nullptr;
  }
  return *this;
}

InFlightUnits::Claim::~Claim() {
  if (owner_) owner_->release(key_);
}

InFlightUnits::Claim InFlightUnits::claim(const std::string& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  Claim c;
  if (busy_.insert(key).second) {
    c.owner_ = this;
    c.key_ = key;
    c.owned_ = true;
    return c;
  }
  released_.wait(lock, [&] { return busy_.count(key) == 0; });
  return c;
}

void InFlightUnits::release(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_.erase(key);
  }
  released_.notify_all();
}

namespace {

cache::ModuleKeyInputs key_inputs_with(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                                       CompilerIdentities& ids,
                                       const std::vector<cache::ModuleKeyInputs::EnvVar>& environment) {
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
    in.tvm_ffi_version = toolchain::tvm_ffi_header_version(tc.tvm_ffi->include_dir).value_or("");
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
  in.environment = environment;
  in.extra.push_back({"device_compiler", device_compiler_name(plan.compiler)});
  for (const auto& k : manifest.kernel_names) in.extra.push_back({"kernel_name", k});
  in.extra.push_back({"artifact", plan.artifact_name});
  return in;
}

}  // namespace

cache::ModuleKeyInputs module_key_inputs(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                                         const std::string& compilers_dir, bool memo_writable,
                                         const std::vector<cache::ModuleKeyInputs::EnvVar>& environment) {
  CompilerIdentities ids(compilers_dir, memo_writable);
  return key_inputs_with(plan, manifest, tc, ids, environment);
}

CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options) {
  if (!options.environment)
    throw io_error("internal: cached_build() of " + plan.name + " without the environment its key needs");
  // Writability is probed on a miss only: a hit stores nothing but counters
  // and compiler identity memos, and those writes may fail quietly.
  const int64_t call_start = now_ns();  // a hit reports its own time, not the original build's
  if (options.cache_dir.empty()) throw io_error("internal: cached_build() of " + plan.name + " without a cache root");
  cache::Store store(cache::open_root(options.cache_dir, true, false));
  CompilerIdentities ids(store.compilers_dir(), true);
  const int64_t key_start = now_ns();  // sources are read for the key from here on

  cache::ModuleKeyInputs key_inputs = key_inputs_with(plan, manifest, tc, ids, *options.environment);
  key_inputs.base_dir = options.base_dir;
  cache::Key key = cache::compute_module_key(key_inputs, options.keep_key_trace);
  if (options.keep_key_trace) spdlog::debug("cache: module key of {}: {}, hashed from:\n{}", plan.name, key.hex, key.trace);
  const std::string entry_dir = store.module_entry_dir(plan.name, key.hex);

  CachedBuildResult result;
  result.key = key.hex;
  result.key_trace = key.trace;
  cache::StatsCounters stats;

  // A hit serves only the artifact entry.json lists, at its recorded size,
  // re-hashed when small (docs/cache.md, "What the cache promises").
  cache::LookupOptions module_lookup;
  module_lookup.required_artifacts = {plan.artifact_name};
  module_lookup.verify_digest_up_to = options.verify ? cache::kVerifyAll : cache::kVerifyOnHitMaxBytes;
  auto answer_hit = [&](const cache::LookupResult& r) {
    result.cache = "hit";
    result.entry_dir = r.entry_dir;
    result.build.build_dir = r.entry_dir;
    result.build.artifact_path = r.artifact_path(plan.artifact_name);
    if (r.entry) replay_output(r.entry->compiler_output, options.exec);
    stats.hits += 1;
    store.count(stats);
    result.build.seconds = static_cast<double>(now_ns() - call_start) * 1e-9;
    return result;
  };

  if (options.force) {
    result.miss_reason = "--force";
  } else {
    cache::LookupResult r = store.lookup(entry_dir, key.hex, module_lookup);
    spdlog::debug("cache: module {}: {}", plan.name, r.hit ? "hit in " + r.entry_dir : "miss (" + r.miss_reason + ")");
    if (r.hit) return answer_hit(r);
    result.miss_reason = r.miss_reason;
    if (r.corrupt) ++stats.corrupt_entries;
  }
  result.cache = "miss";
  if (options.only_if_cached) return result;  // the caller builds (or asks the remotes) in a process of its own
  std::optional<std::string> cannot_store = unwritable_reason(store);

  util::FileLock lock;
  if (!cannot_store) {
    lock = store.lock(entry_dir, "building " + plan.name, options.lock_timeout_seconds);
    // Whoever held the lock may have just published this very entry.
    if (!options.force || lock.waited_seconds() > 0.05) {
      cache::LookupResult r = store.lookup(entry_dir, key.hex, module_lookup);
      if (r.hit) return answer_hit(r);
    }
  }

  // ---- remote tier (cache/remote.h): an imported or remote entry instead of a build.
  cache::RemoteTier remote(options.remote, store, &stats);
  if (!cannot_store && !options.force) {
    if (std::optional<cache::RemoteHit> hit =
            remote.fetch(plan.name, key, options.base_dir, entry_dir, plan.artifact_name)) {
      result.cache = "remote-hit";
      result.remote_source = hit->source;
      result.entry_dir = hit->lookup.entry_dir;
      result.build.build_dir = hit->lookup.entry_dir;
      result.build.artifact_path = hit->lookup.artifact_path(plan.artifact_name);
      store.count(stats);
      result.build.seconds = static_cast<double>(now_ns() - call_start) * 1e-9;
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
  // The units through the object cache (only when there is a link: a plan
  // whose one compile is the artifact has the module entry as its cache).
  const int64_t start = now_ns();
  std::optional<std::string> moved_header;
  UnitCache units(plan, manifest, tc, store, ids, options, plan.link.has_value());
  result.build = execute_in_disposable_dir(plan, staging->build_dir(), options.exec, units.hooks(),
                                          [&] { staging->keep(); },
                                          "`tvmffi-jit cache gc` or `cache clean` removes it once this process is gone");
  result.objects_reused = units.reused();
  result.objects_compiled = units.compiled();
  stats.add(units.stats());
  std::vector<cache::HeaderRecord> headers = units.headers();  // everything the module's units read
  if (plan.nvrtc) {
    // NVRTC writes no depfile: record the headers its #include lines reach
    // (a superset; toolkit headers are covered by the NVRTC identity).
    IncludeScan scan = nvrtc_includes(plan.nvrtc->request);
    if (!scan.complete() && options.exec.verbose)
      spdlog::info("cache: {}: includes not followed: {}", plan.name,
                   util::join(scan.computed.empty() ? scan.unresolved : scan.computed, ", "));
    std::vector<cache::HeaderRecord> scanned =
        cache::hash_headers(scan.files, result.build.build_dir, {result.build.build_dir}, {});
    cache::merge_headers(headers, scanned);
    moved_header = header_changed_during_build(scanned, start);
  }
  // What the linker read, recorded like headers: a rebuilt libdep.a behind
  // -L/-l must miss. A linker that wrote no list leaves nothing to check.
  std::optional<std::string> unrecorded_link;
  if (plan.link && !plan.link->depfile_name.empty()) {
    if (!result.build.link_dependencies) {
      unrecorded_link = "the linker wrote no " + plan.link->depfile_name + " (-Wl,--dependency-file, GNU ld 2.35+, "
                        "gold or lld), so the libraries it read cannot be checked on a hit";
    } else {
      std::vector<cache::HeaderRecord> linked =
          cache::hash_headers(*result.build.link_dependencies, result.build.build_dir, {result.build.build_dir}, {},
                              store.digest_memo(true));
      cache::record_library_shadows(linked,
                                    library_search_dirs(*plan.link, result.build.build_dir, *options.environment));
      if (!moved_header) moved_header = header_changed_during_build(linked, start);
      cache::merge_headers(headers, linked);
    }
  }
  // Objects reused from the cache were checked against their recorded
  // headers; a header of a unit compiled now that moved during the build may
  // have been read in its old state.
  if (!moved_header) moved_header = units.moved_header();
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps)
      if (!moved_header && !step.generated_text && changed_since(step.input_path, key_start))
        moved_header = step.input_path;
  // Not stored: the artifact leaves the staging dir (which gc removes once
  // this process is gone) for a directory of the caller's.
  auto serve_unstored = [&](const std::string& why) {
    stats.store_failures += 1;
    store.count(stats);
    result.build.artifact_path =
        staging->move_artifact_out(result.build.artifact_path, plan.artifact_name, plan.name);
    result.build.build_dir = util::parent_path(result.build.artifact_path);
    spdlog::warn("cache: {}; not caching this build: its artifact is in {} (yours to keep or delete)", why,
                 result.build.build_dir);
    return result;
  };
  if (auto moved = moved_header) return serve_unstored(*moved + " changed while " + plan.name + " was being built");
  if (unrecorded_link) return serve_unstored(*unrecorded_link);

  cache::EntryRecord record;
  record.kind = "module";
  record.name = plan.name;
  record.key = key.hex;
  record.portable_key = key.portable_hex;
  record.base_dir = options.base_dir;
  record.headers = headers;
  record.objects = units.objects();
  record.inputs = inputs_summary(key_inputs);
  record.compiler_output = compiler_output(result.build);
  try {
    cache::PublishResult p = store.publish(*staging, entry_dir, record, {{result.build.artifact_path, plan.artifact_name}});
    result.entry_dir = p.entry_dir;
    result.stored = p.ours;
    result.build.artifact_path = util::join_path(p.entry_dir, plan.artifact_name);
    if (p.ours) {
      stats.stores += 1;
      stats.bytes_stored += p.entry.artifacts.front().size;
    }
  } catch (const Error& e) {
    return serve_unstored("could not store " + plan.name + ": " + e.what());
  }
  // ---- remote tier: upload what this process built (a missing libcurl is
  // exit 4; a server that fails costs a warning, counted in the stats).
  if (result.stored) remote.put(result.entry_dir, key);
  store.count(stats);
  return result;
}

Expected<toolchain::TvmFfiLocation> find_tvm_ffi_memoized(const toolchain::TvmFfiSearch& search, const std::string& cache_dir,
                                                          const std::string& user_dir) {
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
  const std::string& root = cache_dir;
  std::string memo = util::join_path(util::join_path(root, "toolchain"), "tvm-ffi.json");
  // The same memo in the per-user directory every root shares: a new root
  // (a CI job's fresh cache) skips tvm-ffi-config's ~80 ms of Python too.
  // Only a directory of this user's that no one else may write is believed.
  const std::string user_memo = util::join_path(user_dir, "tvm-ffi.json");
  auto user_dir_is_private = [&] {
    struct stat st;
    return !user_dir.empty() && ::lstat(user_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           (st.st_mode & 0022) == 0;
  };
  auto memoised = [&](const std::string& path) -> std::optional<toolchain::TvmFfiLocation> {
    auto text = util::read_small_file(path, kMaxMemoBytes);
    if (!text) return std::nullopt;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object() || j.value("state", nlohmann::json()) != state || !j.contains("location") ||
        !j["location"].is_object())
      return std::nullopt;
    const auto& l = j["location"];
    toolchain::TvmFfiLocation loc{l.value("include_dir", ""), l.value("dlpack_include_dir", ""), l.value("lib_dir", ""),
                                  l.value("found_by", "")};
    if (!util::is_regular_file(util::join_path(loc.include_dir, "tvm/ffi/function.h")) ||
        !util::is_regular_file(util::join_path(loc.dlpack_include_dir, "dlpack/dlpack.h")) ||
        !util::is_regular_file(util::join_path(loc.lib_dir, "libtvm_ffi.so")))
      return std::nullopt;
    return loc;
  };
  if (auto loc = memoised(memo)) return *loc;
  std::optional<toolchain::TvmFfiLocation> shared;
  if (user_dir_is_private()) shared = memoised(user_memo);
  Expected<toolchain::TvmFfiLocation> found = shared ? Expected<toolchain::TvmFfiLocation>(*shared)
                                                     : toolchain::find_tvm_ffi(search);
  if (!found) return found;
  const toolchain::TvmFfiLocation& loc = *found;
  const std::string memo_text = util::dump_json({{"state", state},
                                                 {"location",
                                                  {{"include_dir", loc.include_dir},
                                                   {"dlpack_include_dir", loc.dlpack_include_dir},
                                                   {"lib_dir", loc.lib_dir},
                                                   {"found_by", loc.found_by}}}},
                                                2) + "\n";
  if (!shared && !user_dir.empty()) {
    try {
      util::make_directories(user_dir, 0700);
      if (user_dir_is_private()) util::write_file_atomic(user_memo, memo_text, 0600);
    } catch (const Error& e) {
      spdlog::debug("not memoising the tvm-ffi location for this user: {}", e.what());
    }
  }
  try {
    cache::CacheRoot r = cache::open_root(root, true);
    if (r.writable) {
      util::make_directories(util::join_path(root, "toolchain"), 0700);
      util::write_file_atomic(memo, memo_text, 0600);
    }
  } catch (const Error& e) {
    spdlog::debug("not memoising the tvm-ffi location: {}", e.what());  // the build reports an unsafe root itself
  }
  return loc;
}

}  // namespace tvmffi_jit::compile
