// Fatbin containers: the container/entry walk (handing each entry to the
// workers as it goes) and entry payloads (LZ4/zstd). Layout: docs/formats.md,
// "fatbin".
#include <lz4.h>
#include <zstd.h>

#include <cstring>

#include "devcode/walk.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::devcode {

void check_decompressed_size(Compression c, uint64_t csize, uint64_t dsize, uint64_t limit) {
  if (dsize == 0) fail("compressed entry declares decompressed size 0");
  if (dsize > limit) fail("decompressed size {} exceeds the limit of {} bytes", dsize, limit);
  if (c == Compression::kLz4) {
    // An LZ4 block expands at most ~255x; anything beyond is a lie, not data.
    if (dsize > csize * 255 + 64)
      fail("decompressed size {} is impossible for {} bytes of LZ4 data", dsize, csize);
    if (csize > INT32_MAX || dsize > INT32_MAX) fail("LZ4 entry larger than 2 GiB");
  }
}

Bytes decompress(Compression c, Bytes src, uint64_t dsize, uint8_t* dst, ZstdContext& zstd) {
  if (c == Compression::kLz4) {
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(dst),
                                static_cast<int>(src.size()), static_cast<int>(dsize));
    if (n < 0) fail("corrupt LZ4 data ({} compressed bytes)", src.size());
    if (uint64_t(n) != dsize) fail("LZ4 data decompressed to {} bytes, header says {}", n, dsize);
    return Bytes(dst, dsize);
  }
  if (c == Compression::kZstd) {
    unsigned long long content = ZSTD_getFrameContentSize(src.data(), src.size());
    if (content == ZSTD_CONTENTSIZE_ERROR) fail("payload is not a zstd frame");
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != dsize)
      fail("zstd frame holds {} bytes, header says {}", content, dsize);
    size_t n = ZSTD_decompressDCtx(zstd.get(), dst, dsize, src.data(), src.size());
    if (ZSTD_isError(n)) fail("corrupt zstd data: {}", ZSTD_getErrorName(n));
    if (n != dsize) fail("zstd data decompressed to {} bytes, header says {}", n, dsize);
    return Bytes(dst, dsize);
  }
  fail("unknown compression");
}

namespace {

std::string arch_name(EntryKind kind, uint32_t arch, uint64_t flags) {
  const char* prefix = kind == EntryKind::kPtx ? "compute_" : kind == EntryKind::kLtoIr ? "lto_" : "sm_";
  std::string s = prefix + std::to_string(arch);
  if (flags & kFlagArchSpecific) s += 'a';
  else if (flags & kFlagFamily) s += 'f';
  return s;
}

std::string printable(Bytes b) {
  std::string s(b.text());
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return s;
}

}  // namespace

void FatbinWalk::walk(Bytes region, const std::string& source) {
  undropped = region.data();
  struct DropRest {  // also when a broken structure ends the walk
    FatbinWalk& walk;
    const uint8_t* end;
    ~DropRest() { walk.drop_walked(end, true); }
  } drop_rest{*this, region.data() + region.size()};
  uint64_t p = 0;
  while (p < region.size()) {
    if (region.data()[p] == 0) { ++p; continue; }  // padding between containers
    uint64_t cstart = region.base() + p;
    if (region.size() - p < 16)
      fail("container at 0x{:x}: header truncated ({} bytes before the end at 0x{:x})", cstart,
           region.size() - p, region.base() + region.size());
    uint32_t magic = region.u32(p, "container magic");
    if (magic != kFatbinMagic)
      fail("container at 0x{:x}: bad magic 0x{:08x} (expected 0xba55ed50)", cstart, magic);
    uint64_t hs = region.u16(p + 6, "container header size");
    uint64_t fat = region.u64(p + 8, "container size");
    if (hs < 16 || hs > region.size() - p)
      fail("container at 0x{:x}: header size {} is invalid", cstart, hs);
    if (fat > region.size() - p - hs)
      fail("container at 0x{:x}: size 0x{:x} runs past the end of its data at 0x{:x}", cstart, fat,
           region.base() + region.size());
    Bytes container = region.sub(p + hs, fat, "container");
    uint32_t number = next_container++;
    if (images) images->push_back(DeviceImage{source, FileFormat::kFatbin, cstart, hs + fat, {}});
    walk_entries(container, number);
    jobs.publish();
    p += hs + fat;
  }
}


void FatbinWalk::walk_entries(Bytes c, uint32_t container) {
  uint64_t q = 0;
  uint64_t cend = c.base() + c.size();
  while (q < c.size()) {
    drop_walked(c.data() + q, false);
    uint32_t index = next_entry++;
    uint64_t at = c.base() + q;
    uint64_t left = c.size() - q;
    if (left < kEntryHeaderMin)
      fail("entry {}: header at 0x{:x} truncated by container end at 0x{:x}", index, at, cend);
    Bytes h = c.sub(q, left, "entry");
    uint16_t kind = h.u16(0, "entry kind");
    uint64_t header_size = h.u32(4, "entry header size");
    uint64_t size = h.u64(8, "entry size");
    uint64_t csize = h.u32(16, "entry compressed size");
    uint32_t options_offset = h.u32(20, "entry options offset");
    uint16_t minor = h.u16(24, "entry minor"), major = h.u16(26, "entry major");
    uint32_t arch = h.u32(28, "entry arch");
    uint32_t id_offset = h.u32(32, "entry identifier offset"), id_len = h.u32(36, "entry identifier size");
    uint64_t flags = h.u64(40, "entry flags");
    uint64_t dsize = h.u64(56, "entry decompressed size");
    if (header_size < kEntryHeaderMin)
      fail("entry {}: header size {} at 0x{:x} is smaller than 64", index, header_size, at);
    if (header_size > left)
      fail("entry {}: header size {} exceeds container end at 0x{:x}", index, header_size, cend);
    if (size > left - header_size)
      fail("entry {}: payload size {} exceeds container end at 0x{:x}", index, size, cend);
    Job job;
    Entry& e = job.entry;
    e.index = index;
    e.container = container;
    e.member = member;
    e.kind = kind == 1 ? EntryKind::kPtx : kind == 2 ? EntryKind::kElf : kind == 8 ? EntryKind::kLtoIr
                                                                                : EntryKind::kUnknown;
    e.arch = arch_name(e.kind, arch, flags);
    if (e.kind == EntryKind::kPtx) e.ptx_version = std::to_string(major) + "." + std::to_string(minor);
    else e.code_version = std::to_string(major) + "." + std::to_string(minor);
    e.flags = flags;
    e.header_offset = at;
    e.payload_offset = at + header_size;
    bool lz4 = flags & kFlagLz4, zstd = flags & kFlagZstd;
    if (csize != 0 && (lz4 || zstd)) {
      e.compression = lz4 && zstd ? Compression::kUnknown : lz4 ? Compression::kLz4 : Compression::kZstd;
      if (csize > left - header_size)
        fail("entry {}: compressed size {} exceeds container end at 0x{:x}", index, csize, cend);
      if (csize > size)
        fail("entry {}: compressed size {} exceeds its stored size {}", index, csize, size);
      e.size = csize;
      e.decompressed_size = dsize;
    } else {
      e.size = size;
      e.decompressed_size = size;
    }
    job.stored = h.sub(header_size, e.size, "entry payload");
    if (options_offset != 0) {
      uint32_t off = h.u32(options_offset, "entry options"), len = h.u32(uint64_t(options_offset) + 4, "entry options");
      Bytes opts = h.sub(off, len, "entry options");
      if (e.kind == EntryKind::kPtx || e.kind == EntryKind::kLtoIr) e.options = printable(opts);
    }
    if (id_offset != 0 && id_len != 0) e.identifier = printable(h.sub(id_offset, id_len, "entry identifier"));
    jobs.add(std::move(job));
    q += header_size + size;
  }
}

std::vector<uint8_t> entry_payload(const uint8_t* file, size_t file_size, const Entry& entry,
                                   uint64_t max_entry_bytes) {
  try {
    Bytes stored = Bytes(file, file_size).sub(entry.payload_offset, entry.size, "entry payload");
    if (entry.compression == Compression::kNone) return std::vector<uint8_t>(stored.data(), stored.data() + stored.size());
    check_decompressed_size(entry.compression, stored.size(), entry.decompressed_size, max_entry_bytes);
    if (entry.compression == Compression::kUnknown) fail("unknown compression");
    std::vector<uint8_t> out(entry.decompressed_size);
    ZstdContext zstd;
    decompress(entry.compression, stored, entry.decompressed_size, out.data(), zstd);
    return out;
  } catch (const FormatError& e) {
    throw invalid_error(fmt::format("entry {}: {}", entry.index, e.what()));
  }
}

}  // namespace tvmffi_jit::devcode
