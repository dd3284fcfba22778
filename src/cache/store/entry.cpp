#include "tvmffi_jit/cache/entry.h"

#include <algorithm>

#include <filesystem>
#include <string_view>
#include <unordered_map>

#include "cache/store/entry_bin.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/stamp_memo.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

bool is_hex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Header paths decide hits, so they are stored losslessly: a path that is
// not UTF-8 goes in as hex instead of being replaced.
nlohmann::json header_to_json(const HeaderRecord& h) {
  nlohmann::json j = {{"size", h.size}, {"sha256", h.sha256}};
  if (!h.stat.empty()) j["stat"] = h.stat;
  if (util::is_valid_utf8(h.path)) j["path"] = h.path;
  else j["path_hex"] = util::hex_encode(reinterpret_cast<const uint8_t*>(h.path.data()), h.path.size());
  if (!h.shadows.empty()) {
    nlohmann::json shadows = nlohmann::json::array();
    for (const auto& p : h.shadows) {
      if (util::is_valid_utf8(p)) shadows.push_back(p);
      else shadows.push_back({{"hex", util::hex_encode(reinterpret_cast<const uint8_t*>(p.data()), p.size())}});
    }
    j["shadows"] = std::move(shadows);
  }
  return j;
}

// "/a/b.h", never "/a/../b.h", "/a/./b.h", "/a//b.h" or "relative/b.h": what
// std::filesystem's lexically_normal() leaves as it is, by one scan (an
// entry records hundreds of paths, and every command-line hit reads them).
bool is_normal_absolute_path(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  size_t start = 1;  // of the component after each '/'
  while (start <= p.size()) {
    const size_t end = std::min(p.find('/', start), p.size());
    const size_t length = end - start;
    if (length == 0 && end != p.size()) return false;  // "//": only a trailing '/' may end empty
    if (length == 1 && p[start] == '.') return false;
    if (length == 2 && p[start] == '.' && p[start + 1] == '.') return false;
    start = end + 1;
  }
  return true;
}

std::string bounded_compiler_output(const std::string& text) {
  if (text.size() <= kMaxStoredCompilerOutput) return text;
  return text.substr(0, kMaxStoredCompilerOutput) + "\n[... " + std::to_string(text.size() - kMaxStoredCompilerOutput) +
         " more bytes of compiler output not kept]\n";
}

// A record's stamp: anything but a string is as good as none (one re-hash
// on the next lookup, then a stamp), never a malformed entry.
std::string recorded_stat(const nlohmann::json& record) {
  auto it = record.find("stat");
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

nlohmann::json entry_to_json(const EntryRecord& e) {
  nlohmann::json artifacts = nlohmann::json::array();
  for (const auto& a : e.artifacts) {
    nlohmann::json j = {{"file", a.file}, {"size", a.size}, {"sha256", a.sha256}};
    if (!a.stat.empty()) j["stat"] = a.stat;
    artifacts.push_back(std::move(j));
  }
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& h : e.headers) headers.push_back(header_to_json(h));
  nlohmann::json objects = nlohmann::json::array();
  for (const auto& o : e.objects) objects.push_back({{"key", o.key}, {"sha256", o.sha256}});
  nlohmann::json j = {{"format_version", e.format_version},
          {"kind", e.kind},
          {"name", e.name},
          {"key", e.key},
          {"tool_version", e.tool_version},
          {"created", e.created},
          {"artifacts", artifacts},
          {"headers", headers},
          {"objects", objects},
          {"inputs", e.inputs},
          {"compiler_output", bounded_compiler_output(e.compiler_output)}};
  if (!e.portable_key.empty()) {
    j["portable_key"] = e.portable_key;
    j["base_dir"] = e.base_dir;
  }
  if (!e.provenance.is_null()) j["provenance"] = e.provenance;
  return j;
}

Expected<EntryRecord> checked_entry(EntryRecord raw) {
  auto fail = [](std::string w) -> Expected<EntryRecord> { return Unexpected{std::move(w)}; };
  if (raw.format_version != kCacheFormatVersion)
    return fail("entry format " + std::to_string(raw.format_version) + " (this tool reads " +
                std::to_string(kCacheFormatVersion) + ")");
  if (raw.kind != "module" && raw.kind != "object") return fail("unknown entry kind '" + raw.kind + "'");
  if (!is_hex(raw.key, 64)) return fail("malformed key");
  if (!raw.portable_key.empty() && !is_hex(raw.portable_key, 64)) return fail("malformed portable key");
  for (const auto& r : raw.artifacts) {
    // Artifact names are joined onto the entry directory: no separators, no dot files.
    if (!is_valid_file_name(r.file)) return fail("artifact name '" + r.file + "' is not a plain file name");
    if (!is_hex(r.sha256, 64)) return fail("malformed artifact hash for " + r.file);
  }
  if (raw.artifacts.empty()) return fail("entry lists no artifact");
  std::vector<HeaderRecord> headers = std::move(raw.headers);
  raw.headers.clear();
  raw.headers.reserve(headers.size());  // never reallocated below: the index's keys view its paths
  std::unordered_map<std::string_view, size_t> header_index;  // path -> position in raw.headers
  header_index.reserve(headers.size());
  uint64_t header_bytes = 0;
  for (auto& r : headers) {
    if (r.path.empty() || r.path[0] != '/') return fail("header path '" + r.path + "' is not absolute");
    if (!is_normal_absolute_path(r.path))
      return fail("header path '" + r.path + "' is not a normal absolute path (a '.' or '..' component)");
    for (const auto& p : r.shadows)
      if (!is_normal_absolute_path(p))
        return fail("shadow path '" + p + "' of header " + r.path + " is not a normal absolute path");
    auto it = header_index.find(r.path);
    if (it != header_index.end()) {
      const HeaderRecord& first = raw.headers[it->second];
      if (first.size != r.size || first.sha256 != r.sha256)
        return fail("header " + r.path + " is recorded twice with different contents");
      // The same file again: hashing it once proves it; its shadows still count.
      std::vector<std::string>& shadows = raw.headers[it->second].shadows;
      for (auto& p : r.shadows)
        if (std::find(shadows.begin(), shadows.end(), p) == shadows.end()) shadows.push_back(std::move(p));
      continue;
    }
    header_bytes += r.size;
    if (r.size > kMaxRecordedHeaderBytes || header_bytes > kMaxRecordedHeaderBytes)
      return fail("the recorded headers add up to more than " + std::to_string(kMaxRecordedHeaderBytes >> 20) +
                  " MiB");
    raw.headers.push_back(std::move(r));
    header_index.emplace(raw.headers.back().path, raw.headers.size() - 1);
  }
  for (const auto& r : raw.objects)
    if (!is_hex(r.key, 64) || !is_hex(r.sha256, 64)) return fail("malformed object record");
  if (!raw.provenance.is_null() && !raw.provenance.is_object()) return fail("malformed provenance record");
  return raw;
}

Expected<EntryRecord> entry_from_json(const nlohmann::json& j) {
  auto fail = [](std::string w) -> Expected<EntryRecord> { return Unexpected{std::move(w)}; };
  if (!j.is_object()) return fail("entry.json is not a JSON object");
  try {
    EntryRecord e;
    e.format_version = j.at("format_version").get<int>();
    if (e.format_version != kCacheFormatVersion) return checked_entry(std::move(e));  // says which format
    e.kind = j.at("kind").get<std::string>();
    e.name = j.at("name").get<std::string>();
    e.key = j.at("key").get<std::string>();
    if (j.contains("portable_key")) {
      e.portable_key = j.at("portable_key").get<std::string>();
      if (e.portable_key.empty()) return fail("malformed portable key");
      e.base_dir = j.at("base_dir").get<std::string>();
    }
    e.tool_version = j.at("tool_version").get<std::string>();
    e.created = j.at("created").get<int64_t>();
    for (const auto& a : j.at("artifacts"))
      e.artifacts.push_back({a.at("file").get<std::string>(), a.at("size").get<uint64_t>(),
                             a.at("sha256").get<std::string>(), recorded_stat(a)});
    for (const auto& h : j.at("headers")) {
      HeaderRecord r;
      if (h.contains("path_hex")) {
        auto bytes = util::hex_decode(h.at("path_hex").get<std::string>());
        if (!bytes) return fail("malformed header path_hex");
        r.path = std::move(*bytes);
      } else {
        r.path = h.at("path").get<std::string>();
      }
      r.size = h.at("size").get<uint64_t>();
      r.sha256 = h.at("sha256").get<std::string>();
      r.stat = recorded_stat(h);
      if (h.contains("shadows")) {
        for (const auto& sh : h.at("shadows")) {
          if (sh.is_object()) {
            auto bytes = util::hex_decode(sh.at("hex").get<std::string>());
            if (!bytes) return fail("malformed shadow hex of header " + r.path);
            r.shadows.push_back(std::move(*bytes));
          } else {
            r.shadows.push_back(sh.get<std::string>());
          }
        }
      }
      e.headers.push_back(std::move(r));
    }
    for (const auto& o : j.at("objects")) e.objects.push_back({o.at("key").get<std::string>(), o.at("sha256").get<std::string>()});
    if (j.contains("inputs")) e.inputs = j.at("inputs");
    if (j.contains("compiler_output")) e.compiler_output = j.at("compiler_output").get<std::string>();
    if (j.contains("provenance")) {
      if (!j.at("provenance").is_object()) return fail("malformed provenance record");
      e.provenance = j.at("provenance");
    }
    return checked_entry(std::move(e));
  } catch (const nlohmann::json::exception& ex) {
    return fail(std::string("malformed entry.json: ") + ex.what());
  }
}

Expected<nlohmann::json> read_entry_json(const std::string& dir) {
  auto text = util::read_small_file(util::join_path(dir, kEntryFileName), kMaxEntryFileBytes);
  if (!text) return Unexpected{"entry.json: " + text.why()};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Unexpected{"entry.json is not valid JSON"};
  return j;
}

namespace {

// The engine library serves many hits per process, and parsing entry.json
// (hundreds of recorded headers) was most of a hit's CPU time. No settle
// time: entry.json is only ever replaced by rename, and a record memoised
// under a reused stamp would still be checked on every lookup (its key, its
// artifacts' sizes, each recorded header), so at worst it misses.
util::StampMemo<SharedEntry>& entry_memo() {
  static util::StampMemo<SharedEntry>* memo = new util::StampMemo<SharedEntry>(64, 0, false);  // used until exit
  return *memo;
}

}  // namespace

void remember_entry(const std::string& dir, const util::FullStamp& stamp, const EntryRecord& record) {
  entry_memo().put(util::join_path(dir, kEntryFileName), stamp, std::make_shared<const EntryRecord>(record));
}

namespace {

// entry.bin's record when it was derived from entry.json at `of` (cache/store/entry_bin.h).
std::optional<EntryRecord> read_entry_bin(const std::string& dir, const util::FullStamp& of) {
  auto bytes = util::read_small_file(util::join_path(dir, kEntryBinFileName), kMaxEntryFileBytes);
  if (!bytes) return std::nullopt;
  auto raw = entry_from_bin(*bytes, of);
  if (!raw) return std::nullopt;
  auto checked = checked_entry(std::move(*raw));
  if (!checked) return std::nullopt;
  return std::move(*checked);
}

// Writes entry.bin for `record`, parsed from entry.json at `of`, when that
// stamp had settled and entry.json still has it; quietly nothing where the
// root is read-only.
void write_entry_bin(const std::string& dir, const EntryRecord& record, const util::FullStamp& of) {
  if (!util::stamp_is_settled(of)) return;
  auto now = util::full_stamp(util::join_path(dir, kEntryFileName), false);
  if (!now || !(*now == of)) return;
  try {
    util::write_file_atomic(util::join_path(dir, kEntryBinFileName), entry_bin_bytes(record, of), 0600);
  } catch (const Error& e) {
    spdlog::debug("cache: no {} in {}: {}", kEntryBinFileName, dir, e.what());
  }
}

}  // namespace

Expected<SharedEntry> read_entry(const std::string& dir, util::FullStamp* stamp) {
  util::FullStamp taken;  // entry.json's, before it is read (get_or takes it first)
  auto entry = entry_memo().get_or(util::join_path(dir, kEntryFileName), [&]() -> Expected<SharedEntry> {
    if (taken.inode != 0)
      if (auto bin = read_entry_bin(dir, taken)) return std::make_shared<const EntryRecord>(std::move(*bin));
    auto j = read_entry_json(dir);
    if (!j) return Unexpected{j.why()};
    auto record = entry_from_json(*j);
    if (!record) return Unexpected{record.why()};
    if (taken.inode != 0) write_entry_bin(dir, *record, taken);
    return std::make_shared<const EntryRecord>(std::move(*record));
  }, &taken);
  if (stamp) *stamp = taken;
  return entry;
}

std::string entry_file_text(const EntryRecord& e) {
  // Whatever is written must read back (entry_from_json's header rules).
  uint64_t header_bytes = 0;
  for (const auto& h : e.headers) header_bytes += h.size;
  if (header_bytes > kMaxRecordedHeaderBytes)
    throw io_error("the headers " + e.name + " read add up to " + std::to_string(header_bytes >> 20) +
                   " MiB, more than the " + std::to_string(kMaxRecordedHeaderBytes >> 20) +
                   " MiB an entry may record");
  std::string text = util::dump_json(entry_to_json(e), 2) + "\n";
  if (text.size() > kMaxEntryFileBytes)
    throw io_error("entry.json for " + e.name + " would have " + std::to_string(text.size()) +
                   " bytes, more than the " + std::to_string(kMaxEntryFileBytes) + " a reader accepts (" +
                   std::to_string(e.headers.size()) + " recorded headers)");
  return text;
}

}  // namespace tvmffi_jit::cache
