// Embedding device binaries (cubin/fatbin) into a module the way tvm-ffi's
// cubin launcher expects: TVM_FFI_EMBED_CUBIN(name) references
// __tvm_ffi__cubin_<name> (and ..._end) as extern "C" const char[].
#pragma once

#include <string>
#include <vector>

namespace tvmffi_jit::compile {

struct EmbeddedBinary {
  std::string name;  // [A-Za-z_][A-Za-z0-9_]*
  std::string path;  // the cubin/fatbin to embed: absolute, or relative to the build dir (a built one)
};

// The embed unit's source, as the plan writes it into the build directory
// and compiles it with the C++ compiler driver (BuildPlan::embed_step).
inline constexpr const char* kEmbedSourceName = "tvm_ffi_embedded_cubins.s";
// What the driver needs besides -c/-o: the language, so it assembles the file
// whatever its name.
std::vector<std::string> embed_source_flags();  // -x assembler

// The text of one translation unit defining, for every item, the symbols
// __tvm_ffi__cubin_<name> and __tvm_ffi__cubin_<name>_end around the file's
// exact bytes in read-only data, resolvable by the module's other objects but
// not exported (absent from .dynsym), and no other global symbols. A relative
// path is read from the directory the assembler runs in (the build dir).
// Pure: throws Error(kUsage) for a bad or repeated name or a path the
// assembler cannot be given.
std::string embed_source_text(const std::vector<EmbeddedBinary>& items);

// A file the user gave to embed, checked before the build: a regular file
// (Error(kIo) otherwise) that is not empty (Error(kUsage)).
void check_embedded_file(const EmbeddedBinary& item);

}  // namespace tvmffi_jit::compile
