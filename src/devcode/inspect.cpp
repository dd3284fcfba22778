// The inspector: format sniffing, the fatbin container walk, host ELF and
// TVM FFI module scanning, and the parallel decompress+parse of entries.
//
// Peak memory depends neither on the thread count nor on the file size:
//  * a file inspected by path has its entry payloads read with pread, and the
//    pages of the mapping that the container walk touched are dropped behind
//    it, so the mapping keeps only headers and symbol tables resident;
//  * each entry is decompressed into a range of one arena that all workers
//    share (InspectOptions::buffer_budget_bytes); a worker whose entry does
//    not fit waits until others return theirs;
//  * only the extracted metadata is kept.
// Time: the walk hands entries to the workers as it goes, and the workers
// also demangle (each distinct name once), so little is left on one thread.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <lz4.h>
#include <zstd.h>

#include "devcode/elf.h"
#include "devcode/parsers.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::devcode {

const char* to_string(FileFormat f) {
  switch (f) {
    case FileFormat::kCubin: return "cubin";
    case FileFormat::kFatbin: return "fatbin";
    case FileFormat::kPtx: return "ptx";
    case FileFormat::kHostElf: return "host-elf";
    case FileFormat::kArchive: return "archive";
    default: return "unknown";
  }
}
const char* to_string(EntryKind k) {
  switch (k) {
    case EntryKind::kElf: return "elf";
    case EntryKind::kPtx: return "ptx";
    case EntryKind::kLtoIr: return "ltoir";
    default: return "unknown";
  }
}
const char* to_string(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kLz4: return "lz4";
    case Compression::kZstd: return "zstd";
    default: return "unknown";
  }
}

size_t FileReport::kernel_count() const {
  size_t n = 0;
  for (const Entry& e : entries) n += e.kernels.size();
  for (const EmbeddedCubin& c : embedded_cubins)
    for (const Entry& e : c.entries) n += e.kernels.size();
  return n;
}

namespace {

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

// Decompression memory shared by the workers of one inspect call: one
// mapping of `budget` bytes, handed out as ranges sized to each entry (first
// fit; freed ranges coalesce). Pages once touched stay mapped and are reused,
// so a run faults in at most the budget: on many threads, fresh per-entry
// buffers cost more in page faults than the parsing. A request that does not
// fit waits for ranges to come back; one larger than the whole budget gets a
// mapping of its own when nothing else is in use, so every entry below
// max_entry_bytes can still be inspected. Each worker holds at most one range
// and waits only while holding none, so every waiter is woken by a worker
// that is running. A release wakes only the waiters that the freed space can
// serve (with many threads, waking them all cost more than the waiting).
class DecompressArena {
 public:
  struct Range {
    uint8_t* data = nullptr;
    uint64_t offset = 0;
    uint64_t size = 0;
    bool own_mapping = false;  // larger than the arena
  };

  explicit DecompressArena(uint64_t budget)
      : budget_(align_up(std::clamp<uint64_t>(budget, kGranule, kMaxBudget), kGranule)) {
    free_.emplace(0, budget_);
  }
  DecompressArena(const DecompressArena&) = delete;
  ~DecompressArena() {
    if (base_) ::munmap(base_, budget_);
  }

  Range acquire(uint64_t n) {
    uint64_t size = align_up(std::max<uint64_t>(n, 1), kGranule);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!base_) {  // reserved on first use; costs nothing until touched
      void* p = ::mmap(nullptr, budget_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      base_ = static_cast<uint8_t*>(p);
    }
    for (;;) {
      if (size > budget_ && in_use_ == 0) {
        void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        ++in_use_;
        return Range{static_cast<uint8_t*>(p), 0, size, true};
      }
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < size) continue;
        Range r{base_ + it->first, it->first, size, false};
        if (it->second > size) free_.emplace(it->first + size, it->second - size);
        free_.erase(it);
        ++in_use_;
        return r;
      }
      Waiter self{size, {}, false};
      waiters_.push_back(&self);
      self.wake.wait(lock, [&] { return self.woken; });
    }
  }

  void release(const Range& r) {
    if (r.own_mapping) ::munmap(r.data, r.size);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --in_use_;
      if (!r.own_mapping) {
        auto it = free_.emplace(r.offset, r.size).first;
        if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
          it->second += next->second;
          free_.erase(next);
        }
        if (it != free_.begin()) {
          auto prev = std::prev(it);
          if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
          }
        }
      }
      wake_waiters();
    }
  }

  // Gives the pages of the free ranges back to the system. Each worker calls
  // it when the queue is empty, so the pages are freed while the last entries
  // are still being parsed rather than one by one at the end. Under the lock:
  // a range must not be handed out while its pages are being dropped.
  void trim() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!base_) return;
    for (auto [offset, size] : free_) ::madvise(base_ + offset, size, MADV_DONTNEED);
  }

 private:
  static constexpr uint64_t kGranule = uint64_t(64) << 10;
  static constexpr uint64_t kMaxBudget = uint64_t(1) << 40;  // address space reserved, not memory

  struct Waiter {
    uint64_t size;
    std::condition_variable wake;
    bool woken = false;
  };

  // Wakes, in arrival order, the waiters that a first fit over the free
  // ranges would serve (all of them once nothing is in use: one may be larger
  // than the arena). A woken waiter that loses its range to a newcomer waits
  // again. Called with the lock held.
  void wake_waiters() {
    std::vector<uint64_t> room;
    for (const auto& [offset, size] : free_) room.push_back(size);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      Waiter& w = **it;
      auto fit = std::find_if(room.begin(), room.end(), [&](uint64_t r) { return r >= w.size; });
      if (fit == room.end() && in_use_ > 0) {
        ++it;
        continue;
      }
      if (fit != room.end()) *fit -= w.size;
      w.woken = true;
      w.wake.notify_one();
      it = waiters_.erase(it);
    }
  }

  std::mutex mutex_;
  std::vector<Waiter*> waiters_;  // on the stacks of the waiting threads
  uint8_t* base_ = nullptr;
  uint64_t budget_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, disjoint and coalesced
  size_t in_use_ = 0;
};

// An arena range for the lifetime of one entry.
class Lease {
 public:
  Lease(DecompressArena& arena, uint64_t n) : arena_(arena), range_(arena.acquire(n)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { arena_.release(range_); }
  uint8_t* data() const { return range_.data; }

 private:
  DecompressArena& arena_;
  DecompressArena::Range range_;
};

// Libraries repeat kernel names across architectures (libcublasLt: 42,200
// kernels, 14,871 names), so each distinct name is demangled once, by the
// worker that meets it first. The memo holds no copies: it points at the name
// and demangled text of the first kernel that had the name, which stay put
// (and unchanged) while the workers run, since a job's kernels are final when
// they are recorded. Sharded so that workers rarely wait for each other; the
// demangler is pure, so a name demangled twice by a race gives the same text.
class DemangleMemo {
 public:
  void demangle_into(Kernel& k) {
    Shard& shard = shards_[std::hash<std::string_view>{}(k.name) % shards_.size()];
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      auto it = shard.names.find(k.name);
      if (it != shard.names.end()) {
        k.demangled = *it->second;
        return;
      }
    }
    k.demangled = demangle(k.name);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.names.emplace(k.name, &k.demangled);
  }

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string_view, const std::string*> names;
  };
  std::array<Shard, 64> shards_;
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

uint64_t saturating_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// InspectOptions' decompression limit for a file of `size` bytes.
uint64_t decompression_limit(const InspectOptions& o, uint64_t size) {
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

// Rejects decompressed sizes that are lies before anything is allocated for them.
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

// Decompresses `src` into `dst` (room for exactly `dsize` bytes, checked by
// check_decompressed_size); returns the view of the result.
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

// Copies the bytes of `view` (a range of file.data()) into `dst` with pread,
// leaving the mapping untouched.
void read_from_file(const util::MappedFile& file, Bytes view, uint8_t* dst) {
  uint64_t offset = uint64_t(view.data() - file.data());
  uint64_t done = 0;
  while (done < view.size()) {
    ssize_t n = ::pread(file.fd(), dst + done, view.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail("cannot read {} bytes at 0x{:x}: {}", view.size(), offset, std::strerror(errno));
    if (n == 0)
      fail("file ends at 0x{:x}, before the {} bytes at 0x{:x} (was it truncated while being read?)",
           offset + done, view.size(), offset);
    done += uint64_t(n);
  }
}

// Whether the workers read this entry's payload at all.
bool is_read(const Entry& e, const InspectOptions& options) {
  if (e.kind == EntryKind::kPtx && !options.parse_ptx) return false;
  if (e.kind != EntryKind::kElf && e.kind != EntryKind::kPtx && e.kind != EntryKind::kLtoIr) return false;
  // LTO-IR is opaque here (decoding it is only a check); with this flag its
  // payload is not a plain LZ4/zstd stream, so there is nothing to check.
  if (e.kind == EntryKind::kLtoIr && (e.flags & kFlagEncodedPayload)) return false;
  return true;
}

// The walk's checks of one entry before it is handed to the workers, in file
// order. Throws FormatError (ending the walk) when the file has more entry
// listing than it may; sets the entry's error when its decompressed size is
// a lie or would pass the file's decompression limit.
void admit(Job& job, Run& run) {
  Entry& e = job.entry;
  uint64_t listing = sizeof(Entry) + e.identifier.size() + e.options.size() + e.member.size();
  if (!run.entry_listing.take(listing))
    fail("entry {}: the file's entries take more than its listing limit of {} bytes (too many entries)", e.index,
         run.entry_listing.limit);
  if (!is_read(e, run.options) || e.compression == Compression::kNone || e.compression == Compression::kUnknown)
    return;
  try {
    check_decompressed_size(e.compression, job.stored.size(), e.decompressed_size, run.options.max_entry_bytes);
    if (!run.decompressed.take(e.decompressed_size))
      fail("decompressed size {} would bring the file past its limit of {} decompressed bytes ({}x its size of {} "
           "bytes, at least {}, at most {}; {} bytes left): not decompressed (a decompression bomb?)",
           e.decompressed_size, run.decompressed.limit, run.options.max_expansion, run.file_size,
           run.options.decompressed_floor_bytes, run.options.max_decompressed_total_bytes, run.decompressed.left);
  } catch (const FormatError& err) {
    e.error = err.what();
  }
}

void process(Job& job, Run& run, ZstdContext& zstd) {
  Entry& e = job.entry;
  const InspectOptions& options = run.options;
  if (!e.error.empty()) return;  // refused by admit()
  try {
    if (!is_read(e, options)) return;
    if (e.compression == Compression::kUnknown) fail("both LZ4 and zstd flags set (flags 0x{:x})", e.flags);
    bool compressed = e.compression != Compression::kNone;
    // One buffer per entry: the decompressed image, then the stored bytes.
    uint64_t out_bytes = compressed ? e.decompressed_size : 0;
    uint64_t in_bytes = run.file ? job.stored.size() : 0;
    std::optional<Lease> lease;
    if (out_bytes + in_bytes > 0) lease.emplace(run.buffers, out_bytes + in_bytes);
    Bytes payload = job.stored;
    if (run.file) {
      read_from_file(*run.file, job.stored, lease->data() + out_bytes);
      payload = Bytes(lease->data() + out_bytes, job.stored.size(), job.stored.base());
    }
    if (compressed) payload = decompress(e.compression, payload, e.decompressed_size, lease->data(), zstd);
    if (e.kind == EntryKind::kElf) parse_cubin(payload, options, e, run.kernel_listing);
    else if (e.kind == EntryKind::kPtx) parse_ptx(payload.text(), options, e, run.kernel_listing);
    // LTO-IR is NVVM bitcode: opaque here, decompression was the check.
  } catch (const FormatError& err) {
    e.error = err.what();
  } catch (const std::bad_alloc&) {
    e.error = fmt::format("out of memory decompressing {} bytes", e.decompressed_size);
  }
  if (options.demangle)
    for (Kernel& k : e.kernels)
      if (k.name.size() >= 2 && k.name[0] == '_' && k.name[1] == 'Z') run.names.demangle_into(k);
}

// Jobs handed from the container walk to the workers while the walk goes on:
// the walk touches a page of the mapping every few entries, and on many
// threads it took as long as a tenth of the run when it came first. Jobs are
// published in batches (one per container) and never move once published;
// workers are started as jobs appear, up to threads - 1 (the thread that
// walks works too once the walk is done).
class JobQueue {
 public:
  explicit JobQueue(Run& run) : run_(run), max_workers_(std::max(1u, run.options.threads) - 1) {}
  JobQueue(const JobQueue&) = delete;
  // After finish() there is nothing left to stop. Before it (the walk threw)
  // the jobs not yet taken are dropped and the workers stopped.
  ~JobQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      next_ = ready_.size();
    }
    available_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // Producer side (one thread).
  void add(Job job) {
    admit(job, run_);
    pending_.push_back(std::move(job));
  }
  void publish() {
    if (pending_.empty()) return;
    batches_.push_back(std::make_unique<std::vector<Job>>(std::move(pending_)));
    pending_ = {};
    size_t published, wake;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Job& j : *batches_.back()) ready_.push_back(&j);
      published = ready_.size();
      wake = std::min(idle_, batches_.back()->size());
    }
    // One wake-up per new job: waking every idle worker for each container
    // (a job or two) cost more than the walk on many threads.
    for (size_t i = 0; i < wake; ++i) available_.notify_one();
    while (workers_.size() < std::min(max_workers_, published)) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        max_workers_ = workers_.size();  // the system allows no more threads: go on with these
      }
    }
  }
  // Ends the walk: processes the remaining jobs on this thread too and waits
  // for the workers. Afterwards jobs() lists every job in walk order.
  void finish() {
    close();
    work();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }
  const std::vector<Job*>& jobs() const { return ready_; }

 private:
  void close() {
    publish();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    available_.notify_all();
  }
  Job* take() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++idle_;
    available_.wait(lock, [&] { return next_ < ready_.size() || closed_; });
    --idle_;
    return next_ < ready_.size() ? ready_[next_++] : nullptr;
  }
  void work() {
    ZstdContext zstd;
    while (Job* job = take()) process(*job, run_, zstd);
    run_.buffers.trim();
  }

  Run& run_;
  size_t max_workers_;
  std::vector<Job> pending_;                             // producer only
  std::vector<std::unique_ptr<std::vector<Job>>> batches_;  // producer only; jobs stay put
  std::vector<std::thread> workers_;                     // producer only
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Job*> ready_;  // published jobs in walk order (guarded until finish)
  size_t next_ = 0;
  size_t idle_ = 0;  // workers in take()
  bool closed_ = false;
};

// Ends the walk (jobs.finish()) and moves the entries into `entries` in walk
// order; the first entry error becomes `error` unless that is set already,
// as `describe` words it. When the file's kernel listing limit ran out, which
// entries got their kernels first depends on the thread count, and the
// report must not: every entry then loses its listing, with the same error.
void collect_entries(JobQueue& jobs, Run& run, std::vector<Entry>& entries, std::string& error,
                     const std::function<std::string(const Entry&)>& describe) {
  jobs.finish();
  bool over = run.kernel_listing.exhausted();
  entries.reserve(entries.size() + jobs.jobs().size());
  for (Job* job : jobs.jobs()) {
    Entry& e = job->entry;
    if (over) {
      e.kernels.clear();
      e.globals.clear();
      e.error = fmt::format("not listed: the file's kernels and variables take more than its listing limit of {} bytes",
                            run.kernel_listing.limit());
    }
    if (!e.error.empty() && error.empty()) error = describe(e);
    entries.push_back(std::move(e));
  }
}

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

// Walks back-to-back fatbin containers in `region` (zero padding allowed
// between them), appending one job per entry. Throws FormatError for a broken
// structure; the jobs found before the break are kept. When the region is
// part of a mapped file, the pages walked over are dropped behind the walk
// (the workers pread the payloads), so the walk never keeps the whole region
// resident.
struct FatbinWalk {
  JobQueue& jobs;
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

  void walk(Bytes region, const std::string& source) {
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

  void walk_entries(Bytes c, uint32_t container) {
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
};

bool looks_like_ptx(const uint8_t* data, size_t size) {
  size_t limit = std::min<size_t>(size, 1 << 20);
  size_t p = 0;
  auto at = [&](size_t i) { return reinterpret_cast<const char*>(data)[i]; };
  while (p < limit) {
    char c = at(p);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++p;
    else if (c == '/' && p + 1 < limit && at(p + 1) == '/') {
      while (p < limit && at(p) != '\n') ++p;
    } else if (c == '/' && p + 1 < limit && at(p + 1) == '*') {
      p += 2;
      while (p + 1 < limit && !(at(p) == '*' && at(p + 1) == '/')) ++p;
      p += 2;
    } else break;
  }
  static const char kVersion[] = ".version";
  return p + 9 <= size && std::memcmp(data + p, kVersion, 8) == 0 &&
         (at(p + 8) == ' ' || at(p + 8) == '\t');
}

// Inspects one device-code blob (cubin, fatbin or PTX) into `entries`.
// Returns the first error ("" when valid).
std::string inspect_blob(Bytes b, FileFormat format, const std::string& source, Run& run,
                         std::vector<Entry>& entries, std::vector<DeviceImage>* images) {
  JobQueue jobs(run);
  std::string error;
  if (format == FileFormat::kFatbin) {
    FatbinWalk walk{jobs, images, run.file};
    try {
      walk.walk(b, source);
    } catch (const FormatError& e) {
      error = e.what();
    }
  } else {
    Job job;
    job.entry.kind = format == FileFormat::kCubin ? EntryKind::kElf : EntryKind::kPtx;
    job.entry.header_offset = job.entry.payload_offset = b.base();
    job.entry.size = job.entry.decompressed_size = b.size();
    job.stored = b;
    jobs.add(std::move(job));
  }
  collect_entries(jobs, run, entries, error, [&](const Entry& e) {
    return format == FileFormat::kFatbin ? fmt::format("entry {}: {}", e.index, e.error) : e.error;
  });
  return error;
}

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
  JobQueue jobs(run);
  FatbinWalk walk{jobs, &r.images, run.file};
  collect_fatbin_sections(elf, walk, "", r.error);
  if (run.options.scan_data) scan_data_sections(elf, walk, "", r.error);
  collect_entries(jobs, run, r.entries, r.error,
                  [](const Entry& e) { return fmt::format("entry {}: {}", e.index, e.error); });
  scan_tvm_functions(elf, r, run);
  scan_embedded_cubins(elf, r, run);
}

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

// ar archives (static libraries): every member that is a host ELF, cubin or
// fatbin is scanned like a stand-alone file; entries and images carry the
// member name. GNU (//, /N) and BSD (#1/N) long names are understood.
void inspect_archive(Bytes b, FileReport& r, Run& run) {
  JobQueue jobs(run);
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

}  // namespace

FileFormat detect_format(const uint8_t* data, size_t size) {
  if (is_elf(data, size)) return elf_machine(data, size) == kEmCuda ? FileFormat::kCubin : FileFormat::kHostElf;
  if (size >= 4) {
    uint32_t magic;
    std::memcpy(&magic, data, 4);
    if (magic == kFatbinMagic) return FileFormat::kFatbin;
  }
  if (size >= 8 && std::memcmp(data, "!<arch>\n", 8) == 0) return FileFormat::kArchive;
  if (looks_like_ptx(data, size)) return FileFormat::kPtx;
  return FileFormat::kUnknown;
}

namespace {

FileReport inspect_view(const uint8_t* data, size_t size, const std::string& name, Run& run) {
  FileReport r;
  r.path = name;
  r.file_size = size;
  r.format = detect_format(data, size);
  Bytes b(data, size);
  try {
    switch (r.format) {
      case FileFormat::kCubin:
      case FileFormat::kFatbin:
      case FileFormat::kPtx:
        r.error = inspect_blob(b, r.format, "", run, r.entries, nullptr);
        break;
      case FileFormat::kHostElf:
        inspect_host_elf(b, r, run);
        break;
      case FileFormat::kArchive:
        inspect_archive(b, r, run);
        break;
      default:
        if (size == 0) r.error = "empty file";
        else
          r.error = "unrecognized content: not a cubin, fatbin, PTX or ELF file";
    }
  } catch (const FormatError& e) {
    if (r.error.empty()) r.error = e.what();
  } catch (const std::bad_alloc&) {
    r.error = "out of memory";
  }
  return r;
}

}  // namespace

FileReport inspect_bytes(const uint8_t* data, size_t size, const std::string& name, const InspectOptions& options) {
  Run run(options, nullptr, size);
  return inspect_view(data, size, name, run);
}

FileReport inspect_file(const std::string& path, const InspectOptions& options) {
  std::unique_ptr<util::MappedFile> file;
  try {
    file = std::make_unique<util::MappedFile>(path);
  } catch (const Error& e) {
    FileReport r;
    r.path = path;
    r.error = e.what();
    if (r.error.rfind("cannot open", 0) != 0) r.error = "cannot open " + path + ": " + r.error;
    return r;
  }
  Run run(options, file.get(), file->size());
  return inspect_view(file->data(), file->size(), path, run);
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
