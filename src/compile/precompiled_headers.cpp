#include "tvmffi_jit/compile/precompiled_headers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "compile/command.h"
#include "compile/include_probes.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
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

// What a unit's first include is decided from: the start of its source
// (a file's first 64 KiB; an include later than that is not a first one).
std::string source_start(const std::string& path) {
  constexpr size_t kMaxBytes = 64 * 1024;
  std::string text;
  try {
    const int fd = util::open_for_reading(path);
    text.resize(kMaxBytes);
    auto n = util::pread_some(fd, text.data(), text.size(), 0);
    ::close(fd);
    text.resize(n ? *n : 0);
  } catch (const Error&) {
    text.clear();
  }
  return text;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

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

// The key's environment: what can change a GCC C++ compile. Left out are
// the variables that choose the compiler (its identity is keyed) and those
// only nvcc, hipcc or the linker read; any other the object keys hold stays.
bool changes_a_gcc_compile(const std::string& name) {
  static const char* const kOthers[] = {"CXX", "CC", "CUDA_HOME", "NVCC_CCBIN", "NVCC_PREPEND_FLAGS",
                                        "NVCC_APPEND_FLAGS", "INCLUDES", "SYSTEM_INCLUDES", "LIBRARIES",
                                        "CUDAFE_FLAGS", "PTXAS_FLAGS", "LIBRARY_PATH", "LD_RUN_PATH",
                                        "GNUTARGET", "LDEMULATION", "DEVICE_LIB_PATH"};
  for (const char* o : kOthers)
    if (name == o) return false;
  return !starts_with(name, "HIP") && !starts_with(name, "ROCM");
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
};

std::optional<FirstInclude> first_include(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string_view::npos) return std::nullopt;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      if (i == std::string_view::npos) return std::nullopt;
      i += 2;
    } else {
      break;
    }
  }
  auto skip_blanks = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  if (i >= text.size() || text[i] != '#') return std::nullopt;
  ++i;
  skip_blanks();
  if (text.compare(i, 7, "include") != 0) return std::nullopt;
  i += 7;
  skip_blanks();
  if (i >= text.size() || (text[i] != '<' && text[i] != '"')) return std::nullopt;
  const bool angle = text[i] == '<';
  const size_t end = text.find_first_of(angle ? ">\n" : "\"\n", i + 1);
  if (end == std::string_view::npos || text[end] == '\n' || end == i + 1) return std::nullopt;
  return FirstInclude{std::string(text.substr(i + 1, end - i - 1)), angle};
}

std::optional<std::vector<std::string>> precompilable_flags(const CompileStep& step) {
  const std::vector<std::string> a = step.argv();
  const size_t n = a.size();
  if (n < 8 || a[1] != "-MD" || a[2] != "-MF" || a[n - 4] != "-c" || a[n - 2] != "-o") return std::nullopt;
  std::vector<std::string> flags(a.begin() + 4, a.end() - 4);
  for (const auto& f : flags) {
    if (f.empty() || f[0] == '@') return std::nullopt;  // a response file: what it says is not seen here
    for (const char* p : {"-include", "-imacros", "-x", "-save-temps", "-fpch-preprocess"})
      if (starts_with(f, p)) return std::nullopt;
    for (const char* o : {"-E", "-S", "-M", "-MM", "-fsyntax-only", "-fno-pch-deps", "-fdirectives-only"})
      if (f == o) return std::nullopt;
    // Debug info records the compile's switches (DW_AT_producer), which
    // would then name -fpch-deps: the object would differ from one built
    // without a PCH. So would -frecord-gcc-switches'.
    if ((starts_with(f, "-g") && f != "-g0") || f == "-frecord-gcc-switches") return std::nullopt;
  }
  return flags;
}

void forget_pch_reads(const std::string& depfile_path, const std::string& folder, const std::string& target) {
  auto text = util::read_small_file(depfile_path, kMaxRecordBytes * 4);
  if (!text) return;
  std::vector<std::string> deps = parse_depfile(*text);
  const auto under = [&](const std::string& p) { return util::is_path_under(p, folder); };
  if (std::none_of(deps.begin(), deps.end(), under)) return;
  deps.erase(std::remove_if(deps.begin(), deps.end(), under), deps.end());
  util::write_file(depfile_path, format_depfile({target}, deps));
}

bool mentions_precompiled_header(const std::string& compiler_output) {
  return compiler_output.find(".gch") != std::string::npos ||
         compiler_output.find("precompiled header") != std::string::npos ||
         compiler_output.find("PCH") != std::string::npos;
}

PrecompiledHeaders::PrecompiledHeaders(std::string dir) : configured_(!dir.empty()), dir_(configured_ ? util::absolute_path(dir) : dir) {}

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

PrecompiledHeaders::~PrecompiledHeaders() = default;

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
  if (!first || !starts_with(first->name, "tvm/ffi/") || first->name.find("..") != std::string::npos) return;
  std::optional<std::vector<std::string>> flags = precompilable_flags(step);
  if (!flags) return;
  for (const auto& f : *flags)
    if (starts_with(f, "-iquote")) return;
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
  requests_[&step] = Request{h.hex_digest(),        step.compiler,       first->name,           header,
                             std::move(*flags),     context.search_dirs, context.toolchain_roots};
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(&step);
    if (it == requests_.end() || !open_dir_locked()) return std::nullopt;
    r = it->second;
    State& st = state_of(r.key);
    if (st.status == Status::kReady) return util::join_path(util::join_path(dir_, r.key), "include");
    if (st.status != Status::kUnknown) return std::nullopt;  // unusable, or another job builds it now
    st.status = Status::kBuilding;
  }
  const std::string folder = util::join_path(dir_, r.key);
  Status outcome = Status::kUnknown;
  try {
    if (current(folder, r.name)) {
      outcome = Status::kReady;
    } else {
      // Built at its flag set's second compile: a one-off compile pays nothing.
      const std::string wanted = folder + ".wanted";
      if (!util::path_exists(wanted)) {
        util::write_file(wanted, "");
      } else {
        util::FileLock lock = util::FileLock::try_acquire(folder + ".lock", "building a precompiled header");
        if (lock.locked()) outcome = current(folder, r.name) || build(r, folder, options) ? Status::kReady : Status::kUnusable;
        // else another process builds it: this unit compiles without, the next asks again
      }
    }
  } catch (const Error& e) {
    spdlog::debug("precompiled header {}: {}", r.key, e.what());
    outcome = Status::kUnusable;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  state_of(r.key).status = outcome;
  if (outcome != Status::kReady) return std::nullopt;
  return util::join_path(folder, "include");
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
// stamps its record holds.
bool PrecompiledHeaders::current(const std::string& folder, const std::string& name) const {
  auto text = util::read_small_file(util::join_path(folder, kRecordName), kMaxRecordBytes);
  if (!text) return false;
  try {
    const json record = json::parse(*text);
    if (!same_file(record.at("gch"), gch_path(folder, name))) return false;
    for (const auto& input : record.at("inputs"))
      if (!same_file(input, input.at("path").get<std::string>())) return false;
    for (const auto& path : record.at("absent"))
      if (util::path_exists(path.get<std::string>())) return false;
    return true;
  } catch (const json::exception&) {
    return false;
  }
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
  const std::string depfile = util::join_path(tmp, "pch.d");
  std::vector<std::string> argv = {r.compiler};
  argv.insert(argv.end(), r.flags.begin(), r.flags.end());
  argv.insert(argv.end(), {"-x", "c++-header", r.header, "-o", gch, "-MD", "-MF", depfile});
  if (options.verbose) spdlog::info("precompiling {}: {}", r.header, util::format_command(argv));
  const int64_t start = util::realtime_now_ns();
  auto ran = detail::run_command(argv, tmp, "precompiling " + r.header, options);
  if (!ran) {
    spdlog::debug("precompiled header {}: {}", r.key, ran.error().message);
    return false;
  }
  auto deps = util::read_small_file(depfile, kMaxRecordBytes);
  if (!deps) return false;
  std::vector<std::string> read = parse_depfile(*deps);
  // What the build would have read instead, had it existed: the shadows of
  // each header, and the __has_include answers (the first existing
  // candidate is read-like, the ones before it shadows).
  std::vector<cache::HeaderRecord> shadowed;
  for (const auto& path : read) shadowed.push_back({path, 0, "", "", {}});
  record_shadows(shadowed, r.search_dirs);
  IncludeProbes probes = has_include_probes(read, r.search_dirs, r.toolchain_roots, tmp);
  if (probes.unkeyable) {
    spdlog::debug("precompiled header {}: {}", r.key, *probes.unkeyable);
    return false;
  }
  json absent = json::array();
  for (const auto& h : shadowed)
    for (const auto& s : h.shadows) absent.push_back(s);
  for (const auto& s : probes.absent) absent.push_back(s);
  read.insert(read.end(), probes.found.begin(), probes.found.end());
  json inputs = json::array();
  for (const std::string& path : read) {
    if (path.empty() || path[0] != '/') return false;
    // A header written less than 2 s before the build could change again
    // within its timestamp tick: such a PCH could not prove itself later.
    auto s = settled_stamp(path, start);
    if (!s) {
      spdlog::debug("precompiled header {}: {} is new, changing, or on a filesystem without trusted stamps", r.key,
                    path);
      return false;
    }
    inputs.push_back({{"path", path}, {"size", s->size}, {"stamp", util::stamp_text(*s)}});
  }
  auto g = util::full_stamp(gch);
  if (!g || g->size == 0) return false;
  const json record = {{"name", r.name},
                       {"header", r.header},
                       {"flags", r.flags},
                       {"gch", {{"size", g->size}, {"stamp", util::stamp_text(*g)}}},
                       {"inputs", inputs},
                       {"absent", absent}};
  util::write_file_atomic(util::join_path(tmp, kRecordName), record.dump(1), 0600);
  util::remove_all(depfile);
  util::remove_all(folder);
  if (::rename(tmp.c_str(), folder.c_str()) != 0) return false;
  evict_old(folder);
  return true;
}

// The newest kKeep PCHs stay (by their record's time); leftovers of builds
// that died (an hour old) go.
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
