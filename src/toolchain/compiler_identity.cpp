#include "tvmffi_jit/toolchain/compiler_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/stamp_memo.h"
#include "tvmffi_jit/toolchain/version.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::toolchain {

namespace {

// 2: the identity holds the compiler's content (and nvcc.profile's), the
// stamps hold ctime and cover nvcc.profile.
constexpr int kMemoVersion = 2;
constexpr uint64_t kMaxMemoBytes = 1ull << 20;  // a memo is a few hundred bytes; a bigger one is not ours

// size, mtime, inode, device and ctime: an in-place edit that restores the
// mtime (cp -p, touch -r, a tar extract) still changes the ctime. null: absent.
nlohmann::json stamp_json(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return nullptr;
  return {{"size", static_cast<uint64_t>(st.st_size)},
          {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
          {"ctime_ns", static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec},
          {"inode", static_cast<uint64_t>(st.st_ino)},
          {"device", static_cast<uint64_t>(st.st_dev)}};
}

// Files beside a compiler that change what it does without changing it:
// nvcc reads nvcc.profile from its own directory (include and library
// paths, the cicc and ptxas it runs), so a CUDA_HOME copy with an edited
// profile is another compiler.
std::vector<std::string> companion_files(const std::string& resolved) {
  if (util::file_name(resolved) == "nvcc") return {util::join_path(util::parent_path(resolved), "nvcc.profile")};
  return {};
}

// The stamps the memo is checked against: the compiler's and its companions'.
nlohmann::json stamps_json(const std::string& resolved) {
  nlohmann::json j = {{resolved, stamp_json(resolved)}};
  for (const auto& c : companion_files(resolved)) j[c] = stamp_json(c);
  return j;
}

std::string memo_path(const std::string& dir, const std::string& invoked) {
  return util::join_path(dir, util::sha256_hex(invoked).substr(0, 32) + ".json");
}

std::string query_identity(const std::string& invoked, const std::string& resolved, double timeout) {
  QueryOptions query;
  query.timeout_seconds = timeout;
  Expected<std::string> version = version_of(invoked, query);  // LC_ALL=C: one compiler, one key
  // As it reads back from the memo: a --version text that is not UTF-8 gives
  // the same key whether it was just queried or memoised.
  // The content too, as ccache's compiler_check=content: a wrapper script
  // edited to pass other flags keeps its --version.
  std::string content = "sha256:" + util::sha256_file_hex(resolved);
  for (const auto& c : companion_files(resolved))
    if (util::is_regular_file(c)) content += "\n" + util::file_name(c) + " sha256:" + util::sha256_file_hex(c);
  if (version && !version->empty()) return util::json_text(*version) + "\n" + content;
  spdlog::debug("'{} --version' gave nothing to identify it by ({}); identifying it by content", invoked,
                version ? "no output" : version.why());
  return content;
}

}  // namespace

CompilerIdentity identify_compiler(const std::string& role, const std::string& program, const IdentifyOptions& options) {
  auto found = util::find_program(program);
  if (!found) throw missing_tool_error("cannot find the compiler '" + program + "' (looked on PATH)");
  CompilerIdentity c;
  c.role = role;
  c.path = util::absolute_path(*found);
  c.resolved = util::canonical_path(c.path);
  nlohmann::json stamps = stamps_json(c.resolved);
  if (stamps[c.resolved].is_null()) throw missing_tool_error("cannot stat the compiler " + c.resolved);

  std::string memo;
  if (!options.memo_dir.empty()) {
    memo = memo_path(options.memo_dir, c.path);
    // Parsed once per process while the memo file keeps its stamp (it is
    // only ever replaced by rename): the engine library answers many hits.
    static util::StampMemo<nlohmann::json> parsed(64, 0, false);
    auto j = parsed.get_or(memo, [&]() -> std::optional<nlohmann::json> {
      auto text = util::read_small_file(memo, kMaxMemoBytes);
      if (!text) return std::nullopt;
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) return std::nullopt;
      return j;
    });
    if (j) {
      if (j->is_object() && j->value("version", 0) == kMemoVersion && j->value("path", "") == c.path &&
          j->value("resolved", "") == c.resolved && j->value("stamps", nlohmann::json()) == stamps &&
          j->contains("identity") && (*j)["identity"].is_string()) {
        c.identity = (*j)["identity"].get<std::string>();
        return c;
      }
    }
  }
  c.identity = query_identity(c.path, c.resolved, options.timeout_seconds);
  if (!memo.empty() && options.memo_writable) {
    nlohmann::json j = {{"version", kMemoVersion}, {"path", c.path},         {"resolved", c.resolved},
                        {"stamps", stamps}, {"identity", c.identity}};
    try {
      util::make_directories(options.memo_dir, 0700);
      util::write_file_atomic(memo, util::dump_json(j, 2) + "\n", 0600);
    } catch (const Error& e) {
      spdlog::debug("cannot memoise the identity of {}: {}", c.path, e.what());
    }
  }
  return c;
}

size_t remove_identity_memos(const std::string& memo_dir) {
  size_t removed = 0;
  for (const auto& n : util::list_directory(memo_dir)) {
    // memo_path()'s names only: 32 lower-case hex digits, ".json".
    if (n.size() != 32 + 5 || n.compare(32, 5, ".json") != 0 ||
        n.find_first_not_of("0123456789abcdef") < 32)
      continue;
    const std::string p = util::join_path(memo_dir, n);
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(p.c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace tvmffi_jit::toolchain
