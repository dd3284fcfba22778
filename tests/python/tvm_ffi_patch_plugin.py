"""pytest plugin (-p tvm_ffi_patch_plugin): apply tvmffi_jit.patch() before
any test module is imported, so tvm_ffi's own tests call tvm_ffi.cpp's four
functions through tvmffi-jit. Used by tests/integration/test_python_tvm_ffi_suite.py.
"""

import tvmffi_jit


def pytest_configure(config):
    tvmffi_jit.patch()
    import tvm_ffi.cpp

    # A patch that silently did nothing would make the suite test tvm_ffi.
    assert tvm_ffi.cpp.load_inline is tvmffi_jit.load_inline, "tvmffi_jit.patch() did not take"


def pytest_report_header(config):
    return f"tvmffi_jit.patch() applied: tvm_ffi.cpp builds run {tvmffi_jit.find_binary()}"


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"tvmffi_jit.patch() applied (binary {tvmffi_jit.find_binary()})")
