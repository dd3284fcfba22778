#include "tvmffi_jit/cache/entry.h"

#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::cache {

namespace {

bool is_hex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

nlohmann::json entry_to_json(const EntryRecord& e) {
  nlohmann::json artifacts = nlohmann::json::array();
  for (const auto& a : e.artifacts) artifacts.push_back({{"file", a.file}, {"size", a.size}, {"sha256", a.sha256}});
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& h : e.headers) headers.push_back({{"path", h.path}, {"size", h.size}, {"sha256", h.sha256}});
  nlohmann::json j = {{"format_version", e.format_version},
                      {"kind", e.kind},
                      {"name", e.name},
                      {"key", e.key},
                      {"tool_version", e.tool_version},
                      {"created", e.created},
                      {"artifacts", artifacts},
                      {"headers", headers},
                      {"inputs", e.inputs},
                      {"compiler_output", e.compiler_output}};
  if (!e.portable_key.empty()) {
    j["portable_key"] = e.portable_key;
    j["base_dir"] = e.base_dir;
  }
  return j;
}

std::optional<EntryRecord> entry_from_json(const nlohmann::json& j, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<EntryRecord> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (!j.is_object()) return fail("entry.json is not a JSON object");
  try {
    EntryRecord e;
    e.format_version = j.at("format_version").get<int>();
    if (e.format_version != kCacheFormatVersion)
      return fail("entry format " + std::to_string(e.format_version) + " (this tool reads " +
                  std::to_string(kCacheFormatVersion) + ")");
    e.kind = j.at("kind").get<std::string>();
    if (e.kind != "module" && e.kind != "object") return fail("unknown entry kind '" + e.kind + "'");
    e.name = j.at("name").get<std::string>();
    e.key = j.at("key").get<std::string>();
    if (!is_hex(e.key, 64)) return fail("malformed key");
    if (j.contains("portable_key")) {
      e.portable_key = j.at("portable_key").get<std::string>();
      if (!is_hex(e.portable_key, 64)) return fail("malformed portable key");
      e.base_dir = j.at("base_dir").get<std::string>();
    }
    e.tool_version = j.at("tool_version").get<std::string>();
    e.created = j.at("created").get<int64_t>();
    for (const auto& a : j.at("artifacts")) {
      ArtifactRecord r{a.at("file").get<std::string>(), a.at("size").get<uint64_t>(), a.at("sha256").get<std::string>()};
      // Artifact names are joined onto the entry directory: no separators, no dot files.
      if (!is_valid_entry_name(r.file)) return fail("artifact name '" + r.file + "' is not a plain file name");
      if (!is_hex(r.sha256, 64)) return fail("malformed artifact hash for " + r.file);
      e.artifacts.push_back(std::move(r));
    }
    if (e.artifacts.empty()) return fail("entry lists no artifact");
    for (const auto& h : j.at("headers")) {
      HeaderRecord r{h.at("path").get<std::string>(), h.at("size").get<uint64_t>(), h.at("sha256").get<std::string>()};
      if (r.path.empty() || r.path[0] != '/') return fail("header path '" + r.path + "' is not absolute");
      e.headers.push_back(std::move(r));
    }
    if (j.contains("inputs")) e.inputs = j.at("inputs");
    if (j.contains("compiler_output")) e.compiler_output = j.at("compiler_output").get<std::string>();
    return e;
  } catch (const nlohmann::json::exception& ex) {
    return fail(std::string("malformed entry.json: ") + ex.what());
  }
}

std::optional<EntryRecord> read_entry(const std::string& dir, std::string* why) {
  auto text = util::try_read_file(util::join_path(dir, kEntryFileName));
  if (!text) {
    if (why) *why = "no entry.json";
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    if (why) *why = "entry.json is not valid JSON";
    return std::nullopt;
  }
  return entry_from_json(j, why);
}

}  // namespace tvmffi_jit::cache
