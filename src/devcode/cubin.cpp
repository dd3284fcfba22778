// Cubin (CUDA ELF) parsing: kernels, their resources and module globals.
// Layout facts: docs/formats.md, "cubin" and ".nv.info".
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <cxxabi.h>
#include <cstdlib>

#include "devcode/elf.h"
#include "devcode/parsers.h"

namespace tvmffi_jit::devcode {

namespace {

constexpr uint32_t kShtCudaInfo = 0x70000000;
// ET_REL cubins give variables type 13 (STT_LOPROC, "CUDA object").
constexpr uint8_t kSttObject = 1, kSttFunc = 2, kSttCudaObject = 13;
constexpr uint8_t kStoCudaEntry = 0x10, kStoCudaManaged = 0x04;

// EIATTR_* codes used here (docs/formats.md, ".nv.info records").
enum : uint8_t {
  kAttrMaxThreads = 0x05,
  kAttrReqntid = 0x10,
  kAttrFrameSize = 0x11,
  kAttrMinStackSize = 0x12,
  kAttrKparamInfo = 0x17,
  kAttrCbankParamSize = 0x19,
  kAttrMaxregCount = 0x1b,
  kAttrRegcount = 0x2f,
  kAttrCtaPerCluster = 0x3d,
  kAttrExplicitCluster = 0x3e,
};
enum : uint8_t { kFmtNval = 1, kFmtBval = 2, kFmtHval = 3, kFmtSval = 4 };
constexpr uint8_t kCompatAcceleratorTarget = 0x09;

struct InfoRecord {
  uint8_t format;
  uint8_t attr;
  uint32_t value;  // BVAL/HVAL value
  Bytes data;      // SVAL payload
};

// Walks .nv.info-style records (also .nv.compat): 4-byte header, SVAL payloads.
template <typename F>
void for_each_record(Bytes section, const char* what, F&& visit) {
  uint64_t off = 0;
  while (off < section.size()) {
    if (section.size() - off < 4)
      fail("{} record at 0x{:x} truncated ({} bytes left)", what, section.base() + off, section.size() - off);
    InfoRecord r{section.u8(off, what), section.u8(off + 1, what), 0, {}};
    uint64_t len = 4;
    switch (r.format) {
      case kFmtNval: break;
      case kFmtBval: r.value = section.u8(off + 2, what); break;
      case kFmtHval: r.value = section.u16(off + 2, what); break;
      case kFmtSval: {
        uint16_t n = section.u16(off + 2, what);
        r.data = section.sub(off + 4, n, what);
        len += n;
        break;
      }
      default:
        fail("{} record at 0x{:x} has unknown format 0x{:x}", what, section.base() + off, r.format);
    }
    visit(r);
    off += len;
  }
}

Dim3 read_dim3(const InfoRecord& r, const char* what) {
  if (r.data.size() < 12) fail("{} record has {} bytes (expected 12)", what, r.data.size());
  return Dim3{r.data.u32(0, what), r.data.u32(4, what), r.data.u32(8, what)};
}

// Strings of .note.nv.tkinfo / .note.nv.cuinfo (docs/formats.md, "Notes").
void read_notes(const ElfFile& elf, const ElfSection& s, Entry& entry) {
  Bytes b = elf.contents(s);
  uint64_t off = 0;
  while (b.size() - off >= 12) {
    uint32_t namesz = b.u32(off, "note namesz"), descsz = b.u32(off + 4, "note descsz");
    uint32_t type = b.u32(off + 8, "note type");
    uint64_t desc_off = off + 12 + align_up(namesz, 4);
    Bytes desc = b.sub(desc_off, descsz, "note descriptor");
    if (type == 1000 && desc.size() >= 8) {  // cuinfo {u16 version, u16 virtual sm, u32 toolkit}
      uint16_t vsm = desc.u16(2, "cuinfo virtual sm");
      uint32_t tk = desc.u32(4, "cuinfo toolkit");
      entry.virtual_arch = "compute_" + std::to_string(vsm);
      entry.toolkit = std::to_string(tk / 10) + "." + std::to_string(tk % 10);
    } else if (type == 2000 && desc.size() >= 24) {  // tkinfo: offsets into the strings after 24 bytes
      Bytes strings = desc.from(24, "tkinfo strings");
      uint32_t cmd = desc.u32(20, "tkinfo command line offset");
      if (cmd < strings.size()) entry.ptxas_options = std::string(strings.cstr(cmd, "tkinfo command line"));
    }
    off = desc_off + align_up(descsz, 4);
    if (off > b.size()) break;
  }
}

// "-arch sm_100f" in the ptxas command line: the only place a stand-alone
// cubin records the f suffix.
std::string arch_from_ptxas_options(std::string_view cmd) {
  size_t p = cmd.find("-arch ");
  if (p == std::string_view::npos) p = cmd.find("-arch=");
  if (p == std::string_view::npos) return {};
  std::string_view rest = cmd.substr(p + 6);  // both spellings are 6 characters
  std::string_view arch = rest.substr(0, rest.find(' '));
  if (arch.substr(0, 3) != "sm_") return {};
  return std::string(arch);
}

std::optional<uint32_t> bank_of(std::string_view name) {
  constexpr std::string_view prefix = ".nv.constant";
  if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size() || name.size() > prefix.size() + 2)
    return std::nullopt;
  uint32_t bank = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    bank = bank * 10 + (c - '0');
  }
  return bank;
}

// The sections named after a kernel, found by the kernel's name: one hash
// lookup per kernel and no key strings to build (a map of every section by
// full name, looked up four times per kernel, was most of the parse time).
struct KernelSections {
  const ElfSection* shared = nullptr;  // .nv.shared.<k>
  const ElfSection* local = nullptr;   // .nv.local.<k>
  const ElfSection* const0 = nullptr;  // .nv.constant0.<k>
  const ElfSection* info = nullptr;    // .nv.info.<k>
};

// The sections the symbol walk reads, found in one pass over the section table.
struct CubinSections {
  std::unordered_map<std::string_view, KernelSections> by_kernel;
  std::unordered_map<uint32_t, const ElfSection*> info_by_text;  // .nv.info.<k> by sh_info
  const ElfSection* symtab = nullptr;
  const ElfSection* module_info = nullptr;  // .nv.info
  bool accelerator_target = false;          // .nv.compat says so

  void note_kernel_section(const ElfSection& s) {
    static constexpr std::pair<std::string_view, const ElfSection* KernelSections::*> kPrefixes[] = {
        {".nv.shared.", &KernelSections::shared},
        {".nv.local.", &KernelSections::local},
        {".nv.constant0.", &KernelSections::const0},
        {".nv.info.", &KernelSections::info},
    };
    for (auto [prefix, member] : kPrefixes) {
      if (s.name.size() < prefix.size() || s.name.compare(0, prefix.size(), prefix) != 0) continue;
      const ElfSection*& slot = by_kernel[s.name.substr(prefix.size())].*member;
      if (!slot) slot = &s;  // the first section of a name wins, as in a lookup by name
      return;
    }
  }
  // The .nv.info.<k> of a kernel: by name, else the one whose sh_info is its .text.
  const ElfSection* info_of(const KernelSections& named, uint32_t text_index) const {
    if (named.info) return named.info;
    auto it = info_by_text.find(text_index);
    return it != info_by_text.end() ? it->second : nullptr;
  }
};

void read_elf_header(const ElfFile& elf, Entry& entry) {
  entry.elf_type = elf.type() == 1 ? "rel" : elf.type() == 2 ? "exec" : "type " + std::to_string(elf.type());
  entry.elf_abi_version = elf.abi_version();
  entry.elf_flags = elf.flags();
}

// One pass over the section table: indexes what the symbol walk needs and
// reads what the module's own sections say (notes, global and constant sizes).
CubinSections walk_sections(const ElfFile& elf, Entry& entry) {
  CubinSections found;
  for (const ElfSection& s : elf.sections()) {
    if (s.index == 0) continue;
    if (s.name.size() > 4 && s.name[0] == '.' && s.name[1] == 'n' && s.name[2] == 'v') found.note_kernel_section(s);
    if (s.type == kShtSymtab && !found.symtab) found.symtab = &s;
    if (s.type == kShtCudaInfo) {
      if (s.name == ".nv.info") found.module_info = &s;
      else found.info_by_text.emplace(s.info, &s);
    }
    if (s.type == kShtNote) read_notes(elf, s, entry);
    if (s.name == ".nv.compat") {
      for_each_record(elf.contents(s), ".nv.compat", [&](const InfoRecord& r) {
        if (r.attr == kCompatAcceleratorTarget && r.format == kFmtBval && r.value == 1) found.accelerator_target = true;
      });
    }
    if (s.name == ".nv.global" || s.name == ".nv.global.init") entry.global_bytes += s.size;
    if (auto bank = bank_of(s.name); bank && *bank > 0) entry.constant_banks.emplace_back(*bank, s.size);
  }
  return found;
}

// The SM the cubin is for: the ptxas command line's -arch when it names the
// same SM (it alone keeps an f suffix), else e_flags' SM and the a suffix.
std::string cubin_arch(const ElfFile& elf, bool accelerator_target, std::string_view ptxas_options) {
  // e_flags SM: ABI 8 keeps it in bits 8-15, ABI 7 in bits 0-7 (docs/formats.md, "Cubin").
  uint32_t sm = elf.abi_version() >= 8 ? (elf.flags() >> 8) & 0xff : elf.flags() & 0xff;
  bool accel = (elf.abi_version() < 8 && (elf.flags() & 0x800)) || accelerator_target;
  std::string from_cmd = arch_from_ptxas_options(ptxas_options);
  if (!from_cmd.empty() && from_cmd.find(std::to_string(sm)) != std::string::npos) return from_cmd;
  return "sm_" + std::to_string(sm) + (accel ? "a" : "");
}

// What a kernel's .nv.info section says.
struct InfoFigures {
  std::optional<Dim3> max_ntid, req_ntid, cluster_dims;
  bool explicit_cluster = false;
  std::optional<uint32_t> max_registers, param_bytes;
  uint32_t param_count = 0;
};

InfoFigures read_info_figures(const ElfFile& elf, const ElfSection& info) {
  InfoFigures f;
  uint32_t param_end = 0;
  bool have_size = false;
  for_each_record(elf.contents(info), info.name.data(), [&](const InfoRecord& r) {
    switch (r.attr) {
      case kAttrMaxThreads: if (r.format == kFmtSval) f.max_ntid = read_dim3(r, "MAX_THREADS"); break;
      case kAttrReqntid: if (r.format == kFmtSval) f.req_ntid = read_dim3(r, "REQNTID"); break;
      case kAttrCtaPerCluster: if (r.format == kFmtSval) f.cluster_dims = read_dim3(r, "CTA_PER_CLUSTER"); break;
      case kAttrExplicitCluster: f.explicit_cluster = true; break;
      case kAttrMaxregCount:
        if (r.format == kFmtHval && r.value != 0xff) f.max_registers = r.value;
        break;
      case kAttrCbankParamSize:
        if (r.format == kFmtHval) { f.param_bytes = r.value; have_size = true; }
        break;
      case kAttrKparamInfo:
        if (r.format == kFmtSval && r.data.size() >= 12) {
          ++f.param_count;
          uint32_t offset = r.data.u16(6, "KPARAM_INFO offset");
          uint32_t tmp = r.data.u32(8, "KPARAM_INFO flags");
          uint32_t end = offset + (tmp >> 18);
          if (end > param_end) param_end = end;
        }
        break;
      default: break;  // unknown attributes are skipped by design
    }
  });
  if (!have_size) f.param_bytes = param_end;
  return f;
}

// Each .nv.info section's figures, read once: crafted cubins point many
// kernels at one large section.
class InfoFiguresMemo {
 public:
  explicit InfoFiguresMemo(const ElfFile& elf) : elf_(elf), figures_of_section_(elf.sections().size(), -1) {}
  InfoFigures figures_of(const ElfSection& info) {  // a copy: `figures_` may grow
    int32_t& slot = figures_of_section_[info.index];
    if (slot >= 0) return figures_[slot];
    InfoFigures f = read_info_figures(elf_, info);
    slot = static_cast<int32_t>(figures_.size());
    figures_.push_back(f);
    return f;
  }

 private:
  const ElfFile& elf_;
  std::vector<int32_t> figures_of_section_;  // index into `figures_`
  std::vector<InfoFigures> figures_;
};

Kernel kernel_from_symbol(const ElfSymbol& sym, const ElfFile& elf, const CubinSections& found,
                          InfoFiguresMemo& infos) {
  Kernel k;
  k.name = std::string(sym.name);
  k.demangled = k.name;  // demangled after parsing, once per distinct name
  k.code_bytes = sym.size;
  KernelSections named;
  if (auto it = found.by_kernel.find(sym.name); it != found.by_kernel.end()) named = it->second;
  k.shared_bytes = named.shared ? named.shared->size : 0;
  k.local_bytes = named.local ? named.local->size : 0;
  if (named.const0) k.const0_bytes = named.const0->size;
  k.stack_bytes = 0;
  // sm_75 builds without REGCOUNT keep the register count in the top byte
  // of the .text section's sh_info (docs/formats.md); REGCOUNT overrides it later.
  const ElfSection& text = elf.sections()[sym.shndx];
  if (text.info >> 24) k.registers = text.info >> 24;
  if (const ElfSection* info = found.info_of(named, sym.shndx)) {
    InfoFigures f = infos.figures_of(*info);
    k.max_ntid = f.max_ntid;
    k.req_ntid = f.req_ntid;
    k.cluster_dims = f.cluster_dims;
    k.explicit_cluster = f.explicit_cluster;
    k.max_registers = f.max_registers;
    k.param_bytes = f.param_bytes;
    k.param_count = f.param_count;
  }
  if (k.max_ntid) k.max_threads = k.max_ntid->product();
  else if (k.req_ntid) k.max_threads = k.req_ntid->product();
  return k;
}

// The space of a module-scope variable's symbol, or null when it is none the
// report lists.
const char* global_space(const ElfSymbol& sym, const ElfFile& elf) {
  if (sym.name.empty() || sym.name[0] == '$' || sym.name[0] == '.') return nullptr;
  std::string_view sec = elf.sections()[sym.shndx].name;
  if (sec == ".nv.global" || sec == ".nv.global.init") return (sym.other & kStoCudaManaged) ? "managed" : "global";
  if (bank_of(sec).value_or(0) > 0) return "constant";
  return nullptr;
}

// The kernels and module globals of the symbol table; returns the index in
// entry.kernels of each symbol that is a kernel (-1 for the others).
std::vector<int32_t> read_symbols(const ElfFile& elf, const CubinSections& found, Entry& entry,
                                  ListingBudget& listing) {
  InfoFiguresMemo infos(elf);
  std::vector<int32_t> kernel_of_symbol(found.symtab->size / 24 + 1, -1);  // 4 bytes per 24-byte symbol
  elf.for_each_symbol(*found.symtab, [&](const ElfSymbol& sym) {
    bool defined = sym.shndx != 0 && sym.shndx < elf.sections().size();
    if (sym.type() == kSttFunc && (sym.other & kStoCudaEntry) && defined) {
      listing.take(ListingBudget::kernel_cost(sym.name));
      Kernel k = kernel_from_symbol(sym, elf, found, infos);
      kernel_of_symbol[sym.index] = static_cast<int32_t>(entry.kernels.size());
      entry.kernels.push_back(std::move(k));
    } else if ((sym.type() == kSttObject || sym.type() == kSttCudaObject) && defined) {
      if (const char* space = global_space(sym, elf)) {
        listing.take(ListingBudget::global_cost(sym.name));
        entry.globals.push_back(Global{std::string(sym.name), space, sym.size});
      }
    }
  });
  return kernel_of_symbol;
}

// The module-level .nv.info: registers and stack sizes of the kernels.
void read_module_info(const ElfFile& elf, const ElfSection& module_info, const std::vector<int32_t>& kernel_of_symbol,
                      Entry& entry) {
  for_each_record(elf.contents(module_info), ".nv.info", [&](const InfoRecord& r) {
    if (r.format != kFmtSval || r.data.size() < 8) return;
    if (r.attr != kAttrRegcount && r.attr != kAttrFrameSize && r.attr != kAttrMinStackSize) return;
    uint32_t sym = r.data.u32(0, ".nv.info symbol"), value = r.data.u32(4, ".nv.info value");
    if (sym >= kernel_of_symbol.size() || kernel_of_symbol[sym] < 0) return;  // device functions
    Kernel& k = entry.kernels[kernel_of_symbol[sym]];
    if (r.attr == kAttrRegcount) k.registers = value;
    else if (r.attr == kAttrFrameSize) k.stack_bytes = value;
    else k.min_stack_bytes = value;
  });
}

}  // namespace

void parse_cubin(Bytes bytes, const InspectOptions& options, Entry& entry, ListingBudget& listing) {
  ElfFile elf(bytes);
  if (elf.machine() != kEmCuda) fail("ELF machine {} is not EM_CUDA (190)", elf.machine());
  read_elf_header(elf, entry);
  const CubinSections found = walk_sections(elf, entry);
  if (entry.arch.empty()) entry.arch = cubin_arch(elf, found.accelerator_target, entry.ptxas_options);
  if (!found.symtab) return;  // a cubin without symbols has no kernels to list
  const std::vector<int32_t> kernel_of_symbol = read_symbols(elf, found, entry, listing);
  if (found.module_info) read_module_info(elf, *found.module_info, kernel_of_symbol, entry);
}

std::string demangle(std::string_view name) {
  // Only Itanium names, and not absurdly long ones (the demangler recurses).
  if (name.size() < 3 || name.substr(0, 2) != "_Z" || name.size() > 16384) return std::string(name);
  std::string z(name);
  int status = 0;
  char* out = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) {
    std::free(out);
    return z;
  }
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace tvmffi_jit::devcode
