// The offline inspector against the oracle files and their cuobjdump 13.0
// listings (shared/oracles), plus structural-error behaviour on damaged input.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <zstd.h>

#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/print.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::devcode;

namespace {

size_t align_up8(size_t n) { return (n + 7) & ~size_t(7); }

std::string oracle(const std::string& name) { return std::string(TVMFFI_JIT_ORACLES_DIR) + "/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct Usage {
  uint32_t reg = 0, stack = 0;
  uint64_t shared = 0, local = 0, const0 = 0;
};
// One block of "Resource usage:" per ELF image, in file order, each mapping
// function name -> figures; arch per block from the preceding "arch = " line.
struct ResUsage {
  std::vector<std::string> arch;             // per ELF block
  std::vector<std::map<std::string, Usage>> functions;
  std::vector<std::string> ptx_arch;         // per "Fatbin ptx code" block
};

ResUsage parse_res_usage(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  ResUsage r;
  std::string line, function, pending_arch, block;
  while (std::getline(in, line)) {
    if (line.rfind("Fatbin ", 0) == 0) block = line;
    if (line.rfind("arch = ", 0) == 0) {
      pending_arch = line.substr(7);
      if (block.find("ptx") != std::string::npos) r.ptx_arch.push_back(pending_arch);
    }
    if (line == "Resource usage:") {
      r.arch.push_back(pending_arch);
      r.functions.emplace_back();
    } else if (line.rfind(" Function ", 0) == 0) {
      function = line.substr(10, line.size() - 11);  // strip trailing ':'
    } else if (line.rfind("  REG:", 0) == 0) {
      Usage u;
      std::istringstream fields(line);
      std::string f;
      while (fields >> f) {
        auto colon = f.rfind(':');
        std::string k = f.substr(0, colon);
        uint64_t v = std::stoull(f.substr(colon + 1));
        if (k == "REG") u.reg = uint32_t(v);
        else if (k == "STACK") u.stack = uint32_t(v);
        else if (k == "SHARED") u.shared = v;
        else if (k == "LOCAL") u.local = v;
        else if (k == "CONSTANT[0]") u.const0 = v;
      }
      r.functions.back()[function] = u;
    }
  }
  return r;
}

void require_matches(const Entry& e, const std::map<std::string, Usage>& expected) {
  std::map<std::string, const Kernel*> got;
  for (const Kernel& k : e.kernels) got[k.name] = &k;
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, u] : expected) {
    INFO("kernel " << name);
    REQUIRE(got.count(name) == 1);
    const Kernel& k = *got[name];
    CHECK(k.registers == u.reg);
    CHECK(k.stack_bytes == u.stack);
    CHECK(k.shared_bytes == u.shared);
    CHECK(k.local_bytes == u.local);
    CHECK(k.const0_bytes == u.const0);
  }
}

const Kernel& kernel(const Entry& e, const std::string& name) {
  for (const Kernel& k : e.kernels)
    if (k.name == name) return k;
  FAIL("no kernel " << name);
  throw;
}

}  // namespace

TEST_CASE("a cubin's kernels and resources equal cuobjdump -res-usage", "[devcode][inspect]") {
  FileReport r = inspect_file(oracle("a90.cubin"));
  REQUIRE(r.ok());
  CHECK(r.format == FileFormat::kCubin);
  REQUIRE(r.entries.size() == 1);
  const Entry& e = r.entries[0];
  CHECK(e.arch == "sm_90");
  CHECK(e.elf_type == "exec");
  CHECK(e.elf_abi_version == 8);
  CHECK(e.elf_flags == 0x06005a04);
  CHECK(e.ptxas_options == "-arch sm_90 -m 64 ");
  CHECK(e.virtual_arch == "compute_90");
  CHECK(e.toolkit == "13.0");
  ResUsage expected = parse_res_usage(oracle("cuobjdump-res-usage.a90.cubin.txt"));
  REQUIRE(expected.functions.size() == 1);
  require_matches(e, expected.functions[0]);
  // Module-wide figures (cuobjdump "Common: GLOBAL:0 CONSTANT[3]:256").
  CHECK(e.global_bytes == 0);
  REQUIRE(e.constant_banks.size() == 1);
  CHECK(e.constant_banks[0] == std::make_pair(3u, uint64_t(256)));
  REQUIRE(e.globals.size() == 1);
  CHECK(e.globals[0].name == "cb");
  CHECK(e.globals[0].space == "constant");
  CHECK(e.globals[0].size == 256);
}

TEST_CASE("launch bounds, clusters, maxnreg and parameters come from .nv.info", "[devcode][inspect]") {
  FileReport r = inspect_file(oracle("a90.cubin"));
  const Entry& e = r.entries.at(0);
  const Kernel& add = kernel(e, "add");
  CHECK(add.max_threads == 256u);
  REQUIRE(add.max_ntid);
  CHECK(*add.max_ntid == Dim3{256, 1, 1});
  CHECK(add.param_bytes == 28u);  // 3 pointers + int
  CHECK(add.param_count == 4u);
  const Kernel& clu = kernel(e, "clu");
  REQUIRE(clu.cluster_dims);
  CHECK(*clu.cluster_dims == Dim3{2, 1, 1});
  CHECK(clu.explicit_cluster);
  CHECK(clu.max_registers == 40u);
  CHECK_FALSE(clu.max_threads);
  const Kernel& loc = kernel(e, "_Z3locIfEvPT_1Bi");
  CHECK(loc.demangled == "void loc<float>(float*, B, int)");
  CHECK(loc.param_bytes == 172u);  // 8 + 160-byte struct + 4
  CHECK(loc.min_stack_bytes == 256u);
  CHECK(kernel(e, "_Z4smemPf").demangled == "smem(float*)");
}

TEST_CASE("a fatbin lists PTX and ELF entries in cuobjdump's order with its figures", "[devcode][inspect]") {
  FileReport r = inspect_file(oracle("f.fatbin"));
  REQUIRE(r.ok());
  CHECK(r.format == FileFormat::kFatbin);
  ResUsage expected = parse_res_usage(oracle("cuobjdump-res-usage.f.fatbin.txt"));
  std::vector<const Entry*> elf, ptx;
  for (const Entry& e : r.entries) (e.kind == EntryKind::kElf ? elf : ptx).push_back(&e);
  REQUIRE(elf.size() == expected.functions.size());
  for (size_t i = 0; i < elf.size(); ++i) {
    CHECK(elf[i]->arch == expected.arch[i]);
    require_matches(*elf[i], expected.functions[i]);
  }
  REQUIRE(ptx.size() == expected.ptx_arch.size());
  for (size_t i = 0; i < ptx.size(); ++i) {
    // cuobjdump prints "sm_90" for compute_90 PTX.
    CHECK(ptx[i]->arch == "compute_" + expected.ptx_arch[i].substr(3));
    CHECK(ptx[i]->ptx_version == "9.0");
    CHECK(ptx[i]->compression == Compression::kZstd);
    CHECK(ptx[i]->kernels.size() == 4);
  }
  // Facts from oracles/README.md: flags and sizes of the three entries.
  REQUIRE(r.entries.size() == 3);
  CHECK(r.entries[0].flags == 0x8011);
  CHECK(r.entries[1].flags == 0x100011);
  CHECK(r.entries[1].compression == Compression::kNone);
  CHECK(r.entries[1].size == 16424);
  CHECK(r.entries[2].flags == 0x108011);
  CHECK(r.entries[0].decompressed_size == 0x44dd);
  // The PTX kernels carry the same launch bounds and parameter sizes as the cubin.
  const Kernel& add = kernel(*ptx[0], "add");
  CHECK(add.max_threads == 256u);
  CHECK(add.param_bytes == 28u);
  CHECK_FALSE(add.registers);
  CHECK(*kernel(*ptx[0], "clu").cluster_dims == Dim3{2, 1, 1});
  CHECK(kernel(*ptx[0], "clu").max_registers == 40u);
  CHECK(kernel(*ptx[0], "_Z3locIfEvPT_1Bi").param_bytes == 172u);
}

TEST_CASE("a host .so lists its .nv_fatbin containers with file offsets", "[devcode][inspect]") {
  std::vector<uint8_t> so = read_bytes(oracle("libk.so"));
  FileReport r = inspect_bytes(so.data(), so.size(), "libk.so");
  REQUIRE(r.ok());
  CHECK(r.format == FileFormat::kHostElf);
  // Two containers back to back in .nv_fatbin at 0x8f9b0 (oracles/README.md).
  REQUIRE(r.images.size() == 2);
  CHECK(r.images[0].source == ".nv_fatbin");
  CHECK(r.images[0].offset == 0x8f9b0);
  CHECK(r.images[1].offset == 0x8fff8);
  CHECK(r.images[0].size + r.images[1].size == 0x5460);
  // cuobjdump -lelf -lptx: two sm_90 ELF images and one sm_90 PTX.
  std::vector<std::string> kinds;
  for (const Entry& e : r.entries) kinds.push_back(std::string(to_string(e.kind)) + ":" + e.arch);
  CHECK(kinds == std::vector<std::string>{"elf:sm_90", "elf:sm_90", "ptx:compute_90"});
  CHECK(r.entries[0].elf_flags == 0x05005a04);
  CHECK(r.entries[0].kernels.empty());
  // The second ELF is byte-identical to a90.cubin, and entry_payload returns it.
  std::vector<uint8_t> cubin = read_bytes(oracle("a90.cubin"));
  CHECK(entry_payload(so.data(), so.size(), r.entries[1]) == cubin);
  // cuobjdump --list-text names the same four kernels.
  std::vector<std::string> names;
  for (const Kernel& k : r.entries[1].kernels) names.push_back(k.name);
  CHECK(names == std::vector<std::string>{"clu", "_Z3locIfEvPT_1Bi", "_Z4smemPf", "add"});
  // entry_payload decompresses the zstd PTX to its declared size, and it is PTX.
  std::vector<uint8_t> ptx = entry_payload(so.data(), so.size(), r.entries[2]);
  CHECK(ptx.size() == r.entries[2].decompressed_size);
  CHECK(detect_format(ptx.data(), ptx.size()) == FileFormat::kPtx);
  CHECK_FALSE(r.tvm_ffi_module);
}

TEST_CASE("format detection looks at content, not the file name", "[devcode][inspect]") {
  std::vector<uint8_t> cubin = read_bytes(oracle("a90.cubin"));
  std::vector<uint8_t> fatbin = read_bytes(oracle("f.fatbin"));
  CHECK(detect_format(cubin.data(), cubin.size()) == FileFormat::kCubin);
  CHECK(detect_format(fatbin.data(), fatbin.size()) == FileFormat::kFatbin);
  std::string ptx = "// comment .entry x\n/* block */\n.version 8.5\n.target sm_80\n.address_size 64\n";
  CHECK(detect_format(reinterpret_cast<const uint8_t*>(ptx.data()), ptx.size()) == FileFormat::kPtx);
  std::string text = "int main() { return 0; }\n";
  FileReport r = inspect_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "x.cubin");
  CHECK(r.format == FileFormat::kUnknown);
  CHECK_FALSE(r.ok());
  CHECK(inspect_bytes(nullptr, 0, "empty").error == "empty file");
}

TEST_CASE("PTX listing skips comments, declarations and function bodies", "[devcode][inspect]") {
  std::string ptx = R"(
// .globl fake
.version 8.7
.target sm_100f
.address_size 64
.extern .entry declared(.param .u64 p);
.global .align 4 .b8 table[64];
.const .align 8 .u64 lut[4] = {1, 2, 3, 4};
.global .attribute(.managed) .align 4 .u32 counter;
.visible .func (.param .b32 r) helper(.param .b32 a) { ret; }
/* .entry commented { */
.visible .entry _Z1kPfi(
  .param .u64 .ptr .global .align 16 _Z1kPfi_param_0,
  .param .u32 _Z1kPfi_param_1
)
.reqntid 128, 2
.minnctapersm 4
{
  // } a brace in a comment
  { .reg .b32 %r<2>; }
  ret;
}
.entry plain() .maxntid 64 .reqnctapercluster 4, 2 .explicitcluster { ret; }
)";
  FileReport r = inspect_bytes(reinterpret_cast<const uint8_t*>(ptx.data()), ptx.size(), "k.ptx");
  REQUIRE(r.ok());
  REQUIRE(r.entries.size() == 1);
  const Entry& e = r.entries[0];
  CHECK(e.arch == "compute_100f");
  CHECK(e.ptx_version == "8.7");
  REQUIRE(e.kernels.size() == 2);
  const Kernel& k = e.kernels[0];
  CHECK(k.name == "_Z1kPfi");
  CHECK(k.demangled == "k(float*, int)");
  CHECK(k.param_bytes == 12u);  // pointer alignment after .ptr is the pointee's, not the parameter's
  CHECK(k.param_count == 2u);
  CHECK(*k.req_ntid == Dim3{128, 2, 1});
  CHECK(k.max_threads == 256u);
  CHECK(k.min_ctas_per_sm == 4u);
  const Kernel& p = e.kernels[1];
  CHECK(*p.max_ntid == Dim3{64, 1, 1});
  CHECK(*p.cluster_dims == Dim3{4, 2, 1});
  CHECK(p.explicit_cluster);
  REQUIRE(e.globals.size() == 3);
  CHECK(e.globals[0].name == "table");
  CHECK(e.globals[0].size == 64);
  CHECK(e.globals[1].space == "constant");
  CHECK(e.globals[1].size == 32);
  CHECK(e.globals[2].space == "managed");
}

TEST_CASE("every truncation of the oracle files is reported as invalid, never a crash", "[devcode][inspect]") {
  for (const char* name : {"a90.cubin", "f.fatbin"}) {
    std::vector<uint8_t> bytes = read_bytes(oracle(name));
    size_t step = std::max<size_t>(1, bytes.size() / 300);
    for (size_t n = 0; n < bytes.size(); n += step) {
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);  // own allocation: ASan sees overreads
      FileReport r = inspect_bytes(cut.data(), cut.size(), name);
      INFO(name << " truncated to " << n << " bytes: " << r.error);
      CHECK_FALSE(r.ok());
      CHECK_FALSE(r.error.empty());
    }
  }
}

TEST_CASE("a fatbin entry whose sizes exceed its container names the entry and the bound", "[devcode][inspect]") {
  std::vector<uint8_t> f = read_bytes(oracle("f.fatbin"));
  // Entry 1 (the ELF) header is at 0x10 + 0x50 + 0xd50 = ... find it from a clean parse.
  FileReport clean = inspect_bytes(f.data(), f.size(), "f.fatbin");
  uint64_t h = clean.entries.at(2).header_offset;
  uint32_t huge = 0x10000000;
  std::memcpy(&f[h + 16], &huge, 4);  // compressed_size
  FileReport r = inspect_bytes(f.data(), f.size(), "f.fatbin");
  CHECK_FALSE(r.ok());
  CHECK(r.error.find("entry 2: compressed size 268435456 exceeds container end at 0x") == 0);
  // A decompressed size that disagrees with the zstd frame is caught before allocating.
  f = read_bytes(oracle("f.fatbin"));
  uint64_t bad = 1ull << 40;
  std::memcpy(&f[h + 56], &bad, 8);
  r = inspect_bytes(f.data(), f.size(), "f.fatbin");
  CHECK(r.error.find("entry 2: decompressed size 1099511627776 exceeds the limit") == 0);
}

TEST_CASE("random bit flips never crash the parser", "[devcode][inspect]") {
  std::mt19937 rng(1234);
  for (const char* name : {"a90.cubin", "f.fatbin"}) {
    std::vector<uint8_t> bytes = read_bytes(oracle(name));
    for (int i = 0; i < 400; ++i) {
      std::vector<uint8_t> m = bytes;
      for (int j = 0; j < 4; ++j) m[rng() % m.size()] ^= uint8_t(1u << (rng() % 8));
      FileReport r = inspect_bytes(m.data(), m.size(), name);
      (void)to_json(r);
      (void)format_text(r);
    }
  }
}

TEST_CASE("a missing file is an error for that file, not an exception", "[devcode][inspect]") {
  FileReport r = inspect_file("/nonexistent/k.cubin");
  CHECK_FALSE(r.ok());
  CHECK(r.error.rfind("cannot open /nonexistent/k.cubin", 0) == 0);
}

TEST_CASE("parallel inspection gives the same report as one thread", "[devcode][inspect]") {
  InspectOptions one, four;
  four.threads = 4;
  for (const char* name : {"f.fatbin", "libk.so"}) {
    CHECK(to_json(inspect_file(oracle(name), one)) == to_json(inspect_file(oracle(name), four)));
  }
}

namespace {
// write_json's bytes, as the CLI prints them.
std::string json_text(const std::vector<FileReport>& reports, unsigned threads) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* mem = open_memstream(&buf, &len);
  REQUIRE(write_json(mem, reports, threads));
  std::fclose(mem);
  std::string text(buf, len);
  std::free(buf);
  return text;
}
}  // namespace

TEST_CASE("the JSON bytes do not depend on the thread count or the decompression budget", "[devcode][inspect]") {
  std::vector<std::string> files = {oracle("f.fatbin"), oracle("libk.so"), oracle("a90.cubin")};
  auto inspect_all = [&](unsigned threads, uint64_t budget) {
    InspectOptions options;
    options.threads = threads;
    options.buffer_budget_bytes = budget;
    std::vector<FileReport> reports;
    for (const std::string& f : files) reports.push_back(inspect_file(f, options));
    return json_text(reports, threads);
  };
  std::string one = inspect_all(1, InspectOptions{}.buffer_budget_bytes);
  // A budget smaller than any entry makes every thread wait for all others;
  // one of a few entries' size makes them take turns.
  CHECK(inspect_all(4, 1) == one);
  CHECK(inspect_all(3, 40000) == one);
  CHECK(inspect_all(16, InspectOptions{}.buffer_budget_bytes) == one);
}

TEST_CASE("a file read by path and the same bytes in memory give the same report", "[devcode][inspect]") {
  // By path, payloads are pread into the decompression arena; in memory they
  // are read in place.
  for (const char* name : {"f.fatbin", "libk.so", "a90.cubin"}) {
    std::vector<uint8_t> bytes = read_bytes(oracle(name));
    InspectOptions options;
    options.threads = 2;
    CHECK(to_json(inspect_bytes(bytes.data(), bytes.size(), oracle(name), options)) ==
          to_json(inspect_file(oracle(name), options)));
  }
}

namespace {
// A fatbin container of `count` zstd LTO-IR entries of `size` bytes each
// (LTO-IR is opaque to the inspector: decompressing it is the whole check).
std::string zstd_ltoir_fatbin(size_t count, size_t size) {
  std::string entries;
  for (size_t i = 0; i < count; ++i) {
    std::string payload(size, '\0');
    for (size_t j = 0; j < size; ++j) payload[j] = char((j * 7 + i) % 251);
    std::string packed(ZSTD_compressBound(size), '\0');
    size_t csize = ZSTD_compress(packed.data(), packed.size(), payload.data(), size, 1);
    REQUIRE_FALSE(ZSTD_isError(csize));
    packed.resize(align_up8(csize));
    char header[64] = {};
    auto put = [&](size_t at, uint64_t v, size_t n) { std::memcpy(header + at, &v, n); };
    put(0, 8, 2);                // kind: LTO-IR
    put(4, 64, 4);               // header size
    put(8, packed.size(), 8);    // stored size
    put(16, csize, 4);           // compressed size
    put(24, 4, 2);               // minor
    put(26, 1, 2);               // major
    put(28, 90, 4);              // arch
    put(40, 0x8000, 8);          // flags: zstd
    put(56, size, 8);            // decompressed size
    entries.append(header, 64);
    entries += packed;
  }
  char container[16] = {};
  uint32_t magic = 0xBA55ED50;
  uint16_t version = 1, header_size = 16;
  uint64_t fat = entries.size();
  std::memcpy(container, &magic, 4);
  std::memcpy(container + 4, &version, 2);
  std::memcpy(container + 6, &header_size, 2);
  std::memcpy(container + 8, &fat, 8);
  return std::string(container, 16) + entries;
}
}  // namespace

TEST_CASE("entries larger than the decompression budget are inspected, in turn", "[devcode][inspect]") {
  util::TempDir dir;
  std::string path = dir.path() + "/big.fatbin";
  util::write_file(path, zstd_ltoir_fatbin(6, 300000));
  std::string one;
  for (uint64_t budget : {uint64_t(1), uint64_t(700000), InspectOptions{}.buffer_budget_bytes}) {
    for (unsigned threads : {1u, 3u}) {
      InspectOptions options;
      options.threads = threads;
      options.buffer_budget_bytes = budget;
      FileReport r = inspect_file(path, options);
      INFO("budget " << budget << ", " << threads << " threads");
      CHECK(r.ok());
      REQUIRE(r.entries.size() == 6);
      for (const Entry& e : r.entries) {
        CHECK(e.kind == EntryKind::kLtoIr);
        CHECK(e.decompressed_size == 300000);
        CHECK(e.error.empty());
      }
      std::string text = json_text({r}, threads);
      if (one.empty()) one = text;
      CHECK(text == one);
    }
  }
}

// `source`'s entries repeated to `count` (3000: enough for many output
// chunks, more than the formatting window), with kernel counts that vary
// from entry to entry (none for every 7th) and an error on every
// `error_every`th (0: none).
static FileReport many_entries(const FileReport& source, uint32_t error_every = 0, uint32_t count = 3000) {
  FileReport big = source;
  big.entries.clear();
  for (uint32_t i = 0; i < count; ++i) {
    Entry e = source.entries[i % source.entries.size()];
    e.index = i;
    e.kernels.resize(i % 7 == 0 ? 0 : e.kernels.size() * (1 + i % 5), e.kernels.empty() ? Kernel{} : e.kernels[0]);
    if (error_every && i % error_every == 0) e.error = "synthetic error " + std::to_string(i);
    big.entries.push_back(std::move(e));
  }
  return big;
}

TEST_CASE("the JSON printer writes many entries in order on any number of threads", "[devcode][inspect]") {
  FileReport source = inspect_file(oracle("f.fatbin"));
  REQUIRE(source.ok());
  FileReport big = many_entries(source);
  std::vector<FileReport> reports = {big, source, big};
  std::string one = json_text(reports, 1);
  for (unsigned threads : {2u, 5u, 32u}) CHECK(json_text(reports, threads) == one);
  // The chunked text is the whole document's (its seams and commas), checked
  // on a tenth of the entries: parsing all of them takes 10 s under ASan.
  std::vector<FileReport> fewer = {many_entries(source, 0, 300), source};
  CHECK(nlohmann::json::parse(json_text(fewer, 1)) == to_json(fewer));
  CHECK(nlohmann::json::parse(json_text(fewer, 5)) == to_json(fewer));
}

TEST_CASE("the text printer writes format_text's bytes on any number of threads", "[devcode][inspect]") {
  FileReport source = inspect_file(oracle("libk.so"));
  REQUIRE(source.ok());
  FileReport big = many_entries(source, 11);
  big.error = "synthetic file error";
  for (const FileReport* r : {&source, &big}) {
    const std::string expected = format_text(*r);
    for (unsigned threads : {1u, 2u, 5u, 32u}) {
      char* buf = nullptr;
      size_t len = 0;
      FILE* mem = open_memstream(&buf, &len);
      REQUIRE(write_text(mem, *r, threads));
      std::fclose(mem);
      std::string text(buf, len);
      std::free(buf);
      INFO(threads << " threads");
      CHECK(text == expected);
    }
  }
  CHECK_THAT(format_text(big), Catch::Contains("entry 2999 (") && Catch::Contains("entry 11 error: synthetic error 11") &&
                                   Catch::EndsWith("  error: synthetic file error\n"));
}

TEST_CASE("the streamed JSON equals to_json and keeps the documented fields", "[devcode][inspect]") {
  std::vector<FileReport> reports = {inspect_file(oracle("f.fatbin")), inspect_file(oracle("libk.so"))};
  char* buf = nullptr;
  size_t len = 0;
  FILE* mem = open_memstream(&buf, &len);
  REQUIRE(write_json(mem, reports));
  std::fclose(mem);
  nlohmann::json streamed = nlohmann::json::parse(std::string(buf, len));
  std::free(buf);
  CHECK(streamed == to_json(reports));
  const auto& file = streamed["files"][0];
  for (const char* key : {"path", "format", "entries", "functions", "embedded_cubins", "error"})
    CHECK(file.contains(key));
  const auto& entry = file["entries"][1];
  for (const char* key : {"kind", "arch", "ptx_version", "compression", "size", "decompressed_size", "kernels"})
    CHECK(entry.contains(key));
  for (const char* key : {"name", "demangled", "registers", "stack_bytes", "shared_bytes", "param_bytes", "max_threads"})
    CHECK(entry["kernels"][0].contains(key));
  CHECK(file["format"] == "fatbin");
  CHECK(file["error"].is_null());
}

namespace {
// One GNU ar member: 60-byte header, data, padding to an even offset.
void ar_member(std::string& out, const std::string& name, const std::string& data) {
  char header[61];
  std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0", "0", "644",
                data.size());
  out.append(header, 60);
  out += data;
  if (out.size() % 2) out += '\n';
}
std::string as_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
}  // namespace

TEST_CASE("ar archive members are scanned like stand-alone files, long names included", "[devcode][inspect]") {
  std::string so = as_string(read_bytes(oracle("libk.so")));
  std::string cubin = as_string(read_bytes(oracle("a90.cubin")));
  std::string long_name = "a_member_name_longer_than_sixteen.so";
  std::string archive = "!<arch>\n";
  ar_member(archive, "/", std::string(8, '\0'));  // symbol table: skipped
  ar_member(archive, "//", long_name + "/\n");
  ar_member(archive, "/0", so);
  ar_member(archive, "k.cubin/", cubin);
  ar_member(archive, "notes.txt/", "not device code");
  FileReport r = inspect_bytes(reinterpret_cast<const uint8_t*>(archive.data()), archive.size(), "lib.a");
  REQUIRE(r.ok());
  CHECK(r.format == FileFormat::kArchive);
  REQUIRE(r.entries.size() == 4);  // libk.so: 2 ELF + 1 PTX; k.cubin: 1 ELF
  CHECK(r.entries[0].member == long_name);
  CHECK(r.entries[3].member == "k.cubin");
  CHECK(r.entries[3].kernels.size() == 4);
  REQUIRE(r.images.size() == 2);
  CHECK(r.images[0].member == long_name);
  // Offsets stay file offsets: the cubin member's payload is the cubin.
  std::vector<uint8_t> bytes(archive.begin(), archive.end());
  CHECK(as_string(entry_payload(bytes.data(), bytes.size(), r.entries[3])) == cubin);
  CHECK(as_string(entry_payload(bytes.data(), bytes.size(), r.entries[1])) == cubin);
  // A member whose size runs past the end is named.
  std::string cut = archive.substr(0, archive.size() - 40);
  FileReport bad = inspect_bytes(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), "lib.a");
  CHECK_FALSE(bad.ok());
  CHECK(bad.error.find("archive member") != std::string::npos);
}
