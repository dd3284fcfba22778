#include "tvmffi_jit/cache/results.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_hex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

constexpr const char* kResultListFormat = "tvmffi-jit results 1";

}  // namespace

std::string result_id(const EntryRecord& entry) {
  const BaseDir base(entry.base_dir);
  util::KeyHasher h;
  h.field("format", "tvmffi-jit result 1");
  h.field("artifacts", std::to_string(entry.artifacts.size()));
  for (const auto& a : entry.artifacts) {
    h.field("artifact.file", a.file);
    h.field("artifact.sha256", a.sha256);
  }
  // Records are merged by path when read (entry_from_json), so the id is
  // taken over them sorted: the same inputs in another order are one result.
  std::vector<std::pair<std::string, std::string>> inputs;
  inputs.reserve(entry.headers.size());
  for (const auto& r : entry.headers) inputs.emplace_back(base.relative_header(r.path), r.sha256);
  std::sort(inputs.begin(), inputs.end());
  h.field("inputs", std::to_string(inputs.size()));
  for (const auto& [path, digest] : inputs) {
    h.field("input.path", path);
    h.field("input.sha256", digest);
  }
  return h.hex_digest();
}

std::string result_dir_name(const std::string& id) { return id.substr(0, 16); }

bool is_result_dir_name(std::string_view name) { return is_hex(name, 16); }

std::vector<ResultDir> list_result_dirs(const std::string& key_dir) {
  std::vector<ResultDir> out;
  int fd = ::open(key_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return out;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (!is_result_dir_name(e->d_name)) continue;
    names.emplace_back(e->d_name);
  }
  // Bounded whatever the directory holds; name order keeps the choice stable.
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxResultDirsRead) names.resize(kMaxResultDirsRead);
  for (const auto& n : names) {
    struct stat st;
    if (::fstatat(::dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    out.push_back({util::join_path(key_dir, n),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  std::stable_sort(out.begin(), out.end(),
                   [](const ResultDir& a, const ResultDir& b) { return a.last_used_ns > b.last_used_ns; });
  return out;
}

namespace {

// One line per record: "<sha256> <size> <stat or -> <path in hex>".
std::string distinct_inputs_text(const std::vector<HeaderRecord>& records) {
  std::string out;
  for (const auto& r : records)
    out += r.sha256 + " " + std::to_string(r.size) + " " + (r.stat.empty() ? "-" : r.stat) + " " +
           util::hex_encode(reinterpret_cast<const uint8_t*>(r.path.data()), r.path.size()) + "\n";
  return out;
}

// The records of `entry` that `other` does not hold with the same path and digest.
std::vector<HeaderRecord> differing(const EntryRecord& entry, const EntryRecord& other) {
  std::unordered_map<std::string_view, std::string_view> digest_by_path;
  digest_by_path.reserve(other.headers.size());
  for (const auto& r : other.headers) digest_by_path.emplace(r.path, r.sha256);
  std::vector<HeaderRecord> out;
  for (const auto& r : entry.headers) {
    auto it = digest_by_path.find(r.path);
    if (it == digest_by_path.end() || it->second != r.sha256) out.push_back(r);
  }
  return out;
}

// Appends the records of `more` whose path `into` does not hold yet.
void add_new_paths(std::vector<HeaderRecord>& into, std::vector<HeaderRecord> more) {
  for (auto& r : more) {
    bool known = false;
    for (const auto& a : into) known = known || a.path == r.path;
    if (!known) into.push_back(std::move(r));
  }
}

// Adds `more` to the distinct inputs of `result_dir` (by path), atomically.
// The directory's mtime is its last use (the LRU order of the key's
// results and of gc): writing the note must not move it, so it is put back.
void add_distinct_inputs(const std::string& result_dir, std::vector<HeaderRecord> more) {
  if (more.empty()) return;
  struct stat before;
  if (::lstat(result_dir.c_str(), &before) != 0) return;
  std::vector<HeaderRecord> all = read_distinct_inputs(result_dir);
  add_new_paths(all, std::move(more));
  const std::string text = distinct_inputs_text(all);
  if (text.size() > kMaxDistinctInputsBytes) return;  // a full lookup does without it
  util::write_file_atomic(util::join_path(result_dir, kDistinctInputsName), text, 0600);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ::utimensat(AT_FDCWD, result_dir.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

}  // namespace

void note_distinct_inputs(const std::string& key_dir, const std::string& published_dir, const EntryRecord& published) {
  std::vector<HeaderRecord> mine;
  for (const auto& sibling : list_result_dirs(key_dir)) {
    if (sibling.path == published_dir) continue;
    try {
      Expected<SharedEntry> other = read_entry(sibling.path);
      if (!other || (*other)->key != published.key) continue;
      add_new_paths(mine, differing(published, **other));
      add_distinct_inputs(sibling.path, differing(**other, published));
    } catch (const Error&) {
      // A shortcut only: a result without it is looked up in full.
    }
  }
  try {
    add_distinct_inputs(published_dir, std::move(mine));
  } catch (const Error&) {
    // As above.
  }
  // Published now: the key's most recently used result (its directory was
  // made when the build began).
  ::utimensat(AT_FDCWD, published_dir.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

std::vector<HeaderRecord> read_distinct_inputs(const std::string& result_dir) {
  std::vector<HeaderRecord> out;
  auto text = util::read_small_file(util::join_path(result_dir, kDistinctInputsName), kMaxDistinctInputsBytes);
  if (!text) return out;
  for (const auto& line : util::split_lines(*text)) {
    std::vector<std::string> f = util::split_any(line, " ");
    if (f.size() != 4 || !is_hex(f[0], 64) || f[1].empty() || f[1].size() > 19 ||
        f[1].find_first_not_of("0123456789") != std::string::npos)
      return {};
    auto path = util::hex_decode(f[3]);
    if (!path || path->empty() || (*path)[0] != '/') return {};
    HeaderRecord r;
    r.sha256 = f[0];
    r.size = std::stoull(f[1]);
    if (f[2] != "-") r.stat = f[2];
    r.path = std::move(*path);
    out.push_back(std::move(r));
  }
  return out;
}

Expected<ResultList> parse_result_list(std::string_view text, const std::string& key) {
  auto fail = [](const std::string& why) { return Unexpected{why}; };
  if (text.size() > kMaxResultListBytes)
    return fail("the result list has " + std::to_string(text.size()) + " bytes, more than " +
                std::to_string(kMaxResultListBytes));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("the result list is not a JSON object");
  auto format = j.find("format");
  auto k = j.find("key");
  auto ids = j.find("results");
  if (format == j.end() || *format != kResultListFormat) return fail("the result list has another format");
  if (k == j.end() || !k->is_string() || *k != key) return fail("the result list is for another key");
  if (ids == j.end() || !ids->is_array()) return fail("the result list has no results");
  ResultList list;
  list.key = key;
  for (const auto& id : *ids) {
    if (!id.is_string() || !is_hex(id.get<std::string>(), 64)) return fail("the result list holds a malformed id");
    std::string s = id.get<std::string>();
    if (std::find(list.result_ids.begin(), list.result_ids.end(), s) != list.result_ids.end()) continue;
    if (list.result_ids.size() < kMaxResultsPerKey) list.result_ids.push_back(std::move(s));
  }
  return list;
}

std::string result_list_text(const ResultList& list) {
  nlohmann::json j = {{"format", kResultListFormat}, {"key", list.key}, {"results", list.result_ids}};
  return util::dump_json(j, -1) + "\n";
}

ResultList merge_result_list(const std::optional<ResultList>& old, const std::string& key, const std::string& id) {
  ResultList list;
  list.key = key;
  list.result_ids.push_back(id);
  if (old && old->key == key)
    for (const auto& o : old->result_ids)
      if (o != id && list.result_ids.size() < kMaxResultsPerKey) list.result_ids.push_back(o);
  return list;
}

}  // namespace tvmffi_jit::cache
