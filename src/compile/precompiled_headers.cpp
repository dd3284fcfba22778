#include "tvmffi_jit/compile/precompiled_headers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "compile/adoptable_roots.h"
#include "compile/command.h"
#include "compile/compiler_identities.h"
#include "compile/pch_unit.h"
#include "compile/include_probes.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

using json = nlohmann::json;

// A record larger than this is not ours: the PCH is rebuilt.
constexpr uint64_t kMaxRecordBytes = 4u << 20;
// Bumped when what a PCH folder holds or how it is keyed changes.
constexpr const char* kKeySalt = "tvmffi-jit pch 1";

std::string gch_path(const std::string& folder, const std::string& name) {
  return util::join_path(util::join_path(folder, "include"), name + ".gch");
}

// The stamp of `path` when it may stand for its content (util/stamp.h):
// a regular file on a filesystem with trusted stamps, settled before `since_ns`.
std::optional<util::FullStamp> settled_stamp(const std::string& path, int64_t since_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (!util::stamps_are_trusted(st, path)) return std::nullopt;
  util::FullStamp s = util::full_stamp_of(st);
  if (!util::stamp_is_settled(s, since_ns)) return std::nullopt;
  return s;
}

// One byte more in `wanted` (O_APPEND: concurrent commands each add theirs).
void note_compile(const std::string& wanted) {
  const int fd = ::open(wanted.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw io_error("cannot open " + wanted + ": " + std::strerror(errno));
  auto wrote = util::write_all(fd, "x");
  ::close(fd);
  if (!wrote) throw io_error("cannot write " + wanted);
}

bool same_file(const json& recorded, const std::string& path) {
  auto s = util::full_stamp(path);
  return s && recorded.at("size").get<uint64_t>() == s->size &&
         recorded.at("stamp").get<std::string>() == util::stamp_text(*s);
}

}  // namespace

struct PrecompiledHeaders::State {
  enum class Status { kUnknown, kBuilding, kReady, kUnusable };
  Status status = Status::kUnknown;
  Proven proven;  // kReady: what its record says
};

PrecompiledHeaders::PrecompiledHeaders(std::string dir)
    : configured_(!dir.empty()), dir_(configured_ ? util::absolute_path(dir) : dir) {}

// At the first job that may use one, not before: a command whose modules
// all hit touches nothing here.
bool PrecompiledHeaders::open_dir_locked() {
  if (dir_checked_) return !dir_.empty();
  dir_checked_ = true;
  try {
    util::make_directories(dir_, 0700);
  } catch (const Error& e) {
    spdlog::debug("precompiled headers: none ({})", e.what());
    dir_.clear();
    return false;
  }
  // Another user's PCH is code in every compile that loads it.
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022)) {
    spdlog::debug("precompiled headers: none ({} is not a folder only this user may write)", dir_);
    dir_.clear();
    return false;
  }
  return true;
}

PrecompiledHeaders::~PrecompiledHeaders() = default;  // CompilerIdentities is complete here

void PrecompiledHeaders::prepare(const CompileStep& step, const StepContext& context) {
  const std::string& compiler_identity = context.compiler_identity;
  if (!enabled() || step.language != Language::kCxx || step.output != CompileOutput::kObject ||
      !step.launcher.empty())
    return;
  // GCC's PCH (clang's are loaded with -include-pch only).
  if (compiler_identity.find("Free Software Foundation") == std::string::npos ||
      compiler_identity.find("clang") != std::string::npos)
    return;
  std::optional<FirstInclude> first = step.generated_text ? first_include(*step.generated_text)
                                                          : first_include(source_start(step.input_path));
  if (!first || !util::starts_with(first->name, "tvm/ffi/") || first->name.find("..") != std::string::npos) return;
  std::optional<std::vector<std::string>> flags = precompilable_flags(step);
  if (!flags) return;
  for (const auto& f : *flags)
    if (util::starts_with(f, "-iquote")) return;
  // The header the unit's include finds: the first folder of its search
  // that holds it. The search starts with the source's own folder, which
  // `#include <...>` skips (no -iquote is left to skip); a generated unit's
  // is the build dir ("" here), which holds no tvm-ffi.
  std::vector<std::string> search = context.search_dirs;
  if (first->angle && !step.generated_text && !search.empty() &&
      search.front() == util::parent_path(util::opened_path(step.input_path)))
    search.erase(search.begin());
  std::string header;
  for (const auto& d : search) {
    if (d.empty() || d == ".") continue;
    if (d[0] != '/') return;  // relative to a build dir the PCH is not built in
    const std::string candidate = util::join_path(d, first->name);
    if (util::is_regular_file(candidate)) {
      header = candidate;
      break;
    }
  }
  if (header.empty()) return;
  // The -I folders after the header's are left out of its PCH (its build
  // and key), so projects that differ only in their own include folders
  // share one: what such a folder could change is a header the PCH read
  // by a name found there first, which shadowed() checks per unit.
  std::vector<std::string> trailing_dirs;
  const std::string header_dir = header.substr(0, header.size() - first->name.size() - 1);
  *flags = without_trailing_include_dirs(*flags, header_dir, trailing_dirs);
  for (const auto& d : trailing_dirs)
    if (d.empty() || d[0] != '/') return;
  std::vector<std::string> kept_search;
  for (const auto& d : context.search_dirs)
    if (std::find(trailing_dirs.begin(), trailing_dirs.end(), d) == trailing_dirs.end()) kept_search.push_back(d);
  util::Sha256 h;
  for (const std::string& part : {std::string(kKeySalt), compiler_identity, first->name, header}) {
    h.update(part);
    h.update("\0", 1);
  }
  for (const auto& f : *flags) {
    h.update(f);
    h.update("\0", 1);
  }
  for (const auto& v : context.environment)
    if (changes_a_gcc_compile(v.name)) h.update(v.name + (v.set ? "=" + v.value : "") + '\0');
  std::lock_guard<std::mutex> lock(mutex_);
  requests_[&step] = Request{h.hex_digest(),    step.compiler,           first->name,
                             header,            std::move(*flags),       std::move(kept_search),
                             context.toolchain_roots, std::move(trailing_dirs)};
}

void PrecompiledHeaders::prepare_plan(const BuildPlan& plan, const toolchain::Toolchain& tc,
                                      const std::vector<ModuleKeyInputs::EnvVar>& environment,
                                      const std::string& identity_memo_dir) {
  if (!enabled()) return;
  const std::vector<std::string> roots = toolchain_roots(plan, tc);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ids_) ids_ = std::make_unique<CompilerIdentities>(identity_memo_dir, !identity_memo_dir.empty());
  for (const auto& step : plan.compile_steps)
    if (step.language == Language::kCxx && step.launcher.empty())
      pending_[&step] = StepContext{"", include_search_dirs(step, "", environment), roots, environment};
}

// A step of a prepared plan, when it is about to compile (not before: an
// up-to-date build directory spawns no `--version` and reads no source).
void PrecompiledHeaders::prepare_pending(const CompileStep& step) {
  StepContext context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(&step);
    if (it == pending_.end()) return;
    context = std::move(it->second);
    pending_.erase(it);
    try {
      context.compiler_identity = ids_->get(language_name(step.language), step.compiler).identity;
    } catch (const Error& e) {
      if (util::termination_signal()) throw;
      spdlog::debug("precompiled header for {}: {}", step.display, e.what());
      return;
    }
  }
  prepare(step, context);
}

std::string PrecompiledHeaders::key_of(const CompileStep& step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find(&step);
  return it == requests_.end() ? "" : it->second.key;
}

PrecompiledHeaders::State& PrecompiledHeaders::state_of(const std::string& key) {
  auto& s = states_[key];
  if (!s) s = std::make_unique<State>();
  return *s;
}

std::optional<std::string> PrecompiledHeaders::folder_for(const CompileStep& step, const ExecuteOptions& options) {
  using Status = State::Status;
  Request r;
  Proven proven;
  const std::string include = "include";
  prepare_pending(step);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(&step);
    if (it == requests_.end() || !open_dir_locked()) return std::nullopt;
    r = it->second;
    State& st = state_of(r.key);
    if (st.status == Status::kReady) proven = st.proven;
    else if (st.status != Status::kUnknown) return std::nullopt;  // unusable, or another job builds it now
    else st.status = Status::kBuilding;
  }
  const std::string folder = util::join_path(dir_, r.key);
  if (proven.ready) return shadowed(proven, r.trailing_dirs) ? std::nullopt : std::optional(util::join_path(folder, include));
  Status outcome = Status::kUnknown;
  try {
    proven = prove(folder, r.name);
    if (!proven.ready) {
      // Built at its flag set's third compile: one costs about five
      // compiles' savings, so a flag set compiled once or twice pays nothing.
      // `.wanted` holds a byte per compile seen without one.
      const std::string wanted = folder + ".wanted";
      auto seen = util::file_stamp(wanted);
      if (!seen || seen->size + 1 < kBuildAtCompile) {
        note_compile(wanted);
      } else {
        util::FileLock lock = util::FileLock::try_acquire(folder + ".lock", "building a precompiled header");
        if (lock.locked()) {
          proven = prove(folder, r.name);
          if (!proven.ready && build(r, folder, options)) proven = prove(folder, r.name);
          outcome = proven.ready ? Status::kReady : Status::kUnusable;
        }
        // else another process builds it: this unit compiles without, the next asks again
      }
    }
    if (proven.ready) {
      outcome = Status::kReady;
      // Its last use, which eviction goes by (the record's stamp is not checked).
      ::utimensat(AT_FDCWD, util::join_path(folder, kRecordName).c_str(), nullptr, 0);
    }
  } catch (const Error& e) {
    if (util::termination_signal()) throw;  // Ctrl-C: the command stops (temp folders go as it unwinds)
    spdlog::debug("precompiled header {}: {}", r.key, e.what());
    outcome = Status::kUnusable;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    State& st = state_of(r.key);
    st.status = outcome;
    if (outcome == Status::kReady) st.proven = proven;
  }
  if (outcome != Status::kReady || shadowed(proven, r.trailing_dirs)) return std::nullopt;
  return util::join_path(folder, include);
}

// A unit's own -I folders after the header's (not in the key) hold a file
// by the name of one the PCH read: the unit would read that one instead.
bool PrecompiledHeaders::shadowed(const Proven& proven, const std::vector<std::string>& trailing_dirs) {
  if (trailing_dirs.empty()) return false;
  if (proven.probes) return true;  // its __has_include answers were not asked of these folders
  for (const auto& d : trailing_dirs)
    for (const auto& name : proven.names)
      if (util::path_exists(util::join_path(d, name))) {
        spdlog::debug("precompiled header: {} would be read instead of the one it holds", util::join_path(d, name));
        return true;
      }
  return false;
}

void PrecompiledHeaders::discard(const CompileStep& step) {
  std::string key;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(&step);
    if (it == requests_.end()) return;
    key = it->second.key;
    state_of(key).status = State::Status::kUnusable;
  }
  spdlog::warn("the compiler could not use the precompiled header {}: removed", util::join_path(dir_, key));
  util::remove_all(util::join_path(dir_, key));
}

// Every header the PCH's build read, and the .gch itself, still have the
// stamps its record holds, and what did not exist still does not.
PrecompiledHeaders::Proven PrecompiledHeaders::prove(const std::string& folder, const std::string& name) const {
  Proven p;
  auto text = util::read_small_file(util::join_path(folder, kRecordName), kMaxRecordBytes);
  if (!text) return p;
  try {
    const json record = json::parse(*text);
    if (!same_file(record.at("gch"), gch_path(folder, name))) return p;
    for (const auto& input : record.at("inputs")) {
      if (!same_file(input, input.at("path").get<std::string>())) return p;
      if (auto n = input.at("name").get<std::string>(); !n.empty()) p.names.push_back(n);
    }
    for (const auto& path : record.at("absent"))
      if (util::path_exists(path.get<std::string>())) return p;
    p.probes = record.at("probes").get<bool>();
    p.ready = true;
  } catch (const json::exception&) {
    p.names.clear();
  }
  return p;
}

// Compiles the header into `gch`: what its depfile says it read, or nullopt.
std::optional<std::vector<std::string>> PrecompiledHeaders::compile_header(const Request& r, const std::string& tmp,
                                                                           const std::string& gch,
                                                                           const ExecuteOptions& options) {
  const std::string depfile = util::join_path(tmp, "pch.d");
  std::vector<std::string> argv = {r.compiler};
  argv.insert(argv.end(), r.flags.begin(), r.flags.end());
  argv.insert(argv.end(), {"-x", "c++-header", r.header, "-o", gch, "-MD", "-MF", depfile});
  if (options.verbose) spdlog::info("precompiling {}: {}", r.header, util::format_command(argv));
  auto ran = detail::run_command(argv, tmp, "precompiling " + r.header, options);
  if (!ran) {
    spdlog::debug("precompiled header {}: {}", r.key, ran.error().message);
    return std::nullopt;
  }
  auto deps = util::read_small_file(depfile, kMaxRecordBytes);
  util::remove_all(depfile);
  if (!deps) return std::nullopt;
  return parse_depfile(*deps);
}

// The folders GCC searches for <...> with these flags after the command
// line's (its built-in ones: `-E -v` lists them), so that a header read
// from one has a name another folder could shadow it by.
std::vector<std::string> PrecompiledHeaders::builtin_dirs(const Request& r, const std::string& tmp,
                                                         const ExecuteOptions& options) {
  std::vector<std::string> argv = {r.compiler};
  argv.insert(argv.end(), r.flags.begin(), r.flags.end());
  argv.insert(argv.end(), {"-x", "c++-header", "-E", "-v", "/dev/null", "-o", "/dev/null"});
  auto ran = detail::run_command(argv, tmp, "asking " + r.compiler + " for its include folders", options);
  std::vector<std::string> dirs;
  if (!ran) return dirs;
  bool in_list = false;
  for (const auto& line : util::split_lines(ran->output)) {
    const std::string_view t = util::trim(line);
    if (t == "#include <...> search starts here:") in_list = true;
    else if (t == "End of search list.") break;
    else if (in_list && !t.empty() && t[0] == '/') dirs.push_back(util::opened_path(std::string(t)));
  }
  return dirs;
}

// The record that proves the PCH later: every file its build read, with
// stamps settled before `start_ns` and its name under the folder it was
// found in; the files that would have been read instead had they existed
// (shadows, __has_include answers). nullopt: it could not prove itself.
std::optional<std::string> PrecompiledHeaders::record_of(const Request& r, std::vector<std::string> read,
                                                         int64_t start_ns, const std::string& tmp,
                                                         const std::string& gch, const ExecuteOptions& options) {
  std::vector<cache::HeaderRecord> shadowed;
  for (const auto& path : read) shadowed.push_back({path, 0, "", "", {}});
  record_shadows(shadowed, r.search_dirs);
  IncludeProbes probes = has_include_probes(read, r.search_dirs, r.toolchain_roots, tmp);
  if (probes.unkeyable) {
    spdlog::debug("precompiled header {}: {}", r.key, *probes.unkeyable);
    return std::nullopt;
  }
  json absent = json::array();
  for (const auto& h : shadowed)
    for (const auto& s : h.shadows) absent.push_back(s);
  for (const auto& s : probes.absent) absent.push_back(s);
  read.insert(read.end(), probes.found.begin(), probes.found.end());
  std::vector<std::string> folders = r.search_dirs;
  for (auto& d : builtin_dirs(r, tmp, options)) folders.push_back(std::move(d));
  json inputs = json::array();
  for (const std::string& path : read) {
    if (path.empty() || path[0] != '/') return std::nullopt;
    // A header written less than 2 s before the build could change again
    // within its timestamp tick: such a PCH could not prove itself later.
    auto s = settled_stamp(path, start_ns);
    if (!s) {
      spdlog::debug("precompiled header {}: {} is new, changing, or on a filesystem without trusted stamps", r.key,
                    path);
      return std::nullopt;
    }
    std::string name;
    for (const auto& d : folders)
      if (!d.empty() && d[0] == '/' && util::is_path_under(path, d) && path.size() > d.size()) {
        name = path.substr(d.size() + (d == "/" ? 0 : 1));
        break;
      }
    inputs.push_back({{"path", path}, {"name", name}, {"size", s->size}, {"stamp", util::stamp_text(*s)}});
  }
  auto g = util::full_stamp(gch);
  if (!g || g->size == 0) return std::nullopt;
  const json record = {{"name", r.name},
                       {"header", r.header},
                       {"flags", r.flags},
                       {"gch", {{"size", g->size}, {"stamp", util::stamp_text(*g)}}},
                       {"inputs", inputs},
                       {"absent", absent},
                       {"probes", !probes.found.empty() || !probes.absent.empty()}};
  return record.dump(1);
}

bool PrecompiledHeaders::build(const Request& r, const std::string& folder, const ExecuteOptions& options) {
  const std::string tmp = folder + ".tmp-" + util::unique_name_suffix();
  struct RemoveTmp {
    std::string path;
    ~RemoveTmp() { util::remove_all(path); }
  } remove_tmp{tmp};
  const std::string gch = gch_path(tmp, r.name);
  util::make_directories(util::parent_path(gch), 0700);
  // Beside the .gch, the header itself (a link): a later `#include` of it
  // in the unit, which the PCH cannot serve, finds it here and skips it by
  // its include guard. The unit's depfile then names this path too;
  // forget_pch_reads() takes it out.
  if (::symlink(r.header.c_str(), gch.substr(0, gch.size() - 4).c_str()) != 0) return false;
  const int64_t start = util::realtime_now_ns();
  auto read = compile_header(r, tmp, gch, options);
  if (!read) return false;
  auto record = record_of(r, std::move(*read), start, tmp, gch, options);
  if (!record) return false;
  util::write_file_atomic(util::join_path(tmp, kRecordName), *record, 0600);
  util::remove_all(folder);
  if (::rename(tmp.c_str(), folder.c_str()) != 0) return false;
  evict_old(folder);
  return true;
}

// The kKeep PCHs used last stay (their record's mtime is touched at each
// command's first use); leftovers of builds that died (an hour old) go.
void PrecompiledHeaders::evict_old(const std::string& keep) const {
  std::vector<std::pair<int64_t, std::string>> built;
  const int64_t hour_ago = util::realtime_now_ns() - 3600 * int64_t{1000000000};
  for (const std::string& name : util::list_directory(dir_)) {
    const std::string path = util::join_path(dir_, name);
    if (name.find(".tmp-") != std::string::npos) {
      auto s = util::full_stamp(path, false);
      if (s && s->mtime_ns < hour_ago) util::remove_all(path);
      continue;
    }
    if (path == keep || !util::is_directory(path)) continue;
    auto s = util::full_stamp(util::join_path(path, kRecordName));
    built.push_back({s ? s->mtime_ns : 0, path});
  }
  if (built.size() + 1 <= kKeep) return;
  std::sort(built.begin(), built.end());
  for (size_t i = 0; i + kKeep < built.size() + 1; ++i) {
    util::remove_all(built[i].second);
    util::remove_all(built[i].second + ".wanted");
  }
}

}  // namespace tvmffi_jit::compile
