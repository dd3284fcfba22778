// The inspector: a file's format detected and dispatched to its walker. The
// formats are walked in fatbin.cpp, host_elf.cpp and archive.cpp, the entries
// admitted and processed in walk.cpp (which host ELF files and archives call
// too, for the blobs inside them); the parallel machinery is scheduler.h
// (see walk.h).
//
// Peak memory depends neither on the thread count nor on what the file's
// headers claim (the limits are in Run, from the file's size):
//  * a file inspected by path has its entry payloads read with pread, and the
//    pages of the mapping that the container walk touched are dropped behind
//    it, so the mapping keeps only headers and symbol tables resident;
//  * each entry is decompressed into a range of one arena that all workers
//    share (InspectOptions::buffer_budget_bytes); a worker whose entry does
//    not fit waits until others return theirs; an entry larger than the arena
//    is admitted only within the file's decompression limit;
//  * only the extracted metadata is kept.
// Time: the walk hands entries to the workers as it goes, and the workers
// also demangle (each distinct name once), so little is left on one thread.
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

}  // namespace tvmffi_jit::devcode
