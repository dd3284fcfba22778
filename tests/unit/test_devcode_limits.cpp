// The inspector's limits on hostile input: non-regular files, decompression
// bombs, listings past the file's allowance, overlapping sections. Each test
// shows the limit is enforced with a clear message and that the report still
// does not depend on the thread count. (Wall time and memory on the crafted
// inputs of tests/integration/hostile_inputs.py: bench/hostile/run.sh.)
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <zstd.h>

#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/print.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::devcode;

namespace {

std::string oracle(const std::string& name) { return std::string(TVMFFI_JIT_ORACLES_DIR) + "/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

template <typename T>
void put(std::string& s, size_t at, T v) {
  std::memcpy(&s[at], &v, sizeof v);
}

// A zstd frame of `size` zero bytes made of 128 KiB RLE blocks (4 bytes
// each): a gigabyte in 32 KiB. The frame records its content size.
std::string zstd_zeros(uint64_t size) {
  std::string f(13, '\0');
  put<uint32_t>(f, 0, 0xFD2FB528);
  f[4] = char(0xE0);  // single segment, 8-byte content size
  put<uint64_t>(f, 5, size);
  for (uint64_t left = size; left > 0;) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(left, 128 << 10));
    left -= n;
    uint32_t header = (left == 0 ? 1u : 0u) | (1u << 1) | (n << 3);  // last?, RLE, size
    f.append(reinterpret_cast<const char*>(&header), 3);
    f.push_back('\0');
  }
  return f;
}

// A fatbin container of entries: kind (1 PTX, 2 ELF, 8 LTO-IR), payload and
// decompressed size (zstd; 0 = stored uncompressed).
std::string fatbin(const std::vector<std::tuple<uint16_t, std::string, uint64_t>>& entries) {
  std::string body;
  for (const auto& [kind, payload, dsize] : entries) {
    std::string h(64, '\0');
    std::string stored = payload + std::string((8 - payload.size() % 8) % 8, '\0');
    put<uint16_t>(h, 0, kind);
    put<uint32_t>(h, 4, 64);
    put<uint64_t>(h, 8, stored.size());
    put<uint32_t>(h, 16, dsize ? static_cast<uint32_t>(payload.size()) : 0);
    put<uint32_t>(h, 28, 90);
    put<uint64_t>(h, 40, dsize ? 0x8000 : 0);  // zstd
    put<uint64_t>(h, 56, dsize);
    body += h + stored;
  }
  std::string c(16, '\0');
  put<uint32_t>(c, 0, 0xBA55ED50);
  put<uint16_t>(c, 4, 1);
  put<uint16_t>(c, 6, 16);
  put<uint64_t>(c, 8, body.size());
  return c + body;
}

FileReport inspect_string(const std::string& bytes, const InspectOptions& options = {}) {
  return inspect_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "crafted", options);
}

std::string json_of(const FileReport& r) { return to_json(r).dump(); }

}  // namespace

TEST_CASE("a FIFO is an invalid file for inspect, reported without waiting for a writer", "[devcode][limits]") {
  util::TempDir dir;
  std::string fifo = dir.path() + "/k.cubin";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  FileReport r = inspect_file(fifo);
  CHECK_FALSE(r.ok());
  CHECK(r.error == "cannot open " + fifo + ": not a regular file (a FIFO)");
}

TEST_CASE("a zstd entry claiming a gigabyte in a 32 KiB file is refused before anything is decompressed",
          "[devcode][limits]") {
  std::string bomb = fatbin({{2, zstd_zeros(uint64_t(1) << 30), uint64_t(1) << 30}});
  REQUIRE(bomb.size() < 40000);
  FileReport r = inspect_string(bomb);
  CHECK_FALSE(r.ok());
  CHECK(r.error.rfind("entry 0: decompressed size 1073741824 would bring the file past its limit of 33554432 "
                      "decompressed bytes (32x its size of ",
                      0) == 0);
  CHECK(r.error.find("not decompressed (a decompression bomb?)") != std::string::npos);
  REQUIRE(r.entries.size() == 1);
  CHECK(r.entries[0].kernels.empty());
}

TEST_CASE("the decompression limit counts every entry of the file, in file order, whatever the thread count",
          "[devcode][limits]") {
  // Six LTO-IR entries of 300,000 zero bytes (decompressing them is the whole
  // check); a limit of 1 MiB admits three.
  std::vector<std::tuple<uint16_t, std::string, uint64_t>> entries(6, {8, zstd_zeros(300000), 300000});
  std::string f = fatbin(entries);
  std::string one;
  for (unsigned threads : {1u, 4u}) {
    InspectOptions options;
    options.threads = threads;
    options.decompressed_floor_bytes = 1 << 20;
    FileReport r = inspect_string(f, options);
    REQUIRE(r.entries.size() == 6);
    for (size_t i = 0; i < 3; ++i) CHECK(r.entries[i].error.empty());
    for (size_t i = 3; i < 6; ++i) CHECK(r.entries[i].error.find("decompression bomb") != std::string::npos);
    CHECK(r.error.rfind("entry 3: decompressed size 300000 would bring the file past its limit of 1048576", 0) == 0);
    if (one.empty()) one = json_of(r);
    CHECK(json_of(r) == one);
  }
  // The same entries fit a limit relative to a larger file: max_expansion x size.
  InspectOptions relative;
  relative.decompressed_floor_bytes = 0;
  relative.max_expansion = 1800000 / f.size() + 1;
  CHECK(inspect_string(f, relative).ok());
  // And the absolute bound wins over both.
  relative.max_decompressed_total_bytes = 600000;
  CHECK(inspect_string(f, relative).error.rfind("entry 2: ", 0) == 0);
}

TEST_CASE("past the file's kernel listing limit every entry loses its kernels alike, whatever the thread count",
          "[devcode][limits]") {
  // Four PTX entries of 100 kernels: 20 bytes of file per kernel, a few
  // hundred bytes of listing each.
  std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  for (int i = 0; i < 100; ++i) ptx += ".visible .entry k" + std::to_string(i) + "(){ ret; }\n";
  std::string f = fatbin(std::vector<std::tuple<uint16_t, std::string, uint64_t>>(4, {1, ptx, 0}));
  FileReport roomy = inspect_string(f);
  REQUIRE(roomy.ok());
  CHECK(roomy.kernel_count() == 400);
  std::string one;
  for (unsigned threads : {1u, 4u}) {
    InspectOptions tight;
    tight.threads = threads;
    tight.listing_floor_bytes = 600;  // plus half the file: about 40 kernels' worth
    FileReport r = inspect_string(f, tight);
    CHECK_FALSE(r.ok());
    CHECK(r.error.rfind("entry 0: not listed: the file's kernels and variables take more than its listing limit of ",
                        0) == 0);
    for (const Entry& e : r.entries) {
      CHECK(e.kernels.empty());
      CHECK_FALSE(e.error.empty());
    }
    if (one.empty()) one = json_of(r);
    CHECK(json_of(r) == one);
  }
}

TEST_CASE("too many fatbin entries for the file's listing limit end the walk with an error", "[devcode][limits]") {
  std::vector<std::tuple<uint16_t, std::string, uint64_t>> entries(2000, {0x40, std::string(), 0});
  std::string f = fatbin(entries);
  InspectOptions options;
  options.listing_floor_bytes = 100 * sizeof(Entry);  // plus half the file (64 KiB): ~250 entries
  FileReport r = inspect_string(f, options);
  CHECK_FALSE(r.ok());
  CHECK(r.error.find("the file's entries take more than its listing limit") != std::string::npos);
  CHECK(r.entries.size() < 2000);
  options.listing_floor_bytes = InspectOptions{}.listing_floor_bytes;
  FileReport all = inspect_string(f, options);
  CHECK(all.ok());
  CHECK(all.entries.size() == 2000);
}

TEST_CASE("sections whose bytes add up to more than twice the file make the ELF file invalid",
          "[devcode][limits]") {
  std::vector<uint8_t> cubin = read_bytes(oracle("a90.cubin"));
  REQUIRE(inspect_bytes(cubin.data(), cubin.size(), "a90.cubin").ok());
  uint64_t shoff;
  std::memcpy(&shoff, &cubin[0x28], 8);
  uint16_t shnum;
  std::memcpy(&shnum, &cubin[0x3c], 2);
  // One section sharing another's bytes is allowed (CUDA 13's .nv.merc.*
  // sections do): point the last section at the .shstrtab bytes.
  auto field = [&](std::vector<uint8_t>& f, uint16_t i, size_t at) { return &f[shoff + 64 * uint64_t(i) + at]; };
  uint32_t progbits = 1;
  std::vector<uint8_t> one = cubin;
  std::memcpy(field(one, shnum - 1, 4), &progbits, 4);
  std::memcpy(field(one, shnum - 1, 24), field(cubin, 1, 24), 16);  // sh_offset and sh_size of section 1
  CHECK(inspect_bytes(one.data(), one.size(), "a90.cubin").ok());
  // Every section over the whole file: a crafted table whose readers would
  // each walk the same bytes.
  uint64_t zero = 0, whole = cubin.size();
  for (uint16_t i = 1; i < shnum; ++i) {
    std::memcpy(field(cubin, i, 4), &progbits, 4);
    std::memcpy(field(cubin, i, 24), &zero, 8);
    std::memcpy(field(cubin, i, 32), &whole, 8);
  }
  FileReport r = inspect_bytes(cubin.data(), cubin.size(), "a90.cubin");
  CHECK_FALSE(r.ok());
  CHECK(r.error.find("more than twice the file's") != std::string::npos);
  CHECK(r.error.find("(they overlap)") != std::string::npos);
}
