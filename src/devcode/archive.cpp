// ar archives (static libraries): members that are host ELF files, cubins or
// fatbins are inspected like stand-alone files.
#include <string>
#include <string_view>

#include "devcode/elf.h"
#include "devcode/walk.h"

namespace tvmffi_jit::devcode {

namespace {

// Longest archive member name accepted (file names are at most 255 bytes on
// Linux file systems; every entry of a member carries its name).
constexpr uint64_t kMaxMemberName = 4096;

// Decimal field of an ar header (digits, then space padding).
uint64_t ar_number(std::string_view field, uint64_t at) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '9'; ++i) {
    if (v > (uint64_t(1) << 50)) fail("archive member at 0x{:x}: size field overflows", at);
    v = v * 10 + uint64_t(field[i] - '0');
  }
  if (i == 0) fail("archive member at 0x{:x}: size field '{}' is not a number", at, field);
  for (; i < field.size(); ++i)
    if (field[i] != ' ') fail("archive member at 0x{:x}: size field '{}' is not a number", at, field);
  return v;
}

}  // namespace

// ar archives (static libraries): every member that is a host ELF, cubin or
// fatbin is scanned like a stand-alone file; entries and images carry the
// member name. GNU (//, /N) and BSD (#1/N) long names are understood.
void inspect_archive(Bytes b, FileReport& r, Run& run) {
  EntryQueue jobs(run);
  FatbinWalk walk{jobs, &r.images, run.file};
  Bytes long_names;
  uint64_t p = 8;
  while (p < b.size()) {
    if (b.data()[p] == '\n') { ++p; continue; }  // padding to an even offset
    Bytes h = b.sub(p, 60, "archive member header");
    if (h.data()[58] != '`' || h.data()[59] != '\n') fail("archive member at 0x{:x}: bad header terminator", p);
    std::string_view name = h.sub(0, 16, "member name").text();
    uint64_t size = ar_number(h.sub(48, 10, "member size").text(), p);
    Bytes data = b.sub(p + 60, size, "archive member");
    uint64_t next = p + 60 + size;
    p = next;
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    std::string member;
    if (name == "/" || name == "/SYM64/" || name == "__.SYMDEF" || name == "__.SYMDEF SORTED") continue;
    if (name == "//") { long_names = data; continue; }
    if (name.size() > 1 && name[0] == '/') {
      uint64_t off = ar_number(name.substr(1), next - size - 60);
      if (off >= long_names.size()) fail("archive member at 0x{:x}: long name offset {} is outside the name table", next - size - 60, off);
      // Looked for within kMaxMemberName bytes: crafted archives point every
      // member at one long name.
      std::string_view rest = long_names.from(off, "long name").text().substr(0, kMaxMemberName + 1);
      member = std::string(rest.substr(0, rest.find('\n')));
    } else if (name.substr(0, 3) == "#1/") {
      uint64_t n = ar_number(name.substr(3), next - size - 60);
      if (n > kMaxMemberName)
        fail("archive member at 0x{:x}: name of {} bytes is longer than {}", next - size - 60, n, kMaxMemberName);
      member = std::string(data.sub(0, n, "BSD member name").text());
      data = data.from(n, "member data");
      member = member.substr(0, member.find('\0'));
    } else {
      member = std::string(name);
    }
    if (member.size() > kMaxMemberName)
      fail("archive member at 0x{:x}: name is longer than {} bytes", next - size - 60, kMaxMemberName);
    if (!member.empty() && member.back() == '/') member.pop_back();
    size_t first_image = r.images.size();
    walk.member = member;
    std::string where = "member " + member + ": ";
    try {
      FileFormat f = detect_format(data.data(), data.size());
      if (f == FileFormat::kHostElf) {
        ElfFile elf(data);
        collect_fatbin_sections(elf, walk, where, r.error);
        if (run.options.scan_data) scan_data_sections(elf, walk, where, r.error);
      } else if (f == FileFormat::kFatbin) {
        walk.walk(data, member);
      } else if (f == FileFormat::kCubin) {
        Job job;
        job.entry.index = walk.next_entry++;
        job.entry.member = member;
        job.entry.kind = EntryKind::kElf;
        job.entry.header_offset = job.entry.payload_offset = data.base();
        job.entry.size = job.entry.decompressed_size = data.size();
        job.stored = data;
        jobs.add(std::move(job));
      }
    } catch (const FormatError& e) {
      if (r.error.empty()) r.error = where + e.what();
    }
    jobs.publish();  // the entries before a structure error
    for (size_t i = first_image; i < r.images.size(); ++i) r.images[i].member = member;
  }
  collect_entries(jobs, run, r.entries, r.error, [](const Entry& e) {
    return fmt::format("member {}: entry {}: {}", e.member, e.index, e.error);
  });
}

}  // namespace tvmffi_jit::devcode
