// What the offline inspector found in one file: plain data, produced by the
// parsers in parse.h and consumed by the printers in print.h, the validator
// (driver layer) and the build layer. Types here only grow: fields are added,
// never renamed or removed (docs/inspect.md documents the JSON form).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tvmffi_jit::devcode {

enum class FileFormat { kUnknown, kCubin, kFatbin, kPtx, kHostElf, kArchive };
enum class EntryKind { kElf, kPtx, kLtoIr, kUnknown };
enum class Compression { kNone, kLz4, kZstd, kUnknown };

const char* to_string(FileFormat f);   // "cubin", "fatbin", "ptx", "host-elf", "archive", "unknown"
const char* to_string(EntryKind k);    // "elf", "ptx", "ltoir", "unknown"
const char* to_string(Compression c);  // "none", "lz4", "zstd", "unknown"

struct Dim3 {
  uint32_t x = 0, y = 0, z = 0;
  uint64_t product() const { return uint64_t(x) * y * z; }
  bool operator==(const Dim3& o) const { return x == o.x && y == o.y && z == o.z; }
};

// One __global__ function. Resource figures come from the cubin's .nv.info
// records and section sizes (the numbers cuobjdump -res-usage prints); PTX
// entries have no register/stack/shared figures (nullopt).
struct Kernel {
  std::string name;       // mangled (as the driver looks it up)
  std::string demangled;  // equal to name for extern "C" kernels or undemanglable names
  std::optional<uint32_t> registers;     // EIATTR_REGCOUNT
  std::optional<uint32_t> stack_bytes;   // EIATTR_FRAME_SIZE (cuobjdump STACK)
  std::optional<uint32_t> min_stack_bytes;  // EIATTR_MIN_STACK_SIZE (frame + callees)
  std::optional<uint64_t> shared_bytes;  // size of .nv.shared.<name> (cuobjdump SHARED), 0 if absent
  std::optional<uint64_t> local_bytes;   // size of .nv.local.<name> (cuobjdump LOCAL), 0 if absent
  std::optional<uint64_t> const0_bytes;  // size of .nv.constant0.<name> (cuobjdump CONSTANT[0])
  std::optional<uint32_t> param_bytes;   // EIATTR_CBANK_PARAM_SIZE / PTX parameter list
  std::optional<uint32_t> param_count;   // EIATTR_KPARAM_INFO records / PTX parameters
  // Launch bounds: max_threads is the product of .maxntid/MAX_THREADS, or of
  // .reqntid/REQNTID when only that is given; nullopt when unconstrained.
  std::optional<uint64_t> max_threads;
  std::optional<Dim3> max_ntid;      // __launch_bounds__ / .maxntid
  std::optional<Dim3> req_ntid;      // .reqntid
  std::optional<Dim3> cluster_dims;  // __cluster_dims__ / .reqnctapercluster
  bool explicit_cluster = false;     // EIATTR_EXPLICIT_CLUSTER / .explicitcluster
  std::optional<uint32_t> max_registers;  // __maxnreg__ / .maxnreg (EIATTR_MAXREG_COUNT when not 0xff)
  std::optional<uint32_t> min_ctas_per_sm;  // .minnctapersm (PTX only; cubins do not record it)
  std::optional<uint64_t> code_bytes;       // SASS size (.text.<name>)
};

// A module-scope __device__ / __constant__ / __managed__ variable.
struct Global {
  std::string name;
  std::string space;  // "global", "constant", "managed"
  uint64_t size = 0;
};

// One image: a cubin, a PTX module or an LTO-IR blob. A stand-alone cubin or
// PTX file is one entry; a fatbin has one per image.
struct Entry {
  uint32_t index = 0;      // position in the file, counted over all containers
  uint32_t container = 0;  // fatbin container number (0 for stand-alone files)
  std::string member;      // ar archive member holding the entry ("" outside archives)
  EntryKind kind = EntryKind::kUnknown;
  std::string arch;         // "sm_90a" for ELF/LTO-IR, "compute_90" for PTX
  std::string ptx_version;  // "9.0" (PTX only; from the entry header, else .version)
  std::string code_version; // fatbin header major.minor for ELF entries ("1.8")
  Compression compression = Compression::kNone;
  // File offsets: header_offset = the fatbin entry header (== payload_offset
  // for stand-alone files), payload bytes [payload_offset, +size).
  uint64_t header_offset = 0;
  uint64_t payload_offset = 0;
  uint64_t size = 0;               // stored bytes (compressed length when compressed)
  uint64_t decompressed_size = 0;  // bytes after decompression (== size when uncompressed)
  uint64_t flags = 0;              // fatbin entry flags
  std::string identifier;          // fatbin identifier (nvFatbin / -G source name)
  std::string options;             // PTX/LTO-IR compile options recorded in the fatbin
  // ELF details
  std::string elf_type;            // "exec" or "rel"
  uint32_t elf_abi_version = 0;
  uint32_t elf_flags = 0;
  std::string virtual_arch;        // from .note.nv.cuinfo ("compute_90")
  std::string toolkit;             // from .note.nv.cuinfo ("13.0")
  std::string ptxas_options;       // from .note.nv.tkinfo
  uint64_t global_bytes = 0;       // .nv.global + .nv.global.init (cuobjdump Common GLOBAL)
  std::vector<std::pair<uint32_t, uint64_t>> constant_banks;  // (bank, bytes), bank >= 1 (cuobjdump Common CONSTANT[n])
  std::vector<Kernel> kernels;
  std::vector<Global> globals;
  std::string error;               // empty when the entry parsed
};

// A byte range of the file that the driver could load on its own: a fatbin
// container inside a host ELF section, or an embedded TVM FFI cubin.
struct DeviceImage {
  std::string source;  // section name (".nv_fatbin", "__nv_relfatbin") or symbol name
  FileFormat format = FileFormat::kUnknown;  // kFatbin or kCubin (or kPtx for embedded PTX)
  uint64_t offset = 0;
  uint64_t size = 0;
  std::string member;  // ar archive member holding it ("" outside archives)
};

// An exported TVM FFI function (__tvm_ffi_<name> in .dynsym).
struct TvmFunction {
  std::string name;    // as called from Python (mod.<name>)
  std::string symbol;  // __tvm_ffi_<name>
  bool has_doc = false;       // __tvm_ffi__doc_<name> exported
  bool has_metadata = false;  // __tvm_ffi__metadata_<name> exported
};

struct FileReport;

// A blob embedded with TVM_FFI_EMBED_CUBIN (__tvm_ffi__cubin_<name> .. _end).
struct EmbeddedCubin {
  std::string name;    // <name>
  std::string symbol;  // __tvm_ffi__cubin_<name>
  uint64_t offset = 0; // file offset of the first byte
  uint64_t size = 0;
  FileFormat format = FileFormat::kUnknown;
  std::vector<Entry> entries;
  std::string error;   // empty when the blob parsed
};

struct FileReport {
  std::string path;
  FileFormat format = FileFormat::kUnknown;
  uint64_t file_size = 0;
  std::vector<Entry> entries;
  std::vector<DeviceImage> images;           // host ELF: each fatbin container; TVM FFI: each embedded blob
  std::vector<TvmFunction> functions;        // host ELF only
  std::vector<EmbeddedCubin> embedded_cubins;
  bool tvm_ffi_module = false;               // exports at least one __tvm_ffi_ function
  std::string error;                         // empty = the file is valid; else what is wrong and where
  bool ok() const { return error.empty(); }
  size_t kernel_count() const;               // over entries and embedded cubins
};

}  // namespace tvmffi_jit::devcode
