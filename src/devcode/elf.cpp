#include "devcode/elf.h"

#include <cstring>
#include <optional>
#include <vector>

namespace tvmffi_jit::devcode {

namespace {
constexpr uint64_t kEhdrSize = 64;
constexpr uint64_t kShdrSize = 64;
constexpr uint64_t kPhdrSize = 56;
constexpr uint64_t kSymSize = 24;
constexpr uint32_t kShnXindex = 0xffff;
constexpr uint32_t kShtStrtab = 3;
constexpr uint32_t kShtSymtabShndx = 18;
}  // namespace

bool is_elf(const uint8_t* data, size_t size) {
  return size >= 4 && std::memcmp(data, "\x7f" "ELF", 4) == 0;
}

uint16_t elf_machine(const uint8_t* data, size_t size) {
  if (!is_elf(data, size) || size < 20) return 0;
  uint16_t m;
  std::memcpy(&m, data + 18, 2);
  return m;
}

namespace {

// e_ident: long enough, the magic, 64-bit little-endian (all this reads).
void check_ident(Bytes b) {
  if (b.size() < kEhdrSize) fail("ELF header truncated: file has 0x{:x} bytes, need 0x40", b.size());
  if (!is_elf(b.data(), b.size())) fail("not an ELF file (bad magic)");
  uint8_t cls = b.u8(4, "EI_CLASS"), order = b.u8(5, "EI_DATA");
  if (cls != 2) fail("unsupported ELF class {} (only 64-bit ELF is supported)", cls);
  if (order != 1) fail("unsupported ELF byte order {} (only little endian is supported)", order);
}

// Program headers (cubins and linked host files have them): the table and
// every segment's file bytes must be inside the file.
void check_segments(Bytes b) {
  uint64_t phoff = b.u64(32, "e_phoff");
  uint16_t phentsize = b.u16(54, "e_phentsize");
  uint64_t phnum = b.u16(56, "e_phnum");
  if (phnum == 0) return;
  if (phentsize != kPhdrSize) fail("ELF header: e_phentsize {} (expected 56)", phentsize);
  Bytes ph = b.sub(phoff, phnum * kPhdrSize, "program header table");
  for (uint64_t i = 0; i < phnum; ++i) {
    uint64_t off = ph.u64(i * kPhdrSize + 8, "p_offset"), filesz = ph.u64(i * kPhdrSize + 32, "p_filesz");
    if (!b.contains(off, filesz))
      fail("segment {} at 0x{:x} size 0x{:x} exceeds file size 0x{:x}", i, off, filesz, b.size());
  }
}

// The section header table, its count and name table's index resolved
// through section 0 under extended numbering.
struct SectionTable {
  Bytes headers;
  uint64_t count = 0;
  uint32_t names_index = 0;  // e_shstrndx
};

// The section header table, which must fit in the file (that also caps the
// allocation of the sections); nullopt when there is none.
std::optional<SectionTable> locate_section_table(Bytes b) {
  uint64_t shoff = b.u64(40, "e_shoff");
  uint16_t shentsize = b.u16(58, "e_shentsize");
  uint64_t shnum = b.u16(60, "e_shnum");
  uint32_t shstrndx = b.u16(62, "e_shstrndx");
  if (shoff == 0) {
    if (shnum != 0) fail("ELF header: e_shnum {} with no section header table", shnum);
    return std::nullopt;
  }
  if (shentsize != kShdrSize) fail("ELF header: e_shentsize {} (expected 64)", shentsize);
  Bytes first = b.sub(shoff, kShdrSize, "section header 0");
  if (shnum == 0) shnum = first.u64(32, "section 0 sh_size");  // extended numbering
  if (shstrndx == kShnXindex) shstrndx = first.u32(40, "section 0 sh_link");
  if (shnum > (b.size() - shoff) / kShdrSize)
    fail("section header table at 0x{:x} with {} entries exceeds file size 0x{:x}", shoff, shnum, b.size());
  return SectionTable{b.sub(shoff, shnum * kShdrSize, "section header table"), shnum, shstrndx};
}

// Every section header; each section's bytes must be inside the file.
std::vector<ElfSection> read_section_headers(Bytes b, const SectionTable& table) {
  std::vector<ElfSection> sections(table.count);
  for (uint64_t i = 0; i < table.count; ++i) {
    Bytes h = table.headers.sub(i * kShdrSize, kShdrSize, "section header");
    ElfSection& s = sections[i];
    s.index = static_cast<uint32_t>(i);
    s.type = h.u32(4, "sh_type");
    s.flags = h.u64(8, "sh_flags");
    s.addr = h.u64(16, "sh_addr");
    s.offset = h.u64(24, "sh_offset");
    s.size = h.u64(32, "sh_size");
    s.link = h.u32(40, "sh_link");
    s.info = h.u32(44, "sh_info");
    s.entsize = h.u64(56, "sh_entsize");
    if (i != 0 && has_file_data(s.type) && !b.contains(s.offset, s.size))
      fail("section {} at 0x{:x} size 0x{:x} exceeds file size 0x{:x}", i, s.offset, s.size, b.size());
  }
  return sections;
}

// The sections' bytes may add up to at most twice the file. Sections may
// share bytes (CUDA 13's .nv.merc.* sections of sm_100+ cubins alias
// others), but the readers that look at each section in turn (fatbin walk,
// data scan, notes, .nv.info) would do quadratic work on a crafted table of
// thousands of headers over the same bytes. Real files stay below their
// size (sm_100 cubins with .nv.merc sections: 0.88 of it).
void check_section_overlap(const std::vector<ElfSection>& sections, Bytes b) {
  uint64_t total = 0;
  for (const ElfSection& s : sections)
    if (s.index != 0 && has_file_data(s.type)) total += s.size;  // each <= file size: no overflow below 2^48 sections
  if (total > 2 * b.size())
    fail("the sections hold 0x{:x} bytes in all, more than twice the file's 0x{:x} (they overlap)", total, b.size());
}

}  // namespace

ElfFile::ElfFile(Bytes b) : bytes_(b) {
  check_ident(b);
  osabi_ = b.u8(7, "EI_OSABI");
  abi_version_ = b.u8(8, "EI_ABIVERSION");
  type_ = b.u16(16, "e_type");
  machine_ = b.u16(18, "e_machine");
  flags_ = b.u32(48, "e_flags");
  check_segments(b);
  std::optional<SectionTable> table = locate_section_table(b);
  if (!table) return;
  sections_ = read_section_headers(b, *table);
  check_section_overlap(sections_, b);
  if (table->count == 0) return;
  // The names, from the section-name table.
  if (table->names_index >= table->count)
    fail("e_shstrndx {} is not a section (there are {})", table->names_index, table->count);
  const ElfSection& strsec = sections_[table->names_index];
  if (strsec.type != kShtStrtab) fail("section-name table (section {}) is not a string table", table->names_index);
  NameReader names(contents(strsec));
  for (uint64_t i = 1; i < table->count; ++i) {
    Bytes h = table->headers.sub(i * kShdrSize, kShdrSize, "section header");
    uint32_t name = h.u32(0, "sh_name");
    if (name != 0) sections_[i].name = names.read(name, "section name");
  }
}

const ElfSection* ElfFile::find_section(std::string_view name) const {
  for (const ElfSection& s : sections_)
    if (s.index != 0 && s.name == name) return &s;
  return nullptr;
}

Bytes ElfFile::contents(const ElfSection& s) const {
  if (!has_file_data(s.type) || s.index == 0) return Bytes(bytes_.data(), 0, 0);
  return bytes_.sub(s.offset, s.size, "section");
}

ElfFile::SymbolTable ElfFile::symbol_table(const ElfSection& symtab) const {
  if (symtab.entsize != kSymSize)
    fail("symbol table (section {}) has sh_entsize {} (expected 24)", symtab.index, symtab.entsize);
  if (symtab.link == 0 || symtab.link >= sections_.size() || sections_[symtab.link].type != kShtStrtab)
    fail("symbol table (section {}) links to {} which is not a string table", symtab.index, symtab.link);
  SymbolTable t;
  t.table = contents(symtab);
  t.strings = NameReader(contents(sections_[symtab.link]));
  // SHN_XINDEX symbols take their section index from SHT_SYMTAB_SHNDX.
  for (const ElfSection& s : sections_)
    if (s.type == kShtSymtabShndx && s.link == symtab.index) t.xindex = contents(s);
  t.count = t.table.size() / kSymSize;
  return t;
}

ElfSymbol ElfFile::SymbolTable::read(uint64_t i) {
  Bytes e = table.sub(i * kSymSize, kSymSize, "symbol");
  ElfSymbol sym;
  sym.index = static_cast<uint32_t>(i);
  uint32_t name = e.u32(0, "st_name");
  if (name != 0) sym.name = strings.read(name, "symbol name");
  sym.info = e.u8(4, "st_info");
  sym.other = e.u8(5, "st_other");
  sym.shndx = e.u16(6, "st_shndx");
  sym.value = e.u64(8, "st_value");
  sym.size = e.u64(16, "st_size");
  if (sym.shndx == kShnXindex && xindex.size() > 0) sym.shndx = xindex.u32(i * 4, "extended section index");
  return sym;
}

std::vector<ElfSymbol> ElfFile::symbols(const ElfSection& symtab) const {
  SymbolTable t = symbol_table(symtab);
  std::vector<ElfSymbol> out;
  out.reserve(t.count > 0 ? t.count - 1 : 0);
  for (uint64_t i = 1; i < t.count; ++i) out.push_back(t.read(i));
  return out;
}

}  // namespace tvmffi_jit::devcode
