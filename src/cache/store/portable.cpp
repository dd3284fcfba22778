#include "tvmffi_jit/cache/portable.h"

#include <cctype>
#include <cstdlib>
#include <functional>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

// "<prefix>/rest" or exactly "<prefix>" -> the rest ("" or "/rest").
bool strip_dir_prefix(const std::string& s, const std::string& prefix, std::string* rest) {
  if (prefix.empty() || !util::starts_with(s, prefix)) return false;
  if (s.size() == prefix.size()) {
    *rest = "";
    return true;
  }
  if (s[prefix.size()] != '/') return false;
  *rest = s.substr(prefix.size());
  return true;
}

// The string entries of a header record's "shadows" (those stored as
// {"hex": ...}, not UTF-8, stay as they are: absolute).
std::vector<std::reference_wrapper<nlohmann::json>> shadow_paths(nlohmann::json& header) {
  std::vector<std::reference_wrapper<nlohmann::json>> out;
  if (!header.contains("shadows")) return out;
  nlohmann::json& shadows = header["shadows"];
  if (!shadows.is_array()) throw io_error("malformed header record: \"shadows\" is not a list");
  for (auto& s : shadows)
    if (s.is_string()) out.push_back(s);
  return out;
}

}  // namespace

BaseDir::BaseDir(const std::string& base) {
  if (base.empty()) return;
  base_ = util::absolute_path(base);
  while (base_.size() > 1 && base_.back() == '/') base_.pop_back();
  if (base_ == "/") {  // everything would be "under" it: rewriting "/" means nothing
    base_.clear();
    return;
  }
  char* real = ::realpath(base_.c_str(), nullptr);
  if (real) {
    if (base_ != real) canonical_ = real;
    std::free(real);
  }
}

std::string BaseDir::portable_path(const std::string& path) const {
  std::string rest;
  if (strip_dir_prefix(path, base_, &rest) || strip_dir_prefix(path, canonical_, &rest)) return kBaseMarker + rest;
  return path;
}

std::string BaseDir::relative_header(const std::string& absolute) const {
  std::string rest;
  if ((strip_dir_prefix(absolute, base_, &rest) || strip_dir_prefix(absolute, canonical_, &rest)) && rest.size() > 1)
    return rest.substr(1);
  return absolute;
}

std::string BaseDir::absolute_header(const std::string& recorded) const {
  if (!recorded.empty() && recorded[0] == '/') return recorded;
  return util::join_path(base_.empty() ? "/" : base_, recorded);
}

std::string local_key_hex(const std::string& portable_hex, const std::string& base_dir) {
  util::KeyHasher h;
  h.field("kind", "local");
  h.field("portable_key", portable_hex);
  h.field("base_dir", base_dir);
  return h.hex_digest();
}

nlohmann::json entry_to_portable(const nlohmann::json& local_entry) {
  if (!local_entry.is_object() || !local_entry.contains("portable_key") || !local_entry["portable_key"].is_string())
    throw io_error("the entry has no portable key (made by an older tvmffi-jit, or an object entry): rebuild it");
  nlohmann::json p = local_entry;
  BaseDir base(local_entry.value("base_dir", std::string()));
  p["key"] = local_entry["portable_key"];
  p.erase("base_dir");
  if (p.contains("artifacts") && p["artifacts"].is_array())
    for (auto& a : p["artifacts"])
      if (a.is_object()) a.erase("stat");  // stamps are machine-local (cache/proof.h)
  p.erase("provenance");  // local: the reader records its own (cache/trust.h)
  if (p.contains("headers") && p["headers"].is_array()) {
    for (auto& h : p["headers"]) {
      if (!h.is_object() || !h.contains("path") || !h["path"].is_string()) throw io_error("malformed header record");
      h["path"] = base.relative_header(h["path"].get<std::string>());
      h.erase("stat");  // device and inode numbers mean nothing on another machine
      // A shadow under the base is checked under the reader's base: a new
      // inc1/h.h in that checkout hides the recorded inc2/h.h there too.
      for (nlohmann::json& s : shadow_paths(h)) s = base.relative_header(s.get<std::string>());
    }
  }
  return p;
}

nlohmann::json entry_from_portable(const nlohmann::json& portable_entry, const BaseDir& base) {
  if (!portable_entry.is_object() || !portable_entry.contains("portable_key") ||
      !portable_entry["portable_key"].is_string())
    throw io_error("the entry has no portable key");
  nlohmann::json l = portable_entry;
  std::string portable = portable_entry["portable_key"].get<std::string>();
  l["key"] = local_key_hex(portable, base.path());
  l["base_dir"] = base.path();
  l.erase("provenance");  // whatever a writer claimed: the adopter records where it came from
  if (l.contains("headers") && l["headers"].is_array()) {
    for (auto& h : l["headers"]) {
      if (!h.is_object() || !h.contains("path") || !h["path"].is_string()) throw io_error("malformed header record");
      h["path"] = base.absolute_header(h["path"].get<std::string>());
      for (nlohmann::json& s : shadow_paths(h)) s = base.absolute_header(s.get<std::string>());
    }
  }
  return l;
}

}  // namespace tvmffi_jit::cache
