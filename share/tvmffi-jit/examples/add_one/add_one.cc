// A C++-only TVM FFI module. The exports (TVM_FFI_DLL_EXPORT_TYPED_FUNC) are
// added by tvmffi-jit from the manifest's "functions"; this file only defines
// the functions, exactly as a tvm_ffi.cpp.load_inline source would.
#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1-D tensor";
  TVM_FFI_ICHECK(y.ndim() == 1) << "y must be a 1-D tensor";
  DLDataType f32{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.dtype() == f32 && y.dtype() == f32) << "x and y must be float32";
  TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same length";
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < x.size(0); ++i) out[i] = in[i] + 1;
}

int64_t add(int64_t a, int64_t b) { return a + b; }
