// A small bounds-checked ELF64 little-endian reader: just enough for cubins
// (EM_CUDA) and for finding sections and symbols in host ELF files. The
// constructor validates the header and the section table (every non-NOBITS
// section inside the file, names inside .shstrtab); symbol tables are checked
// when read.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "devcode/bytes.h"

namespace tvmffi_jit::devcode {

constexpr uint16_t kEmCuda = 190;
constexpr uint32_t kShtNobits = 8;
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtDynsym = 11;
constexpr uint32_t kShtNote = 7;

// Sections without bytes in the file: SHT_NOBITS, and the CUDA types that
// ET_REL cubins use instead of it for .nv.global (0x70000007), .nv.local.*
// (0x70000009), .nv.shared.* (0x7000000a) and .nv.shared.reserved.* (0x70000015).
inline bool has_file_data(uint32_t type) {
  return type != kShtNobits && type != 0x70000007 && type != 0x70000009 && type != 0x7000000a &&
         type != 0x70000015;
}

// Reads NUL-terminated names out of a string table, at most a few times the
// table's size in all: every name costs a scan to its NUL, and crafted tables
// point thousands of entries at one long string (quadratic time otherwise).
// Linkers share tails of names, so real tables read back somewhat more than
// their size, never several times it.
class NameReader {
 public:
  NameReader() = default;
  explicit NameReader(Bytes strings) : strings_(strings), left_(strings.size() * 4 + (uint64_t(1) << 20)) {}
  std::string_view read(uint64_t offset, const char* what) {
    std::string_view s = strings_.cstr(offset, what);
    if (s.size() + 1 > left_)
      fail("{} at 0x{:x}: the names read from this string table (0x{:x} bytes) add up to more than 4 times its size",
           what, strings_.base() + offset, strings_.size());
    left_ -= s.size() + 1;
    return s;
  }

 private:
  Bytes strings_;
  uint64_t left_ = 0;
};

struct ElfSection {
  uint32_t index = 0;
  std::string_view name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t entsize = 0;
};

struct ElfSymbol {
  uint32_t index = 0;
  std::string_view name;
  uint8_t info = 0;
  uint8_t other = 0;
  uint32_t shndx = 0;  // extended indices resolved
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type() const { return info & 0xf; }
  uint8_t bind() const { return info >> 4; }
};

class ElfFile {
 public:
  // Throws FormatError when the header or section table is malformed.
  explicit ElfFile(Bytes bytes);

  Bytes bytes() const { return bytes_; }
  uint16_t type() const { return type_; }
  uint16_t machine() const { return machine_; }
  uint32_t flags() const { return flags_; }
  uint8_t osabi() const { return osabi_; }
  uint8_t abi_version() const { return abi_version_; }
  const std::vector<ElfSection>& sections() const { return sections_; }
  const ElfSection* find_section(std::string_view name) const;
  // Contents of a section (empty view for NOBITS).
  Bytes contents(const ElfSection& s) const;
  // Symbols of a SYMTAB/DYNSYM section (entry 0 skipped).
  std::vector<ElfSymbol> symbols(const ElfSection& symtab) const;
  // The same symbols, one at a time, without a vector of them all (a
  // symbol table costs 24 bytes per symbol in the file and twice that as
  // ElfSymbols: callers that keep a few of them use this).
  template <typename F>
  void for_each_symbol(const ElfSection& symtab, F&& visit) const {
    SymbolTable t = symbol_table(symtab);
    for (uint64_t i = 1; i < t.count; ++i) visit(t.read(i));
  }

 private:
  struct SymbolTable {
    Bytes table, xindex;
    NameReader strings;
    uint64_t count = 0;
    ElfSymbol read(uint64_t i);
  };
  SymbolTable symbol_table(const ElfSection& symtab) const;

  Bytes bytes_;
  uint16_t type_ = 0, machine_ = 0;
  uint32_t flags_ = 0;
  uint8_t osabi_ = 0, abi_version_ = 0;
  std::vector<ElfSection> sections_;
};

bool is_elf(const uint8_t* data, size_t size);
uint16_t elf_machine(const uint8_t* data, size_t size);  // 0 when not readable

}  // namespace tvmffi_jit::devcode
