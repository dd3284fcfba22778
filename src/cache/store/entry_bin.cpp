#include "cache/store/entry_bin.h"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/json.h"

namespace tvmffi_jit::cache {

namespace {

// Bumped whenever EntryRecord or this layout changes: an older file is then
// simply not used.
constexpr std::string_view kMagic = "tvmffi-jit entry.bin 1\n";

class Writer {
 public:
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Every length and count is checked against what is left before anything
// is allocated: the file is as hostile as any other input.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool at_end() const { return at_ == in_.size(); }
  bool expect(std::string_view bytes) {
    if (!ok_ || in_.size() - at_ < bytes.size() || in_.compare(at_, bytes.size(), bytes) != 0) return ok_ = false;
    at_ += bytes.size();
    return true;
  }
  uint64_t u64() {
    if (!ok_ || in_.size() - at_ < 8) return fail();
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += 8;
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    const uint64_t n = u64();
    if (!ok_ || n > in_.size() - at_) return fail(), std::string();
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  // A count of records each at least `min_bytes` long.
  uint64_t count(uint64_t min_bytes) {
    const uint64_t n = u64();
    if (!ok_ || n > (in_.size() - at_) / min_bytes) return fail();
    return n;
  }

 private:
  uint64_t fail() {
    ok_ = false;
    return 0;
  }
  std::string_view in_;
  size_t at_ = 0;
  bool ok_ = true;
};

void write_stamp(Writer& w, const util::FullStamp& s) {
  w.u64(s.device);
  w.u64(s.inode);
  w.u64(s.size);
  w.i64(s.mtime_ns);
  w.i64(s.ctime_ns);
}

}  // namespace

std::string entry_bin_bytes(const EntryRecord& e, const util::FullStamp& of) {
  Writer w;
  w.str(kMagic);
  write_stamp(w, of);
  w.i64(e.format_version);
  for (const std::string* s : {&e.kind, &e.name, &e.key, &e.portable_key, &e.base_dir, &e.tool_version}) w.str(*s);
  w.i64(e.created);
  w.u64(e.artifacts.size());
  for (const auto& a : e.artifacts) {
    w.str(a.file);
    w.u64(a.size);
    w.str(a.sha256);
    w.str(a.stat);
  }
  w.u64(e.headers.size());
  for (const auto& h : e.headers) {
    w.str(h.path);
    w.u64(h.size);
    w.str(h.sha256);
    w.str(h.stat);
    w.u64(h.shadows.size());
    for (const auto& s : h.shadows) w.str(s);
  }
  w.u64(e.objects.size());
  for (const auto& o : e.objects) {
    w.str(o.key);
    w.str(o.sha256);
  }
  // Small, and read as JSON: compact text.
  w.str(util::dump_json(e.inputs));
  w.str(e.compiler_output);
  w.str(e.provenance.is_null() ? std::string() : util::dump_json(e.provenance));
  return w.take();
}

std::optional<EntryRecord> entry_from_bin(std::string_view bytes, const util::FullStamp& of) {
  Reader r(bytes);
  if (r.str() != kMagic) return std::nullopt;
  util::FullStamp from;
  from.device = r.u64();
  from.inode = r.u64();
  from.size = r.u64();
  from.mtime_ns = r.i64();
  from.ctime_ns = r.i64();
  if (!r.ok() || !(from == of)) return std::nullopt;
  EntryRecord e;
  const int64_t format_version = r.i64();
  if (format_version != kCacheFormatVersion) return std::nullopt;
  e.format_version = static_cast<int>(format_version);
  for (std::string* s : {&e.kind, &e.name, &e.key, &e.portable_key, &e.base_dir, &e.tool_version}) *s = r.str();
  e.created = r.i64();
  constexpr uint64_t kLength = 8;  // the smallest field: a length or a number
  for (uint64_t n = r.count(4 * kLength); r.ok() && n > 0; --n) {
    ArtifactRecord a;
    a.file = r.str();
    a.size = r.u64();
    a.sha256 = r.str();
    a.stat = r.str();
    e.artifacts.push_back(std::move(a));
  }
  for (uint64_t n = r.count(5 * kLength); r.ok() && n > 0; --n) {
    HeaderRecord h;
    h.path = r.str();
    h.size = r.u64();
    h.sha256 = r.str();
    h.stat = r.str();
    for (uint64_t k = r.count(kLength); r.ok() && k > 0; --k) h.shadows.push_back(r.str());
    e.headers.push_back(std::move(h));
  }
  for (uint64_t n = r.count(2 * kLength); r.ok() && n > 0; --n) {
    ObjectRecord o;
    o.key = r.str();
    o.sha256 = r.str();
    e.objects.push_back(std::move(o));
  }
  const std::string inputs = r.str();
  e.compiler_output = r.str();
  const std::string provenance = r.str();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  e.inputs = nlohmann::json::parse(inputs, nullptr, false);
  if (e.inputs.is_discarded()) return std::nullopt;
  if (!provenance.empty()) {
    e.provenance = nlohmann::json::parse(provenance, nullptr, false);
    if (e.provenance.is_discarded()) return std::nullopt;
  }
  return e;
}

}  // namespace tvmffi_jit::cache
