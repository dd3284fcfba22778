// Embedding device binaries (cubin/fatbin) into a module the way tvm-ffi's
// cubin launcher expects: TVM_FFI_EMBED_CUBIN(name) references
// __tvm_ffi__cubin_<name> (and ..._end) as extern "C" const char[].
#pragma once

#include <string>
#include <vector>

namespace tvmffi_jit::compile {

struct EmbeddedBinary {
  std::string name;  // [A-Za-z_][A-Za-z0-9_]*
  std::string path;  // absolute path of the cubin/fatbin to embed
};

struct EmbedSource {
  std::string path;                        // translation unit to compile with the C++ compiler driver (-c)
  std::vector<std::string> compile_flags;  // flags it needs besides -c/-o (e.g. "-x", "assembler-with-cpp")
};

// Writes into `dir` one translation unit defining, for every item, the
// symbols __tvm_ffi__cubin_<name> and __tvm_ffi__cubin_<name>_end around the
// file's exact bytes in read-only data, resolvable by the module's other
// objects but not exported (absent from .dynsym), and no other global symbols.
// Throws Error(kUsage) for a bad name, Error(kIo) for an unreadable file.
EmbedSource write_embed_source(const std::vector<EmbeddedBinary>& items, const std::string& dir);

}  // namespace tvmffi_jit::compile
