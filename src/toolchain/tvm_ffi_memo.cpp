#include "tvmffi_jit/toolchain/tvm_ffi_memo.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/toolchain/version.h"

namespace tvmffi_jit::toolchain {

namespace {

// The tvm-ffi location memo is a few hundred bytes; a bigger one is not ours.
constexpr uint64_t kMaxMemoBytes = 1ull << 20;
// Its name, in the cache root and in the per-user directory.
constexpr const char* kMemoFileName = "tvm-ffi.json";

// A directory's stamp (inode, mtime, ctime): adding or removing an entry
// (a tvm_ffi package, a .pth file) changes it. null: absent.
nlohmann::json dir_stamp(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return nullptr;
  return {{"inode", static_cast<uint64_t>(st.st_ino)},
          {"device", static_cast<uint64_t>(st.st_dev)},
          {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
          {"ctime_ns", static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec}};
}

// Where `import tvm_ffi` looks, asked of Python once per memo: its user site
// (whether it exists yet or not) and sys.path, each with its stamp. A second
// tvm_ffi installed in the user site (pip install --user) or anywhere on the
// path changes one of them, and the memo is not believed.
nlohmann::json python_dirs(const std::string& python) {
  nlohmann::json out = nlohmann::json::object();
  auto path = util::find_program(python);
  if (!path) return out;
  QueryOptions q;
  q.merge_stderr = false;
  Expected<std::string> text =
      query_program({*path, "-c", "import json, site, sys; print(json.dumps([site.getusersitepackages()] + sys.path))"},
                    q);
  if (!text) return out;
  auto dirs = nlohmann::json::parse(*text, nullptr, false);
  if (!dirs.is_array()) return out;
  for (const auto& d : dirs)
    if (d.is_string() && !d.get<std::string>().empty() && d.get<std::string>()[0] == '/')
      out[d.get<std::string>()] = dir_stamp(d.get<std::string>());
  return out;
}

bool python_dirs_unchanged(const nlohmann::json& recorded) {
  if (!recorded.is_object()) return false;  // empty: Python was not there to ask
  for (const auto& [dir, stamp] : recorded.items())
    if (dir_stamp(dir) != stamp) return false;
  return true;
}

// What decides the answer of a program find_tvm_ffi would ask.
nlohmann::json program_state(const std::string& program) {
  auto path = util::find_program(program);
  if (!path) return nullptr;
  Expected<std::string> resolved = util::real_path(*path);
  if (!resolved) return nullptr;
  auto st = util::file_stamp(*resolved);
  if (!st) return nullptr;
  return {{"path", *path}, {"resolved", *resolved}, {"size", st->size}, {"mtime_ns", st->mtime_ns},
          {"inode", st->inode}, {"device", st->device}};
}

// What a memo must have been written under to answer this search.
nlohmann::json search_state(const TvmFfiSearch& search) {
  return {{"version", 2},
          {"PATH", search.env("PATH").value_or("")},
          {"PYTHONPATH", search.env("PYTHONPATH").value_or("")},
          // What decides Python's user site and prefix.
          {"HOME", search.env("HOME").value_or("")},
          {"PYTHONUSERBASE", search.env("PYTHONUSERBASE").value_or("")},
          {"PYTHONNOUSERSITE", search.env("PYTHONNOUSERSITE").value_or("")},
          {"PYTHONHOME", search.env("PYTHONHOME").value_or("")},
          {"VIRTUAL_ENV", search.env("VIRTUAL_ENV").value_or("")},
          {"config", program_state(search.config_program)},
          {"python", program_state(search.python_program)}};
}

// Only a directory of this user's that no one else may write is believed.
bool is_private_dir(const std::string& dir) {
  struct stat st;
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 0022) == 0;
}

// The location a memo records, if it was written under `state`, Python's
// directories are as they were, and the files it names are still there.
std::optional<TvmFfiLocation> read_memo(const std::string& path, const nlohmann::json& state) {
  auto text = util::read_small_file(path, kMaxMemoBytes);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || j.value("state", nlohmann::json()) != state || !j.contains("location") ||
      !j["location"].is_object() || !python_dirs_unchanged(j.value("python_dirs", nlohmann::json())))
    return std::nullopt;
  const auto& l = j["location"];
  TvmFfiLocation loc{l.value("include_dir", ""), l.value("dlpack_include_dir", ""), l.value("lib_dir", ""),
                     l.value("found_by", "")};
  if (!util::is_regular_file(util::join_path(loc.include_dir, "tvm/ffi/function.h")) ||
      !util::is_regular_file(util::join_path(loc.dlpack_include_dir, "dlpack/dlpack.h")) ||
      !util::is_regular_file(util::join_path(loc.lib_dir, "libtvm_ffi.so")))
    return std::nullopt;
  return loc;
}

std::string memo_text(const nlohmann::json& state, const TvmFfiLocation& loc, const std::string& python) {
  return util::dump_json({{"state", state},
                          {"python_dirs", python_dirs(python)},
                          {"location",
                           {{"include_dir", loc.include_dir},
                            {"dlpack_include_dir", loc.dlpack_include_dir},
                            {"lib_dir", loc.lib_dir},
                            {"found_by", loc.found_by}}}},
                         2) +
         "\n";
}

// Best effort: a memo that cannot be written costs the next command a search.
void write_user_memo(const std::string& user_dir, const std::string& text) {
  try {
    util::make_directories(user_dir, 0700);
    if (is_private_dir(user_dir)) util::write_file_atomic(util::join_path(user_dir, kMemoFileName), text, 0600);
  } catch (const Error& e) {
    spdlog::debug("not memoising the tvm-ffi location for this user: {}", e.what());
  }
}

void write_root_memo(const TvmFfiMemoDirs& dirs, const std::string& text) {
  try {
    if (dirs.root_writable && dirs.root_writable()) {
      util::make_directories(dirs.root_dir, 0700);
      util::write_file_atomic(util::join_path(dirs.root_dir, kMemoFileName), text, 0600);
    }
  } catch (const Error& e) {
    spdlog::debug("not memoising the tvm-ffi location: {}", e.what());  // the build reports an unsafe root itself
  }
}

}  // namespace

Expected<TvmFfiLocation> find_tvm_ffi_memoized(const TvmFfiSearch& search, const TvmFfiMemoDirs& dirs) {
  if (search.root || non_empty(search.env, "TVM_FFI_ROOT") || dirs.root_dir.empty()) return find_tvm_ffi(search);
  const nlohmann::json state = search_state(search);
  if (auto loc = read_memo(util::join_path(dirs.root_dir, kMemoFileName), state)) return *loc;
  // The same memo in the per-user directory every root shares: a new root
  // (a CI job's fresh cache) skips tvm-ffi-config's ~80 ms of Python too.
  std::optional<TvmFfiLocation> shared;
  if (is_private_dir(dirs.user_dir)) shared = read_memo(util::join_path(dirs.user_dir, kMemoFileName), state);
  Expected<TvmFfiLocation> found = shared ? Expected<TvmFfiLocation>(*shared) : find_tvm_ffi(search);
  if (!found) return found;
  const std::string text = memo_text(state, *found, search.python_program);
  if (!shared && !dirs.user_dir.empty()) write_user_memo(dirs.user_dir, text);
  write_root_memo(dirs, text);
  return found;
}

}  // namespace tvmffi_jit::toolchain
