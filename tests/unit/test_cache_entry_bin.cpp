// entry.bin (cache/store/entry_bin.h): the binary memo of entry.json that a
// command-line hit reads instead of the JSON text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cache/store/entry_bin.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/stamp.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

EntryRecord sample_record() {
  EntryRecord e;
  e.format_version = kCacheFormatVersion;
  e.kind = "module";
  e.name = "m";
  e.key = std::string(64, 'a');
  e.portable_key = std::string(64, 'b');
  e.base_dir = "/work/checkout";
  e.tool_version = "0.1.0";
  e.created = 1796411596;
  e.artifacts.push_back({"m.so", 73840, std::string(64, 'c'), "1:2:3:4"});
  HeaderRecord odd;
  odd.path = "/usr/include/d\xff\xfe/h.h";  // not UTF-8: kept byte for byte
  odd.size = 12;
  odd.sha256 = std::string(64, 'd');
  odd.shadows = {"/work/include/h.h", "/opt/x\x80/h.h"};
  HeaderRecord plain;
  plain.path = "/usr/include/stdio.h";
  plain.size = 29000;
  plain.sha256 = std::string(64, 'e');
  plain.stat = "65024:256165:1777320873000000000:1777320873000000000";
  e.headers = {odd, plain};
  e.objects.push_back({std::string(64, 'f'), std::string(64, '0')});
  e.inputs = {{"flags", {"-O2", "-DX=1"}}, {"env", nlohmann::json::object()}};
  e.compiler_output = "warning: something\n";
  e.provenance = {{"origin", "built"}};
  return e;
}

util::FullStamp sample_stamp() { return {65024, 11059233, 98986, 1796411596138669965, 1796411596150903080}; }

}  // namespace

TEST_CASE("entry.bin reads back the very record it was written from", "[cache][entry_bin]") {
  const EntryRecord e = sample_record();
  const std::string bytes = entry_bin_bytes(e, sample_stamp());
  auto back = entry_from_bin(bytes, sample_stamp());
  REQUIRE(back);
  CHECK(entry_to_json(*back) == entry_to_json(e));
  CHECK(back->headers[0].path == e.headers[0].path);  // the bytes, not a replacement
  CHECK(back->headers[0].shadows == e.headers[0].shadows);
  CHECK(back->provenance == e.provenance);

  EntryRecord no_provenance = e;
  no_provenance.provenance = nullptr;
  auto without = entry_from_bin(entry_bin_bytes(no_provenance, sample_stamp()), sample_stamp());
  REQUIRE(without);
  CHECK(without->provenance.is_null());
}

TEST_CASE("entry.bin is used only for the entry.json stamp it was derived from", "[cache][entry_bin]") {
  const std::string bytes = entry_bin_bytes(sample_record(), sample_stamp());
  util::FullStamp other = sample_stamp();
  CHECK(entry_from_bin(bytes, other));
  for (int field = 0; field < 5; ++field) {
    util::FullStamp moved = sample_stamp();
    switch (field) {
      case 0: moved.device += 1; break;
      case 1: moved.inode += 1; break;
      case 2: moved.size += 1; break;
      case 3: moved.mtime_ns += 1; break;
      case 4: moved.ctime_ns += 1; break;
    }
    CHECK_FALSE(entry_from_bin(bytes, moved));
  }
}

TEST_CASE("entry.bin cut short, grown or flipped is never misread", "[cache][entry_bin]") {
  const EntryRecord e = sample_record();
  const std::string bytes = entry_bin_bytes(e, sample_stamp());
  // Every truncation: nothing, never a crash or a partial record.
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(entry_from_bin(bytes.substr(0, n), sample_stamp()));
  CHECK_FALSE(entry_from_bin(bytes + "x", sample_stamp()));
  // Another version's magic: not used.
  std::string other_version = bytes;
  other_version[8 + 21] = '2';  // "tvmffi-jit entry.bin 1\n" after its 8-byte length
  CHECK_FALSE(entry_from_bin(other_version, sample_stamp()));
  // Each single flipped byte: either nothing or a record that the entry
  // checks judge (a flipped hash digit is still well formed).
  size_t read_back = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    if (auto r = entry_from_bin(flipped, sample_stamp())) {
      ++read_back;
      (void)checked_entry(std::move(*r));
    }
  }
  CHECK(read_back < bytes.size());
  // A count far beyond what the bytes could hold is refused before anything is allocated.
  std::string huge = bytes;
  const size_t artifacts_count_at = bytes.find(std::string("\x04\x00\x00\x00\x00\x00\x00\x00m.so", 12)) - 8;
  REQUIRE(artifacts_count_at < bytes.size());
  for (int i = 0; i < 8; ++i) huge[artifacts_count_at + i] = '\xff';
  CHECK_FALSE(entry_from_bin(huge, sample_stamp()));
}

TEST_CASE("a record read from entry.bin gets entry.json's checks", "[cache][entry_bin]") {
  EntryRecord bad = sample_record();
  bad.headers[1].path = "/usr/include/../include/stdio.h";
  auto raw = entry_from_bin(entry_bin_bytes(bad, sample_stamp()), sample_stamp());
  REQUIRE(raw);  // well formed as bytes ...
  auto checked = checked_entry(std::move(*raw));
  REQUIRE_FALSE(checked);  // ... but not an entry this tool serves
  CHECK_THAT(checked.why(), Catch::Contains("not a normal absolute path"));

  EntryRecord twice = sample_record();
  twice.headers.push_back(twice.headers[1]);
  twice.headers.back().shadows = {"/work/include/stdio.h"};
  auto merged = checked_entry(*entry_from_bin(entry_bin_bytes(twice, sample_stamp()), sample_stamp()));
  REQUIRE(merged);
  CHECK(merged->headers.size() == 2);  // merged as entry.json's records are
  CHECK(merged->headers[1].shadows == std::vector<std::string>{"/work/include/stdio.h"});
}
