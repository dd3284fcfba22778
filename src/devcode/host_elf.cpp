// Host ELF files (.so, .o, executables): the fatbin containers of
// .nv_fatbin/__nv_relfatbin, the data-section scan (--scan-data), TVM FFI
// exports and the cubins embedded with TVM_FFI_EMBED_CUBIN.
#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "devcode/elf.h"
#include "devcode/walk.h"

namespace tvmffi_jit::devcode {

namespace {

constexpr std::string_view kTvmPrefix = "__tvm_ffi_";
constexpr std::string_view kCubinPrefix = "__tvm_ffi__cubin_";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void scan_tvm_functions(const ElfFile& elf, FileReport& r, Run& run) {
  const ElfSection* table = nullptr;
  for (const ElfSection& s : elf.sections())
    if (s.type == kShtDynsym) table = &s;
  bool dynamic = table != nullptr;
  if (!table)  // relocatable objects: exports are the global symbols of .symtab
    for (const ElfSection& s : elf.sections())
      if (s.type == kShtSymtab) table = &s;
  if (!table) return;
  std::vector<std::string> names;
  std::set<std::string> docs, metadata;
  elf.for_each_symbol(*table, [&](const ElfSymbol& sym) {
    if (sym.shndx == 0 || !starts_with(sym.name, kTvmPrefix)) return;
    if (sym.bind() != 1 && sym.bind() != 2) return;  // GLOBAL or WEAK
    if (!dynamic && sym.bind() == 0) return;
    if (sym.name == "__tvm_ffi__library_ctx" || sym.name == "__tvm_ffi__library_bin") {
      r.tvm_ffi_module = true;
      return;
    }
    if (sym.type() != 2) return;  // STT_FUNC
    if (!run.entry_listing.take(sizeof(TvmFunction) + 2 * sym.name.size()))
      fail("{}: the file's exported functions take more than its listing limit of {} bytes", sym.name,
           run.entry_listing.limit);
    std::string_view rest = sym.name.substr(kTvmPrefix.size());
    if (starts_with(rest, "_metadata_")) metadata.insert(std::string(rest.substr(10)));
    else if (starts_with(rest, "_doc_")) docs.insert(std::string(rest.substr(5)));
    else if (starts_with(rest, "_library_") || starts_with(rest, "_cubin_")) return;
    else names.emplace_back(rest);
  });
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& n : names)
    r.functions.push_back(TvmFunction{n, std::string(kTvmPrefix) + n, docs.count(n) > 0, metadata.count(n) > 0});
  if (!r.functions.empty()) r.tvm_ffi_module = true;
}

void scan_embedded_cubins(const ElfFile& elf, FileReport& r, Run& run) {
  // The first SYMTAB and the first DYNSYM, in section order (an ELF file has
  // at most one of each; crafted ones could repeat a large table many times).
  std::vector<const ElfSection*> tables;
  bool have_symtab = false, have_dynsym = false;
  for (const ElfSection& s : elf.sections()) {
    bool& have = s.type == kShtSymtab ? have_symtab : have_dynsym;
    if ((s.type != kShtSymtab && s.type != kShtDynsym) || have) continue;
    have = true;
    tables.push_back(&s);
  }
  std::unordered_set<std::string> listed;
  for (const ElfSection* table : tables) {
    std::unordered_map<std::string_view, ElfSymbol> by_name;
    elf.for_each_symbol(*table, [&](const ElfSymbol& s) {
      if (starts_with(s.name, kCubinPrefix) && s.shndx != 0) by_name.emplace(s.name, s);
    });
    std::vector<std::pair<std::string_view, const ElfSymbol*>> starts;
    for (const auto& [name, sym] : by_name) starts.emplace_back(name, &sym);
    std::sort(starts.begin(), starts.end());
    for (auto& [name, start] : starts) {
      auto end_it = by_name.find(std::string(name) + "_end");
      if (end_it == by_name.end()) continue;  // this is an _end symbol (or a lone start)
      if (!listed.insert(std::string(name)).second) continue;  // listed from .symtab already
      EmbeddedCubin c;
      c.symbol = std::string(name);
      c.name = std::string(name.substr(kCubinPrefix.size()));
      const ElfSymbol* end = &end_it->second;
      try {
        if (start->shndx >= elf.sections().size() || end->shndx != start->shndx)
          fail("symbols {} and {}_end are not in the same section", name, name);
        const ElfSection& s = elf.sections()[start->shndx];
        if (!has_file_data(s.type)) fail("{} is in a section without file data", name);
        uint64_t base = elf.type() == 1 ? 0 : s.addr;  // ET_REL values are section offsets
        if (start->value < base || end->value < start->value || end->value - base > s.size)
          fail("{} .. {}_end (0x{:x}..0x{:x}) is outside section {} (0x{:x}, size 0x{:x})", name, name,
               start->value, end->value, s.name, s.addr, s.size);
        c.offset = s.offset + (start->value - base);
        c.size = end->value - start->value;
        if (!run.embedded_bytes.take(c.size))
          fail("{}: the embedded blobs add up to more than the file's {} bytes (they overlap)", name, run.file_size);
        Bytes blob = elf.bytes().sub(c.offset, c.size, "embedded cubin");
        c.format = detect_format(blob.data(), blob.size());
        if (c.format != FileFormat::kCubin && c.format != FileFormat::kFatbin && c.format != FileFormat::kPtx)
          fail("{} holds {} bytes that are not a cubin, fatbin or PTX", name, c.size);
        r.images.push_back(DeviceImage{c.symbol, c.format, c.offset, c.size, {}});
        c.error = inspect_blob(blob, c.format, c.symbol, run, c.entries, nullptr);
      } catch (const FormatError& e) {
        c.error = e.what();
      }
      if (!c.error.empty() && r.error.empty()) r.error = "embedded cubin " + c.name + ": " + c.error;
      r.embedded_cubins.push_back(std::move(c));
    }
  }
}

}  // namespace

// Walks the fatbin sections of a host ELF. Both the executable (.nv_fatbin)
// and the relocatable (__nv_relfatbin) sections are listed; an entry's
// container number says which image it is in. Structure errors go to `error`
// (the first one wins) prefixed with `where`.
void collect_fatbin_sections(const ElfFile& elf, FatbinWalk& walk, const std::string& where, std::string& error) {
  for (const ElfSection& s : elf.sections()) {
    if ((s.name != ".nv_fatbin" && s.name != "__nv_relfatbin") || !has_file_data(s.type)) continue;
    try {
      walk.walk(elf.contents(s), std::string(s.name));
    } catch (const FormatError& e) {
      if (error.empty()) error = where + std::string(s.name) + ": " + e.what();
    }
  }
}

namespace {

// Whether `c` is a well-formed entry list: every entry of a known kind, its
// header and payload inside, the last one ending exactly at the end. For the
// data-section scan, where a candidate that fails is data that happens to
// hold the magic, not an error. Each entry looked at costs one unit of
// `budget`: crafted data can make every 64th byte a candidate whose entry
// chain runs almost to the end of the section (quadratic time), real
// containers cost their entry count. Throws FormatError when it runs out.
bool plausible_entries(Bytes c, uint64_t& budget) {
  if (c.size() == 0) return false;
  for (uint64_t q = 0; q < c.size();) {
    if (budget == 0) fail("data-section scan stopped at 0x{:x}: too many fatbin lookalikes", c.base() + q);
    --budget;
    uint64_t left = c.size() - q;
    if (left < kEntryHeaderMin) return false;
    uint16_t kind = c.u16(q, "entry kind");  // in range: left >= 64
    uint64_t header_size = c.u32(q + 4, "entry header size");
    uint64_t size = c.u64(q + 8, "entry size");
    if ((kind != 1 && kind != 2 && kind != 8) || header_size < kEntryHeaderMin || header_size > left ||
        size > left - header_size)
      return false;
    q += header_size + size;
  }
  return true;
}

}  // namespace

// InspectOptions::scan_data: fatbin containers in the allocated, non-code
// sections other than .nv_fatbin/__nv_relfatbin. A candidate is an 8-byte
// aligned magic with a version-1, 16-byte header whose entries parse
// exactly; the pages scanned are dropped behind the scan like the walk's.
void scan_data_sections(const ElfFile& elf, FatbinWalk& walk, const std::string& where, std::string& error) {
  constexpr uint64_t kShfAlloc = 0x2, kShfExecInstr = 0x4;
  for (const ElfSection& s : elf.sections()) {
    if (s.name == ".nv_fatbin" || s.name == "__nv_relfatbin" || !has_file_data(s.type) || !(s.flags & kShfAlloc) ||
        (s.flags & kShfExecInstr) || s.size < 16 + kEntryHeaderMin)
      continue;
    Bytes region = elf.contents(s);
    const uint8_t* dropped = region.data();
    uint64_t budget = region.size() / 8 + (uint64_t(1) << 20);  // linear in the section; see plausible_entries
    uint64_t p = (8 - region.base() % 8) % 8;  // file offsets 8-byte aligned
    while (p + 16 + kEntryHeaderMin <= region.size()) {
      if (walk.file && uint64_t(region.data() + p - dropped) >= kDropBatchBytes) {
        walk.file->release(dropped, region.data() + p);
        dropped = region.data() + p;
      }
      uint32_t magic;
      std::memcpy(&magic, region.data() + p, 4);
      if (magic != kFatbinMagic || region.u16(p + 4, "container version") != 1 ||
          region.u16(p + 6, "container header size") != 16) {
        p += 8;
        continue;
      }
      uint64_t fat = region.u64(p + 8, "container size");
      try {
        if (fat > region.size() - p - 16 || !plausible_entries(region.sub(p + 16, fat, "container"), budget)) {
          p += 8;
          continue;
        }
        walk.walk(region.sub(p, 16 + fat, "container"), std::string(s.name));
      } catch (const FormatError& e) {
        if (error.empty()) error = where + std::string(s.name) + ": " + e.what();
        if (budget == 0) break;
      }
      p += (16 + fat + 7) / 8 * 8;
    }
    if (walk.file) walk.file->release(dropped, region.data() + region.size());
  }
}

void inspect_host_elf(Bytes b, FileReport& r, Run& run) {
  ElfFile elf(b);
  EntryQueue jobs(run);
  FatbinWalk walk{jobs, &r.images, run.file};
  collect_fatbin_sections(elf, walk, "", r.error);
  if (run.options.scan_data) scan_data_sections(elf, walk, "", r.error);
  collect_entries(jobs, run, r.entries, r.error,
                  [](const Entry& e) { return fmt::format("entry {}: {}", e.index, e.error); });
  scan_tvm_functions(elf, r, run);
  scan_embedded_cubins(elf, r, run);
}

}  // namespace tvmffi_jit::devcode
