// The decompression floor for `inspect` on a host ELF: walk every fatbin
// container of .nv_fatbin and zstd/LZ4-decompress every ELF entry, doing
// nothing else (no cubin parsing, no output). `inspect` cannot be faster than
// this single-threaded; bench/inspect/run.sh reports inspect's time as a
// ratio of it. Deliberately minimal and independent of the tvmffi-jit
// parsers (it trusts the file: benchmark input only).
//
//   floor FILE  -> prints "entries=<n> decompressed_bytes=<n>"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <lz4.h>
#include <zstd.h>

namespace {
template <typename T>
T rd(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: floor FILE\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  size_t size = st.st_size;
  auto* base = static_cast<const uint8_t*>(mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0));
  if (base == MAP_FAILED) return 1;
  uint64_t shoff = rd<uint64_t>(base + 40);
  uint16_t shnum = rd<uint16_t>(base + 60), shstrndx = rd<uint16_t>(base + 62);
  const uint8_t* sh = base + shoff;
  const char* names = reinterpret_cast<const char*>(base + rd<uint64_t>(sh + shstrndx * 64 + 24));
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::unique_ptr<uint8_t[]> buf;
  uint64_t cap = 0, entries = 0, total = 0;
  for (unsigned i = 0; i < shnum; ++i) {
    const uint8_t* h = sh + i * 64;
    if (std::strcmp(names + rd<uint32_t>(h), ".nv_fatbin") != 0) continue;
    const uint8_t* p = base + rd<uint64_t>(h + 24);
    const uint8_t* end = p + rd<uint64_t>(h + 32);
    while (p + 16 <= end) {
      if (rd<uint32_t>(p) != 0xBA55ED50) { p += 8; continue; }
      const uint8_t* e = p + rd<uint16_t>(p + 6);
      const uint8_t* cend = e + rd<uint64_t>(p + 8);
      for (; e < cend; e += rd<uint32_t>(e + 4) + rd<uint64_t>(e + 8)) {
        if (rd<uint16_t>(e) != 2) continue;  // ELF entries only
        uint64_t flags = rd<uint64_t>(e + 40), csize = rd<uint32_t>(e + 16), dsize = rd<uint64_t>(e + 56);
        if (csize == 0) continue;
        if (dsize > cap) buf.reset(new uint8_t[cap = dsize]);
        const uint8_t* src = e + rd<uint32_t>(e + 4);
        size_t n = (flags & 0x8000) ? ZSTD_decompressDCtx(dctx, buf.get(), dsize, src, csize)
                                    : size_t(LZ4_decompress_safe(reinterpret_cast<const char*>(src),
                                                                 reinterpret_cast<char*>(buf.get()), int(csize), int(dsize)));
        if (n != dsize) {
          std::fprintf(stderr, "decompression failed at 0x%zx\n", size_t(e - base));
          return 1;
        }
        ++entries;
        total += dsize;
      }
      p = cend;
    }
  }
  std::printf("entries=%llu decompressed_bytes=%llu\n", (unsigned long long)entries, (unsigned long long)total);
  ZSTD_freeDCtx(dctx);
  return 0;
}
