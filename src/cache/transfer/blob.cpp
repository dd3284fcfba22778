#include "tvmffi_jit/cache/transfer/blob.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "cache/transfer/zstd_stream.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kRecord = 10240;  // tar pads archives to whole records
constexpr size_t kChunk = 128 * 1024;
constexpr uint64_t kMaxTarSize = 077777777777ull;  // 11 octal digits

[[noreturn]] void bad(const std::string& why) { throw io_error("corrupt blob: " + why); }

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// ---- tar headers -----------------------------------------------------------

void put_octal(char* field, size_t width, uint64_t value) {
  // width-1 digits and a NUL, as GNU tar writes them.
  for (size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  field[width - 1] = '\0';
}

unsigned header_checksum(const char* h) {
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  return sum;
}

void make_header(char* h, const std::string& dir, const std::string& name, uint64_t size) {
  std::memset(h, 0, kBlock);
  if (name.size() > 100) throw io_error("cannot pack " + name + ": file names in a blob are limited to 100 bytes");
  if (dir.size() > 155) throw io_error("cannot pack " + dir + ": entry names in a blob are limited to 155 bytes");
  if (size > kMaxTarSize) throw io_error("cannot pack " + name + ": larger than 8 GiB");
  std::memcpy(h, name.data(), name.size());
  std::memcpy(h + 100, "0000644", 8);
  std::memcpy(h + 108, "0000000", 8);
  std::memcpy(h + 116, "0000000", 8);
  put_octal(h + 124, 12, size);
  put_octal(h + 136, 12, 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 345, dir.data(), dir.size());
  unsigned sum = header_checksum(h);
  put_octal(h + 148, 7, sum);
  h[155] = ' ';
}

std::string field_string(const char* f, size_t width) {
  size_t n = 0;
  while (n < width && f[n] != '\0') ++n;
  return std::string(f, n);
}

bool parse_octal(const char* f, size_t width, uint64_t* out) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && f[i] == ' ') ++i;
  size_t digits = 0;
  for (; i < width && f[i] >= '0' && f[i] <= '7'; ++i, ++digits) {
    if (digits >= 11) return false;
    v = (v << 3) | static_cast<uint64_t>(f[i] - '0');
  }
  if (digits == 0) return false;
  for (; i < width; ++i)
    if (f[i] != '\0' && f[i] != ' ') return false;
  *out = v;
  return true;
}

nlohmann::json manifest_json(const std::vector<BlobEntry>& entries) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : e.files) files.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
    nlohmann::json je = {{"dir", e.dir}, {"key", e.key}, {"files", files}};
    if (!e.signatures.empty()) {
      nlohmann::json sigs = nlohmann::json::array();
      for (const auto& s : e.signatures) sigs.push_back({{"signer", s.signer}, {"ed25519", util::base64_encode(s.signature)}});
      je["signatures"] = sigs;
    }
    arr.push_back(std::move(je));
  }
  return {{"format", "tvmffi-jit-blob"}, {"version", kBlobVersion}, {"entries", arr}};
}

// The artifact names an entry.json lists (what else its blob entry may
// carry). Its content is checked in full later, by whoever adopts the entry.
std::set<std::string> listed_artifacts(const std::string& entry_json, const std::string& where) {
  auto j = nlohmann::json::parse(entry_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad(where + "/entry.json is not a JSON object");
  std::set<std::string> names;
  auto it = j.find("artifacts");
  if (it == j.end() || !it->is_array()) bad(where + "/entry.json lists no artifacts");
  for (const auto& a : *it) {
    if (!a.is_object() || !a.contains("file") || !a["file"].is_string())
      bad(where + "/entry.json has a malformed artifact record");
    names.insert(a["file"].get<std::string>());
  }
  return names;
}

// Streams one file on disk through `each`; returns its size.
uint64_t stream_file(const std::string& path, const std::function<void(const char*, size_t)>& each) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw io_error(errno_message("cannot read " + path, errno));
  std::vector<char> buf(kChunk);
  uint64_t total = 0;
  for (;;) {
    auto n = util::read_some(fd, buf.data(), buf.size());
    if (!n) {
      ::close(fd);
      throw io_error("cannot read " + path + ": " + n.why());
    }
    if (*n == 0) break;
    each(buf.data(), *n);
    total += *n;
  }
  ::close(fd);
  return total;
}

}  // namespace

BlobManifest parse_blob_manifest(std::string_view text, const BlobLimits& limits) {
  if (text.size() > limits.max_manifest_bytes) bad("the manifest is larger than " + std::to_string(limits.max_manifest_bytes) + " bytes");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad("the manifest is not a JSON object");
  BlobManifest m;
  try {
    if (j.at("format").get<std::string>() != "tvmffi-jit-blob") bad("not a tvmffi-jit blob");
    int version = j.at("version").get<int>();
    if (version != kBlobVersion)
      bad("blob version " + std::to_string(version) + " (this tool reads " + std::to_string(kBlobVersion) + ")");
    const auto& entries = j.at("entries");
    if (!entries.is_array() || entries.empty()) bad("the manifest lists no entry");
    if (entries.size() > limits.max_entries)
      bad("the manifest lists " + std::to_string(entries.size()) + " entries (at most " +
          std::to_string(limits.max_entries) + " expected)");
    uint64_t total = 0;
    std::set<std::string> dirs;
    for (const auto& je : entries) {
      BlobEntry e;
      e.dir = je.at("dir").get<std::string>();
      e.key = je.at("key").get<std::string>();
      if (!is_valid_entry_name(e.dir)) bad("entry name '" + e.dir.substr(0, 200) + "' is not a plain cache name");
      if (!dirs.insert(e.dir).second) bad("entry " + e.dir + " appears twice");
      if (!is_hex64(e.key)) bad("entry " + e.dir + " has a malformed key");
      const auto& files = je.at("files");
      if (!files.is_array() || files.size() > limits.max_files_per_entry)
        bad("entry " + e.dir + " lists too many files");
      std::set<std::string> names;
      for (const auto& jf : files) {
        BlobFile f;
        f.name = jf.at("name").get<std::string>();
        f.size = jf.at("size").get<uint64_t>();
        f.sha256 = jf.at("sha256").get<std::string>();
        if (!is_valid_file_name(f.name)) bad("file name '" + f.name.substr(0, 200) + "' is not a plain cache name");
        if (!names.insert(f.name).second) bad("file " + f.name + " appears twice in " + e.dir);
        if (!is_hex64(f.sha256)) bad("file " + f.name + " has a malformed SHA-256");
        if (f.size > limits.max_total_bytes || total + f.size > limits.max_total_bytes)
          bad("the files claim more than " + std::to_string(limits.max_total_bytes) + " bytes");
        total += f.size;
        e.files.push_back(std::move(f));
      }
      if (!names.count(kEntryFileName)) bad("entry " + e.dir + " has no entry.json");
      // First, so that the files it does not list are refused unread.
      if (e.files.front().name != kEntryFileName) bad("entry " + e.dir + " does not start with its entry.json");
      if (e.files.front().size > kMaxEntryFileBytes)
        bad("the entry.json of " + e.dir + " claims " + std::to_string(e.files.front().size) + " bytes (at most " +
            std::to_string(kMaxEntryFileBytes) + ")");
      if (je.contains("signatures")) {
        const auto& sigs = je.at("signatures");
        if (!sigs.is_array() || sigs.size() > kMaxBlobSignatures)
          bad("entry " + e.dir + " carries more than " + std::to_string(kMaxBlobSignatures) + " signatures");
        for (const auto& js : sigs) {
          BlobSignature sig;
          sig.signer = js.at("signer").get<std::string>();
          if (!is_valid_entry_name(sig.signer)) bad("a signer name of " + e.dir + " is not a plain name");
          auto raw = util::base64_decode(js.at("ed25519").get<std::string>());
          if (!raw || raw->size() != kEd25519SignatureBytes) bad("a signature of " + e.dir + " is malformed");
          sig.signature = std::move(*raw);
          e.signatures.push_back(std::move(sig));
        }
      }
      m.entries.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& ex) {
    bad(std::string("malformed manifest: ") + ex.what());
  }
  return m;
}

std::string blob_entry_digest(const BlobEntry& entry) {
  util::KeyHasher h;
  h.field("format", "tvmffi-jit blob entry 1");
  h.field("dir", entry.dir);
  h.field("key", entry.key);
  h.field("files", std::to_string(entry.files.size()));
  for (const auto& f : entry.files) {
    h.field("name", f.name);
    h.field("size", std::to_string(f.size));
    h.field("sha256", f.sha256);
  }
  return h.hex_digest();
}

std::string blob_manifest_text(const BlobManifest& manifest) { return manifest_json(manifest.entries).dump(1) + "\n"; }

void write_blob(const std::vector<BlobPackEntry>& entries, const BlobSink& sink, int zstd_level,
                const BlobSigner& signer) {
  // The manifest comes first, so every file is hashed before any is packed.
  std::vector<BlobEntry> described;
  for (const auto& pe : entries) {
    BlobEntry e{pe.dir, pe.key, {}, {}};
    for (const auto& pf : pe.files) {
      BlobFile f;
      f.name = pf.name;
      if (pf.content) {
        f.size = pf.content->size();
        f.sha256 = util::sha256_hex(*pf.content);
      } else {
        util::Sha256 sha;
        f.size = stream_file(pf.path, [&](const char* d, size_t n) { sha.update(d, n); });
        f.sha256 = sha.hex_digest();
      }
      e.files.push_back(std::move(f));
    }
    if (e.files.empty() || e.files.front().name != kEntryFileName)
      throw io_error("cannot pack " + pe.dir + ": its entry.json must come first");
    if (signer) e.signatures.push_back(signer(e));
    described.push_back(std::move(e));
  }
  ZstdCompressor z(sink, zstd_level);
  uint64_t written = 0;
  char header[kBlock];
  static const char zeros[kRecord] = {};
  auto member = [&](const std::string& dir, const std::string& name, uint64_t size,
                    const std::function<uint64_t()>& write_data) {
    make_header(header, dir, name, size);
    z.write(header, kBlock);
    uint64_t n = write_data();
    if (n != size) throw io_error("cannot pack " + dir + "/" + name + ": it changed while being packed");
    size_t pad = static_cast<size_t>((kBlock - size % kBlock) % kBlock);
    z.write(zeros, pad);
    written += kBlock + size + pad;
  };
  std::string manifest = manifest_json(described).dump(1) + "\n";
  member("", kBlobManifestName, manifest.size(), [&] {
    z.write(manifest.data(), manifest.size());
    return static_cast<uint64_t>(manifest.size());
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    for (size_t k = 0; k < entries[i].files.size(); ++k) {
      const BlobPackFile& pf = entries[i].files[k];
      const BlobFile& f = described[i].files[k];
      util::Sha256 sha;
      member(entries[i].dir, pf.name, f.size, [&]() -> uint64_t {
        if (pf.content) {
          z.write(pf.content->data(), pf.content->size());
          return pf.content->size();
        }
        return stream_file(pf.path, [&](const char* d, size_t n) {
          sha.update(d, n);
          z.write(d, n);
        });
      });
      if (!pf.content && sha.hex_digest() != f.sha256)
        throw io_error("cannot pack " + pf.path + ": it changed while being packed");
    }
  }
  z.write(zeros, 2 * kBlock);
  written += 2 * kBlock;
  z.write(zeros, static_cast<size_t>((kRecord - written % kRecord) % kRecord));
  z.finish();
}

std::string write_blob_to_string(const std::vector<BlobPackEntry>& entries, int zstd_level,
                                 const BlobSigner& signer) {
  std::string out;
  write_blob(entries, [&](const char* d, size_t n) { out.append(d, n); }, zstd_level, signer);
  return out;
}

BlobSource blob_source(std::string_view bytes) {
  auto pos = std::make_shared<size_t>(0);
  return [bytes, pos](char* buf, size_t size) -> size_t {
    size_t n = std::min(size, bytes.size() - *pos);
    std::memcpy(buf, bytes.data() + *pos, n);
    *pos += n;
    return n;
  };
}

BlobManifest read_blob(const BlobSource& source, BlobReceiver& receiver, const BlobLimits& limits) {
  ZstdDecompressor z(source);
  char header[kBlock];
  // Reads one member header and checks it names `dir`/`name`; returns its size.
  auto read_header = [&](const std::string& dir, const std::string& name) -> uint64_t {
    std::string what = dir.empty() ? name : dir + "/" + name;
    if (!z.read_exact(header, kBlock)) bad("truncated before " + what);
    uint64_t stored = 0;
    if (!parse_octal(header + 148, 8, &stored) || stored != header_checksum(header))
      bad("the tar header of " + what + " has a bad checksum");
    if (std::memcmp(header + 257, "ustar", 5) != 0) bad("the member before " + what + " is not a ustar header");
    if (header[156] != '0' && header[156] != '\0') bad(what + " is not a regular file in the archive");
    std::string got_name = field_string(header, 100), got_dir = field_string(header + 345, 155);
    if (got_name != name || got_dir != dir)
      bad("expected " + what + ", found " + (got_dir.empty() ? "" : got_dir.substr(0, 160) + "/") + got_name.substr(0, 100));
    uint64_t size = 0;
    if (!parse_octal(header + 124, 12, &size)) bad("the tar header of " + what + " has a malformed size");
    return size;
  };
  auto skip_padding = [&](uint64_t size, const std::string& what) {
    char pad[kBlock];
    size_t n = static_cast<size_t>((kBlock - size % kBlock) % kBlock);
    if (!z.read_exact(pad, n)) bad("truncated in " + what);
  };

  uint64_t manifest_size = read_header("", kBlobManifestName);
  if (manifest_size > limits.max_manifest_bytes)
    bad("the manifest claims " + std::to_string(manifest_size) + " bytes (at most " +
        std::to_string(limits.max_manifest_bytes) + ")");
  std::string text(static_cast<size_t>(manifest_size), '\0');
  if (!z.read_exact(text.data(), text.size())) bad("truncated in the manifest");
  skip_padding(manifest_size, "the manifest");
  BlobManifest m = parse_blob_manifest(text, limits);
  receiver.begin(m);

  std::vector<char> buf(kChunk);
  for (const auto& e : m.entries) {
    std::string entry_json;         // the entry's first file (parse_blob_manifest)
    std::set<std::string> listed;  // the artifacts it lists
    for (const auto& f : e.files) {
      const bool is_entry_json = f.name == kEntryFileName;
      if (!is_entry_json && !listed.count(f.name))
        bad(e.dir + "/" + f.name + " is not an artifact its entry.json lists");
      uint64_t size = read_header(e.dir, f.name);
      if (size != f.size)
        bad(e.dir + "/" + f.name + " has " + std::to_string(size) + " bytes in the archive, the manifest says " +
            std::to_string(f.size));
      receiver.open(e, f);
      util::Sha256 sha;
      uint64_t left = size;
      while (left > 0) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        if (!z.read_exact(buf.data(), n)) bad("truncated in " + e.dir + "/" + f.name);
        sha.update(buf.data(), n);
        if (is_entry_json) entry_json.append(buf.data(), n);
        receiver.write(buf.data(), n);
        left -= n;
      }
      if (sha.hex_digest() != f.sha256) bad(e.dir + "/" + f.name + " does not match its SHA-256");
      skip_padding(size, e.dir + "/" + f.name);
      receiver.close();
      if (is_entry_json) listed = listed_artifacts(entry_json, e.dir);
    }
  }
  // Two zero blocks end the archive; padding to the record may follow.
  char end[2 * kBlock];
  if (!z.read_exact(end, sizeof end)) bad("truncated (no end-of-archive blocks)");
  for (char c : end)
    if (c != 0) bad("a member the manifest does not list follows the last file");
  z.expect_zero_tail(kRecord);
  return m;
}

}  // namespace tvmffi_jit::cache
