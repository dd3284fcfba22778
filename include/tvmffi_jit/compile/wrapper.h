// The export wrapper, byte-identical to tvm_ffi.cpp.extension._decorate_with_tvm_ffi
// (apache-tvm-ffi 0.1.15; docs/build.md), so sources written for load_inline build
// unchanged and produce the same translation units.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tvmffi_jit::compile {

using FunctionList = std::vector<std::pair<std::string, std::string>>;  // name -> docstring, in order

// tvm_ffi's _escape_cpp_string_literal: only \ " LF CR TAB are escaped.
std::string escape_cpp_string_literal(std::string_view s);

// The five tvm-ffi includes, a blank line, `source`, then one
// TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f); per function (followed by its _DOC
// line when the docstring is non-empty), ending in a newline.
std::string decorate_with_tvm_ffi(std::string_view source, const FunctionList& functions);

// load_inline's handling of a sequence of source pieces: joined with "\n".
std::string join_inline_sources(const std::vector<std::string>& pieces);

// The translation unit compiled in place of a source *file* that receives the
// exports: the wrapper around `#include "<path>"`, so the functions need only
// be declared or defined in that file, and its own quoted includes still
// resolve relative to its folder. Throws Error(kUsage) for a path that cannot
// appear in an #include (a double quote or a newline).
std::string file_export_unit(const std::string& absolute_path, const FunctionList& functions);

}  // namespace tvmffi_jit::compile
