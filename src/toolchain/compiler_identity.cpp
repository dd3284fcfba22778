#include "tvmffi_jit/toolchain/compiler_identity.h"

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

constexpr int kMemoVersion = 1;
constexpr uint64_t kMaxMemoBytes = 1ull << 20;  // a memo is a few hundred bytes; a bigger one is not ours

nlohmann::json stamp_json(const util::FileStamp& s) {
  return {{"size", s.size}, {"mtime_ns", s.mtime_ns}, {"inode", s.inode}, {"device", s.device}};
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
  if (version && !version->empty()) return util::json_text(*version);
  spdlog::debug("'{} --version' gave nothing to identify it by ({}); identifying it by content", invoked,
                version ? "no output" : version.why());
  return "sha256:" + util::sha256_file_hex(resolved);
}

}  // namespace

CompilerIdentity identify_compiler(const std::string& role, const std::string& program, const IdentifyOptions& options) {
  auto found = util::find_program(program);
  if (!found) throw missing_tool_error("cannot find the compiler '" + program + "' (looked on PATH)");
  CompilerIdentity c;
  c.role = role;
  c.path = util::absolute_path(*found);
  c.resolved = util::canonical_path(c.path);
  auto stamp = util::file_stamp(c.resolved);
  if (!stamp) throw missing_tool_error("cannot stat the compiler " + c.resolved);

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
          j->value("resolved", "") == c.resolved && j->value("stamp", nlohmann::json()) == stamp_json(*stamp) &&
          j->contains("identity") && (*j)["identity"].is_string()) {
        c.identity = (*j)["identity"].get<std::string>();
        return c;
      }
    }
  }
  c.identity = query_identity(c.path, c.resolved, options.timeout_seconds);
  if (!memo.empty() && options.memo_writable) {
    nlohmann::json j = {{"version", kMemoVersion}, {"path", c.path},         {"resolved", c.resolved},
                        {"stamp", stamp_json(*stamp)}, {"identity", c.identity}};
    try {
      util::make_directories(options.memo_dir, 0700);
      util::write_file_atomic(memo, util::dump_json(j, 2) + "\n", 0600);
    } catch (const Error& e) {
      spdlog::debug("cannot memoise the identity of {}: {}", c.path, e.what());
    }
  }
  return c;
}

}  // namespace tvmffi_jit::toolchain
