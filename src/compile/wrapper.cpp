#include "tvmffi_jit/compile/wrapper.h"

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::compile {

std::string escape_cpp_string_literal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out;
}

std::string decorate_with_tvm_ffi(std::string_view source, const FunctionList& functions) {
  std::string out =
      "#include <tvm/ffi/container/tensor.h>\n"
      "#include <tvm/ffi/dtype.h>\n"
      "#include <tvm/ffi/error.h>\n"
      "#include <tvm/ffi/extra/c_env_api.h>\n"
      "#include <tvm/ffi/function.h>\n"
      "\n";
  out += source;
  out += '\n';
  for (const auto& [name, doc] : functions) {
    out += "TVM_FFI_DLL_EXPORT_TYPED_FUNC(" + name + ", " + name + ");\n";
    if (!doc.empty()) out += "TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(" + name + ", \"" + escape_cpp_string_literal(doc) + "\");\n";
  }
  return out;
}

std::string join_inline_sources(const std::vector<std::string>& pieces) {
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i) out += '\n';
    out += pieces[i];
  }
  return out;
}

std::string file_export_unit(const std::string& absolute_path, const FunctionList& functions) {
  // No escape sequences exist inside an #include "..." name (C++ [lex.header]),
  // so a path with a quote or a newline cannot be included at all.
  if (absolute_path.find_first_of("\"\n\r") != std::string::npos)
    throw usage_error("cannot #include " + absolute_path + ": the path contains a double quote or a newline");
  return decorate_with_tvm_ffi("#include \"" + absolute_path + "\"", functions);
}

}  // namespace tvmffi_jit::compile
