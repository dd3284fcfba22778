// Offline parsers for device code: cubin (CUDA ELF), fatbin containers, PTX
// text and host ELF files (.so/.o/executables, TVM FFI modules) that embed
// them. No GPU and no driver are involved.
//
// Every offset and size read from the input is checked against its enclosing
// range before use; allocations driven by sizes in the file are capped
// (InspectOptions::max_entry_bytes), and so is the memory used to decompress
// them (InspectOptions::buffer_budget_bytes). A malformed file never throws out of
// inspect_*: it yields a FileReport whose `error` says what is wrong and
// where ("entry 3: compressed size 4096 exceeds container end at 0x1f00").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

struct InspectOptions {
  unsigned threads = 1;  // entries decompressed and parsed in parallel
  bool demangle = true;
  bool parse_ptx = true;  // list PTX kernels (decompresses PTX entries)
  // Host ELF files: also look for fatbin containers in the other allocated
  // data sections (libraries that load their own fatbins at run time, such as
  // cuFFT, keep them in .ldata/.rodata, where cuobjdump does not look).
  bool scan_data = false;
  // Largest decompressed entry accepted; bigger claims are reported as errors
  // instead of being allocated.
  uint64_t max_entry_bytes = uint64_t(1) << 30;
  // Decompression buffers held at once, all threads together: a thread whose
  // entry does not fit waits for others to finish theirs, so peak memory does
  // not grow with `threads`. An entry larger than this is still inspected,
  // alone (it is within the file's decompression limit below, so its memory
  // is bounded by the file's size, not by what its header claims).
  uint64_t buffer_budget_bytes = uint64_t(128) << 20;
  // Decompressed bytes one file may produce, all its entries together:
  // max_expansion times the file size, at least decompressed_floor_bytes, at
  // most max_decompressed_total_bytes. Entries are admitted in file order;
  // one that would pass the limit is an error ("decompression bomb"), not
  // decompressed. Real libraries decompress to 2-10 times their size
  // (cuDNN's precompiled engines 9.2x, cuBLASLt 4.3x); a 33 KB zstd frame
  // can claim a gigabyte.
  uint64_t max_expansion = 32;
  uint64_t decompressed_floor_bytes = uint64_t(32) << 20;
  uint64_t max_decompressed_total_bytes = uint64_t(16) << 30;
  // Memory the listing of one file may take: listing_floor_bytes plus half
  // the file size, once for the fatbin entries (headers, identifiers,
  // options) and once for the kernels and variables with their names.
  // Crafted files point thousands of records at one long string; real ones
  // use a fraction of this (cuBLASLt: 54,578 kernels and variables, about
  // 40 MB for a 541 MB file).
  uint64_t listing_floor_bytes = uint64_t(32) << 20;
};

// Sniffs the content (never the name): ELF with e_machine EM_CUDA -> cubin,
// other ELF -> host ELF, fatbin magic -> fatbin, "!<arch>\n" -> archive, text
// whose first directive (after blank space and comments, within the first
// MiB) is `.version` -> PTX. A file starting with `.target` is not detected as
// PTX (inside a fatbin, PTX entries are known by their header and may start
// with either). See docs/formats.md.
FileFormat detect_format(const uint8_t* data, size_t size);

// Maps the file and inspects it. A missing/unreadable file gives a report with
// error "cannot open <path>: <reason>"; so does one that is not a regular file
// ("cannot open <path>: not a regular file (a FIFO)"), without blocking.
FileReport inspect_file(const std::string& path, const InspectOptions& options = {});
// Same for bytes in memory; `name` becomes report.path.
FileReport inspect_bytes(const uint8_t* data, size_t size, const std::string& name,
                         const InspectOptions& options = {});

// The bytes of one entry as the driver would see them (decompressed), taken
// from the same file bytes the report was made from. Throws Error(kInvalid)
// if the range or the compressed data is bad.
std::vector<uint8_t> entry_payload(const uint8_t* file, size_t file_size, const Entry& entry,
                                   uint64_t max_entry_bytes = uint64_t(1) << 30);

}  // namespace tvmffi_jit::devcode
