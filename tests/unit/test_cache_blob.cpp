#include <catch2/catch.hpp>

#include <zstd.h>

#include <map>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

const std::string kKey(64, 'c');

// Collects every received file in memory.
struct MemoryReceiver : BlobReceiver {
  std::map<std::string, std::string> files;
  std::string current;
  void open(const BlobEntry& e, const BlobFile& f) override { current = e.dir + "/" + f.name; files[current]; }
  void write(const char* d, size_t n) override { files[current].append(d, n); }
  void close() override {}
};

std::string entry_json() {
  return "{\"format_version\": 2, \"name\": \"m\", \"artifacts\": [{\"file\": \"m.so\"}]}\n";
}

std::string sample_blob(const std::string& artifact, int level = 3) {
  BlobPackEntry e{"m_" + kKey.substr(0, 16), kKey, {}};
  e.files.push_back({"entry.json", "", entry_json()});
  e.files.push_back({"m.so", "", artifact});
  return write_blob_to_string({e}, level);
}

std::string decompress(const std::string& z) {
  unsigned long long known = ZSTD_getFrameContentSize(z.data(), z.size());
  // Streamed frames do not record their size.
  std::string out(known == ZSTD_CONTENTSIZE_UNKNOWN || known == ZSTD_CONTENTSIZE_ERROR ? 16u << 20 : known, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), z.data(), z.size());
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string compress(const std::string& raw) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string read_error(const std::string& blob, BlobLimits limits = {}) {
  MemoryReceiver rx;
  try {
    read_blob(blob_source(blob), rx, limits);
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    return e.what();
  }
  return "";
}

// Rewrites a tar's octal field in place and fixes the header checksum.
void set_octal(std::string& tar, size_t header, size_t field, size_t width, uint64_t v) {
  for (size_t i = width - 1; i-- > 0;) {
    tar[header + field + i] = static_cast<char>('0' + (v & 7));
    v >>= 3;
  }
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(tar[header + i]);
  for (size_t i = 6; i-- > 0;) {
    tar[header + 148 + i] = static_cast<char>('0' + (sum & 7));
    sum >>= 3;
  }
}

}  // namespace

TEST_CASE("a blob round-trips every file with its name and bytes", "[cache][blob]") {
  std::string artifact(300000, '\0');
  for (size_t i = 0; i < artifact.size(); ++i) artifact[i] = static_cast<char>(i * 7919 % 251);
  std::string blob = sample_blob(artifact);
  MemoryReceiver rx;
  BlobManifest m = read_blob(blob_source(blob), rx, {});
  REQUIRE(m.entries.size() == 1);
  CHECK(m.entries[0].key == kKey);
  CHECK(m.entries[0].files[1].sha256 == util::sha256_hex(artifact));
  CHECK(rx.files.at("m_cccccccccccccccc/m.so") == artifact);
  CHECK(rx.files.at("m_cccccccccccccccc/entry.json") == entry_json());
}

TEST_CASE("a blob is a plain ustar archive that tar can list", "[cache][blob]") {
  std::string tar = decompress(sample_blob("abc"));
  CHECK(tar.size() % 10240 == 0);
  CHECK(tar.compare(0, std::string(kBlobManifestName).size(), kBlobManifestName) == 0);
  CHECK(tar.compare(257, 5, "ustar") == 0);
}

TEST_CASE("a truncated blob is refused at every length", "[cache][blob]") {
  std::string blob = sample_blob(std::string(5000, 'x'));
  for (size_t n = 0; n < blob.size(); n += std::max<size_t>(1, blob.size() / 97)) {
    INFO("length " << n);
    CHECK(read_error(blob.substr(0, n)) != "");
  }
}

TEST_CASE("one flipped byte anywhere in the archive is refused", "[cache][blob]") {
  std::string tar = decompress(sample_blob(std::string(3000, 'y')));
  // Skip the trailing zero padding: a flip there is data after the end, refused too, but slowly to show.
  for (size_t at : {size_t(0), size_t(100), size_t(150), size_t(600), size_t(1100), size_t(2100), size_t(3000)}) {
    std::string bad = tar;
    bad[at] ^= 0x20;
    INFO("byte " << at);
    CHECK(read_error(compress(bad)) != "");
  }
  std::string last = tar;
  last[last.size() - 1] = 1;  // in the record padding after the end blocks
  CHECK(read_error(compress(last)).find("after the end") != std::string::npos);
}

TEST_CASE("a file that does not match its SHA-256 is refused", "[cache][blob]") {
  std::string tar = decompress(sample_blob("0123456789"));
  size_t at = tar.find("0123456789");
  REQUIRE(at != std::string::npos);
  tar[at] = 'X';
  CHECK(read_error(compress(tar)).find("does not match its SHA-256") != std::string::npos);
}

TEST_CASE("oversized claims are refused before any data is read", "[cache][blob]") {
  BlobLimits small;
  small.max_total_bytes = 1000;
  CHECK(read_error(sample_blob(std::string(2000, 'z')), small).find("claim more than") != std::string::npos);
  small = {};
  small.max_manifest_bytes = 64;
  CHECK(read_error(sample_blob("q"), small).find("manifest") != std::string::npos);
  // A tar size field larger than the manifest's claim.
  std::string tar = decompress(sample_blob("abc"));
  size_t manifest_size = std::stoul(tar.substr(124, 11), nullptr, 8);
  size_t second = 512 + (manifest_size + 511) / 512 * 512;
  set_octal(tar, second, 124, 12, 077777777777ull);
  CHECK(read_error(compress(tar)).find("the manifest says") != std::string::npos);
}

TEST_CASE("manifests naming unsafe or duplicate files are refused", "[cache][blob]") {
  auto manifest = [](const std::string& dir, const std::string& file) {
    return std::string("{\"format\":\"tvmffi-jit-blob\",\"version\":1,\"entries\":[{\"dir\":\"") + dir +
           "\",\"key\":\"" + std::string(64, 'a') + "\",\"files\":[{\"name\":\"entry.json\",\"size\":1,\"sha256\":\"" +
           std::string(64, 'b') + "\"},{\"name\":\"" + file + "\",\"size\":1,\"sha256\":\"" + std::string(64, 'b') +
           "\"}]}]}";
  };
  CHECK_NOTHROW(parse_blob_manifest(manifest("m_aaaaaaaaaaaaaaaa", "m.so"), {}));
  CHECK_THROWS_AS(parse_blob_manifest(manifest("../x", "m.so"), {}), Error);
  CHECK_THROWS_AS(parse_blob_manifest(manifest("m_a", "../../etc/passwd"), {}), Error);
  CHECK_THROWS_AS(parse_blob_manifest(manifest("m_a", ".hidden"), {}), Error);
  CHECK_THROWS_AS(parse_blob_manifest(manifest("m_a", "entry.json"), {}), Error);  // twice
  CHECK_THROWS_AS(parse_blob_manifest("[1,2]", {}), Error);
  CHECK_THROWS_AS(parse_blob_manifest("{\"format\":\"tvmffi-jit-blob\",\"version\":2,\"entries\":[]}", {}), Error);
}

TEST_CASE("a blob file its entry.json does not list is refused before its data is read", "[cache][blob]") {
  BlobPackEntry e{"m_" + kKey.substr(0, 16), kKey, {}};
  e.files.push_back({"entry.json", "", entry_json()});
  e.files.push_back({"m.so", "", "module"});
  e.files.push_back({"pad.bin", "", std::string(100000, 'p')});
  MemoryReceiver rx;
  try {
    read_blob(blob_source(write_blob_to_string({e})), rx, {});
    FAIL("a blob with an unlisted file was read");
  } catch (const Error& err) {
    CHECK(std::string(err.what()).find("pad.bin is not an artifact its entry.json lists") != std::string::npos);
  }
  CHECK(rx.files.count("m_cccccccccccccccc/pad.bin") == 0);  // never opened, so never written
}

TEST_CASE("every blob entry starts with its entry.json", "[cache][blob]") {
  BlobPackEntry e{"m_" + kKey.substr(0, 16), kKey, {}};
  e.files.push_back({"m.so", "", "module"});
  e.files.push_back({"entry.json", "", entry_json()});
  CHECK_THROWS_AS(write_blob_to_string({e}), Error);
  const std::string sha(64, 'b');
  std::string manifest = "{\"format\":\"tvmffi-jit-blob\",\"version\":1,\"entries\":[{\"dir\":\"m_a\",\"key\":\"" +
                         std::string(64, 'a') + "\",\"files\":[{\"name\":\"m.so\",\"size\":1,\"sha256\":\"" + sha +
                         "\"},{\"name\":\"entry.json\",\"size\":1,\"sha256\":\"" + sha + "\"}]}]}";
  CHECK_THROWS_WITH(parse_blob_manifest(manifest, {}), Catch::Contains("does not start with its entry.json"));
}

TEST_CASE("signatures travel in the manifest and the entry digest covers every file, not them",
          "[cache][blob]") {
  BlobPackEntry e{"m_" + kKey.substr(0, 16), kKey, {}};
  e.files.push_back({"entry.json", "", entry_json()});
  e.files.push_back({"m.so", "", "module"});
  std::string digest_seen;
  std::string blob = write_blob_to_string({e}, 3, [&](const BlobEntry& be) {
    digest_seen = blob_entry_digest(be);
    return BlobSignature{"ci", std::string(64, '\x5a')};
  });
  MemoryReceiver rx;
  BlobManifest m = read_blob(blob_source(blob), rx, {});
  REQUIRE(m.entries[0].signatures.size() == 1);
  CHECK(m.entries[0].signatures[0].signer == "ci");
  CHECK(m.entries[0].signatures[0].signature == std::string(64, '\x5a'));
  BlobEntry unsigned_copy = m.entries[0];
  unsigned_copy.signatures.clear();
  CHECK(blob_entry_digest(m.entries[0]) == digest_seen);
  CHECK(blob_entry_digest(unsigned_copy) == digest_seen);
  BlobEntry other = m.entries[0];
  other.files[1].sha256[0] = other.files[1].sha256[0] == 'a' ? 'b' : 'a';
  CHECK(blob_entry_digest(other) != digest_seen);
  other = m.entries[0];
  other.files[1].size += 1;
  CHECK(blob_entry_digest(other) != digest_seen);
  // The manifest text a kept import carries reads back with its signature.
  BlobManifest again = parse_blob_manifest(blob_manifest_text(m), {});
  CHECK(again.entries[0].signatures[0].signature == m.entries[0].signatures[0].signature);
}

TEST_CASE("malformed or too many signatures are refused", "[cache][blob]") {
  auto manifest = [](const std::string& sigs) {
    return "{\"format\":\"tvmffi-jit-blob\",\"version\":1,\"entries\":[{\"dir\":\"m_a\",\"key\":\"" +
           std::string(64, 'a') + "\",\"files\":[{\"name\":\"entry.json\",\"size\":1,\"sha256\":\"" +
           std::string(64, 'b') + "\"}],\"signatures\":[" + sigs + "]}]}";
  };
  const std::string good = "{\"signer\":\"ci\",\"ed25519\":\"" + std::string(86, 'A') + "==\"}";
  CHECK_NOTHROW(parse_blob_manifest(manifest(good), {}));
  CHECK_THROWS_AS(parse_blob_manifest(manifest("{\"signer\":\"ci\",\"ed25519\":\"AAAA\"}"), {}), Error);
  CHECK_THROWS_AS(parse_blob_manifest(manifest("{\"signer\":\"../x\",\"ed25519\":\"" + std::string(86, 'A') + "==\"}"), {}),
                  Error);
  std::string many = good;
  for (int i = 0; i < 8; ++i) many += "," + good;
  CHECK_THROWS_WITH(parse_blob_manifest(manifest(many), {}), Catch::Contains("signatures"));
}

namespace {

nlohmann::json entry_with_headers(const std::vector<HeaderRecord>& headers) {
  EntryRecord e;
  e.format_version = kCacheFormatVersion;
  e.kind = "module";
  e.name = "m";
  e.key = std::string(64, 'a');
  e.tool_version = "t";
  e.artifacts.push_back({"m.so", 1, std::string(64, 'b'), {}});
  e.headers = headers;
  return entry_to_json(e);
}

}  // namespace

TEST_CASE("repeated header records are merged, conflicting ones refused", "[cache][entry]") {
  HeaderRecord h{"/p/include/big.h", 35u << 20, std::string(64, 'c'), "", {}};
  std::vector<HeaderRecord> copies(100, h);
  auto e = entry_from_json(entry_with_headers(copies));
  REQUIRE(e);
  CHECK(e->headers.size() == 1);  // one re-hash per hit, not a hundred
  HeaderRecord other = h;
  other.sha256 = std::string(64, 'd');
  auto conflicting = entry_from_json(entry_with_headers({h, other}));
  CHECK_FALSE(conflicting);
  CHECK(conflicting.why().find("recorded twice with different contents") != std::string::npos);
}

TEST_CASE("recorded headers may not add up past the cap", "[cache][entry]") {
  std::vector<HeaderRecord> hs;
  for (int i = 0; i < 3; ++i) hs.push_back({"/p/h" + std::to_string(i) + ".h", 100u << 20, std::string(64, 'c'), "", {}});
  auto too_big = entry_from_json(entry_with_headers(hs));
  CHECK_FALSE(too_big);
  CHECK(too_big.why().find("add up to more than") != std::string::npos);
  hs.pop_back();
  CHECK(entry_from_json(entry_with_headers(hs)));
}

TEST_CASE("header paths with . or .. components are refused", "[cache][entry]") {
  for (const char* p : {"/base/../../etc/hostname", "/base/./h.h", "/base//h.h", "/base/inc/.."}) {
    INFO(p);
    CHECK_FALSE(entry_from_json(entry_with_headers({{p, 1, std::string(64, 'c'), "", {}}})));
  }
  CHECK(entry_from_json(entry_with_headers({{"/base/inc/h.h", 1, std::string(64, 'c'), "", {}}})));
}

TEST_CASE("bytes after the compressed frame are refused", "[cache][blob]") {
  std::string blob = sample_blob("abc");
  CHECK(read_error(blob + blob).find("after the compressed frame") != std::string::npos);
  CHECK(read_error("not zstd at all").find("zstd") != std::string::npos);
}

TEST_CASE("portable paths: under the base relative, elsewhere unchanged", "[cache][portable]") {
  BaseDir base("/work/ci-7/proj");
  CHECK(base.portable_path("/work/ci-7/proj/src/a.cc") == "<base>/src/a.cc");
  CHECK(base.portable_path("/work/ci-7/proj") == "<base>");
  CHECK(base.portable_path("/work/ci-7/project/a.cc") == "/work/ci-7/project/a.cc");
  CHECK(base.relative_header("/work/ci-7/proj/include/h.h") == "include/h.h");
  CHECK(base.relative_header("/usr/include/stdio.h") == "/usr/include/stdio.h");
  CHECK(BaseDir("/elsewhere/p").absolute_header("include/h.h") == "/elsewhere/p/include/h.h");
  CHECK(BaseDir("/").portable_path("/usr/x") == "/usr/x");  // "/" as a base would make everything relative
}

TEST_CASE("shadow candidates under the base travel relative and are checked under the reader's base",
          "[cache][portable]") {
  nlohmann::json local = {{"key", std::string(64, '1')},
                          {"portable_key", std::string(64, '2')},
                          {"base_dir", "/a/proj"},
                          {"headers",
                           {{{"path", "/a/proj/inc2/dep.h"},
                             {"shadows", {"/a/proj/inc1/dep.h", "/opt/tvm/include/dep.h", {{"hex", "2f78ff"}}}}}}}};
  nlohmann::json p = entry_to_portable(local);
  CHECK(p["headers"][0]["shadows"] == nlohmann::json({"inc1/dep.h", "/opt/tvm/include/dep.h", {{"hex", "2f78ff"}}}));
  nlohmann::json back = entry_from_portable(p, BaseDir("/b/checkout"));
  CHECK(back["headers"][0]["path"] == "/b/checkout/inc2/dep.h");
  CHECK(back["headers"][0]["shadows"] ==
        nlohmann::json({"/b/checkout/inc1/dep.h", "/opt/tvm/include/dep.h", {{"hex", "2f78ff"}}}));
  nlohmann::json bad = local;
  bad["headers"][0]["shadows"] = "inc1/dep.h";
  CHECK_THROWS_AS(entry_to_portable(bad), Error);
}

TEST_CASE("entry.json converts to the portable form and back, keeping unknown fields", "[cache][portable]") {
  nlohmann::json local = {{"key", std::string(64, '1')},
                          {"portable_key", std::string(64, '2')},
                          {"base_dir", "/a/proj"},
                          {"headers", {{{"path", "/a/proj/h.h"}}, {{"path", "/usr/include/x.h"}}}},
                          {"future_field", {{"digest", "abc"}}}};
  nlohmann::json p = entry_to_portable(local);
  CHECK(p["key"] == std::string(64, '2'));
  CHECK(!p.contains("base_dir"));
  CHECK(p["headers"][0]["path"] == "h.h");
  CHECK(p["headers"][1]["path"] == "/usr/include/x.h");
  CHECK(p["future_field"]["digest"] == "abc");
  nlohmann::json back = entry_from_portable(p, BaseDir("/b/checkout"));
  CHECK(back["key"] == local_key_hex(std::string(64, '2'), "/b/checkout"));
  CHECK(back["headers"][0]["path"] == "/b/checkout/h.h");
  CHECK(back["base_dir"] == "/b/checkout");
  CHECK(entry_from_portable(p, BaseDir("/a/proj"))["key"] != back["key"]);
  nlohmann::json old = local;
  old.erase("portable_key");
  CHECK_THROWS_AS(entry_to_portable(old), Error);
}
