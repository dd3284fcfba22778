// What the inspector's format walkers share (internal): the per-file run
// state and its limits, the job that carries one entry from the walk to the
// workers, the fatbin container walk, and the entry points of each format.
//   inspect.cpp   the top-level dispatch of a file to its walker
//   walk.cpp      detection, admission and the per-entry work, one blob's walk
//   fatbin.cpp    fatbin containers and entry payloads (LZ4/zstd)
//   host_elf.cpp  host ELF: fatbin sections, data-section scan, TVM FFI symbols, embedded cubins
//   archive.cpp   ar archives
//   scheduler.h   arena, job queue, demangle memo (format-independent)
// Formats: docs/formats.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <zstd.h>

#include "devcode/bytes.h"
#include "devcode/parsers.h"
#include "devcode/scheduler.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/report.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::devcode {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint64_t kEntryHeaderMin = 64;
constexpr uint64_t kFlagLz4 = 0x2000, kFlagZstd = 0x8000;
constexpr uint64_t kFlagArchSpecific = 0x100000, kFlagFamily = 0x200000;
// Seen only on the LTO-IR entries cuFFT 12 keeps in .ldata (12,728 of them):
// with it the payload does not decode as the LZ4 block its flags announce
// (it looks encrypted), and nothing else in those files carries it.
constexpr uint64_t kFlagEncodedPayload = 0x10000;
// Walked pages of the mapping are dropped in batches this large: each drop
// is a TLB shootdown on every core running a worker.
constexpr uint64_t kDropBatchBytes = uint64_t(8) << 20;

struct Job {
  Entry entry;
  Bytes stored;  // exactly the bytes to decompress (or the payload itself)
};

// A number of bytes one file may still spend on something, taken from by the
// thread that walks the file (in file order, so what is refused does not
// depend on the thread count).
struct WalkAllowance {
  uint64_t limit = 0;
  uint64_t left = 0;
  explicit WalkAllowance(uint64_t bytes) : limit(bytes), left(bytes) {}
  bool take(uint64_t bytes) {
    if (bytes > left) return false;
    left -= bytes;
    return true;
  }
};

inline uint64_t saturating_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// InspectOptions' decompression limit for a file of `size` bytes.
inline uint64_t decompression_limit(const InspectOptions& o, uint64_t size) {
  return std::min(std::max(o.decompressed_floor_bytes, saturating_mul(o.max_expansion, size)),
                  o.max_decompressed_total_bytes);
}

// What the workers of one inspect call share.
struct Run {
  const InspectOptions& options;
  // The mapped file the views point into: payloads are pread from it and
  // walked pages are dropped. Null for inspect_bytes (memory of unknown
  // origin: read in place, never dropped).
  const util::MappedFile* file = nullptr;
  uint64_t file_size = 0;
  DecompressArena buffers;
  DemangleMemo names;
  // Limits of the file, whatever its headers claim (hostile input is the
  // normal case): decompressed bytes, entry listings, kernel and variable
  // listings, and the bytes of embedded blobs (which symbols could otherwise
  // point at the same range many times).
  WalkAllowance decompressed;
  WalkAllowance entry_listing;
  ListingBudget kernel_listing;
  WalkAllowance embedded_bytes;
  Run(const InspectOptions& o, const util::MappedFile* f, uint64_t size)
      : options(o),
        file(f),
        file_size(size),
        buffers(o.buffer_budget_bytes),
        decompressed(decompression_limit(o, size)),
        entry_listing(o.listing_floor_bytes + size / 2),
        kernel_listing(o.listing_floor_bytes + size / 2),
        embedded_bytes(size) {}
};

struct ZstdContext {
  ZSTD_DCtx* ctx = nullptr;
  ZstdContext() = default;
  ZstdContext(const ZstdContext&) = delete;
  ~ZstdContext() { ZSTD_freeDCtx(ctx); }
  ZSTD_DCtx* get() {
    if (!ctx) ctx = ZSTD_createDCtx();
    if (!ctx) fail("cannot create a zstd decompression context");
    return ctx;
  }
};

// Rejects decompressed sizes that are lies before anything is allocated for
// them (fatbin.cpp).
void check_decompressed_size(Compression c, uint64_t csize, uint64_t dsize, uint64_t limit);
// Decompresses `src` into `dst` (room for exactly `dsize` bytes, checked by
// check_decompressed_size); returns the view of the result.
Bytes decompress(Compression c, Bytes src, uint64_t dsize, uint8_t* dst, ZstdContext& zstd);

// The queue of one walk: jobs are admitted (admit() in walk.cpp) as they
// are added and processed by the run's workers.
class EntryQueue : public JobQueue<Job, ZstdContext> {
 public:
  explicit EntryQueue(Run& run);
};

// Ends the walk (jobs.finish()) and moves the entries into `entries` in walk
// order; the first entry error becomes `error` unless that is set already,
// as `describe` words it (walk.cpp).
void collect_entries(EntryQueue& jobs, Run& run, std::vector<Entry>& entries, std::string& error,
                     const std::function<std::string(const Entry&)>& describe);

// Walks back-to-back fatbin containers in `region` (zero padding allowed
// between them), appending one job per entry. Throws FormatError for a broken
// structure; the jobs found before the break are kept. When the region is
// part of a mapped file, the pages walked over are dropped behind the walk
// (the workers pread the payloads), so the walk never keeps the whole region
// resident.
struct FatbinWalk {
  EntryQueue& jobs;
  std::vector<DeviceImage>* images;
  const util::MappedFile* file = nullptr;
  std::string member = {};  // ar member being walked, recorded in its entries
  uint32_t next_container = 0;
  uint32_t next_entry = 0;
  const uint8_t* undropped = nullptr;  // first walked byte whose page may still be mapped

  // Drops the walked pages before `upto` once a batch has accumulated (or
  // all of them when `last`).
  void drop_walked(const uint8_t* upto, bool last) {
    if (!file || !undropped || upto <= undropped) return;
    if (!last && uint64_t(upto - undropped) < kDropBatchBytes) return;
    file->release(undropped, upto);
    undropped = upto;
  }

  void walk(Bytes region, const std::string& source);
  void walk_entries(Bytes c, uint32_t container);
};

// Inspects one device-code blob (cubin, fatbin or PTX) into `entries`.
// Returns the first error ("" when valid). (walk.cpp)
std::string inspect_blob(Bytes b, FileFormat format, const std::string& source, Run& run,
                         std::vector<Entry>& entries, std::vector<DeviceImage>* images);
// Whether the text starts (after blank space and comments) with `.version`.
bool looks_like_ptx(const uint8_t* data, size_t size);

// A host ELF file (host_elf.cpp) and an ar archive (archive.cpp).
void inspect_host_elf(Bytes b, FileReport& r, Run& run);
void inspect_archive(Bytes b, FileReport& r, Run& run);
// The fatbin containers of .nv_fatbin/__nv_relfatbin, and (scan_data) of
// the other data sections; errors go to `error` prefixed with `where`.
class ElfFile;
void collect_fatbin_sections(const ElfFile& elf, FatbinWalk& walk, const std::string& where, std::string& error);
void scan_data_sections(const ElfFile& elf, FatbinWalk& walk, const std::string& where, std::string& error);

}  // namespace tvmffi_jit::devcode
