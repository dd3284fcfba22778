// The wrapper must be byte-identical to tvm_ffi.cpp.extension._decorate_with_tvm_ffi.
// Expected texts below were printed by apache-tvm-ffi 0.1.15.post2
// (python3 -c 'from tvm_ffi.cpp.extension import _decorate_with_tvm_ffi as d; print(repr(d(src, fns)))')
// (its `functions` as a list and as a dict with docstrings); the integration test
// tests/integration/test_build_wrapper_parity.py re-checks against the installed package.
#include <catch2/catch.hpp>

#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/error.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {
const std::string kIncludes =
    "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/dtype.h>\n#include <tvm/ffi/error.h>\n"
    "#include <tvm/ffi/extra/c_env_api.h>\n#include <tvm/ffi/function.h>\n\n";
}

TEST_CASE("wrapper of one function equals tvm_ffi's text for test vector 1", "[build][wrapper]") {
  CHECK(decorate_with_tvm_ffi("int add(int a, int b) { return a + b; }", {{"add", ""}}) ==
        kIncludes + "int add(int a, int b) { return a + b; }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(add, add);\n");
}

TEST_CASE("wrapper of an empty source with no functions is the includes and three newlines", "[build][wrapper]") {
  CHECK(decorate_with_tvm_ffi("", {}) ==
        "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/dtype.h>\n#include <tvm/ffi/error.h>\n"
        "#include <tvm/ffi/extra/c_env_api.h>\n#include <tvm/ffi/function.h>\n\n\n");
}

TEST_CASE("docstrings get a _DOC line with exactly tvm_ffi's five escapes", "[build][wrapper]") {
  CHECK(decorate_with_tvm_ffi("int add(int a, int b) { return a + b; }", {{"add", "Line1\n\t\"q\" \\ end\r"}}) ==
        kIncludes +
            "int add(int a, int b) { return a + b; }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(add, add);\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add, \"Line1\\n\\t\\\"q\\\" \\\\ end\\r\");\n");
  // Anything else (non-ASCII, single quotes, '?') passes through unchanged, as in Python.
  CHECK(escape_cpp_string_literal("\xcf\x80 it's ok?") == "\xcf\x80 it's ok?");
}

TEST_CASE("exports follow the given order, not sorted, and empty docs add no _DOC line", "[build][wrapper]") {
  CHECK(decorate_with_tvm_ffi("int add(int a, int b) { return a + b; }\nvoid noop() {}",
                              {{"noop", ""}, {"add", "Add two ints."}}) ==
        kIncludes +
            "int add(int a, int b) { return a + b; }\nvoid noop() {}\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC(noop, noop);\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(add, add);\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add, \"Add two ints.\");\n");
  CHECK(decorate_with_tvm_ffi("// unicode \xc3\xa9 \xe2\x9c\x93\n", {{"zeta", "\xcf\x80 doc"}, {"alpha", ""}}) ==
        kIncludes +
            "// unicode \xc3\xa9 \xe2\x9c\x93\n\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(zeta, zeta);\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(zeta, \"\xcf\x80 doc\");\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(alpha, alpha);\n");
}

TEST_CASE("inline source pieces are joined with a newline as load_inline does", "[build][wrapper]") {
  CHECK(join_inline_sources({"int a;", "int b;"}) == "int a;\nint b;");
  CHECK(join_inline_sources({"x"}) == "x");
  CHECK(join_inline_sources({}).empty());
}

TEST_CASE("a file's export unit wraps an #include of the file", "[build][wrapper]") {
  CHECK(file_export_unit("/src/a.cc", {{"f", ""}}) ==
        kIncludes + "#include \"/src/a.cc\"\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n");
  try {
    file_export_unit("/src/we\"ird.cc", {{"f", ""}});
    FAIL("a path with a quote was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
  }
}
