// What the format walkers share (walk.h): format detection, the admission of
// each entry against the file's limits, the per-entry work of the workers
// (read, decompress, parse) and the collection of their results, and the
// walk of one device-code blob (cubin, fatbin or PTX). The top-level dispatch
// (inspect.cpp) and the container walkers (host_elf.cpp, archive.cpp) call
// it; it calls none of them.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

#include "devcode/elf.h"
#include "devcode/walk.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::devcode {

namespace {

// Copies the bytes of `view` (a range of file.data()) into `dst` with pread,
// leaving the mapping untouched.
void read_from_file(const util::MappedFile& file, Bytes view, uint8_t* dst) {
  uint64_t offset = uint64_t(view.data() - file.data());
  uint64_t done = 0;
  while (done < view.size()) {
    auto n = util::pread_some(file.fd(), dst + done, view.size() - done, offset + done);
    if (!n) fail("cannot read {} bytes at 0x{:x}: {}", view.size(), offset, n.why());
    if (*n == 0)
      fail("file ends at 0x{:x}, before the {} bytes at 0x{:x} (was it truncated while being read?)",
           offset + done, view.size(), offset);
    done += *n;
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

}  // namespace

EntryQueue::EntryQueue(Run& run)
    : JobQueue<Job, ZstdContext>(
          run.options.threads, [&run](Job& job, ZstdContext& zstd) { process(job, run, zstd); },
          [&run](Job& job) { admit(job, run); }, [&run] { run.buffers.trim(); }) {}

// When the file's kernel listing limit ran out, which
// entries got their kernels first depends on the thread count, and the
// report must not: every entry then loses its listing, with the same error.
void collect_entries(EntryQueue& jobs, Run& run, std::vector<Entry>& entries, std::string& error,
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
  EntryQueue jobs(run);
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

}  // namespace tvmffi_jit::devcode
