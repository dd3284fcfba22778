// Host code only: looks the kernels up in the embedded cubin and launches them
// on tvm-ffi tensors. It is a .cu file so that nvcc compiles it with the CUDA
// headers and the module links the CUDA runtime (as tvm-ffi's own embed_cubin
// examples pass the launcher as cuda_sources); any C++ works here.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/cubin_launcher.h>
#include <tvm/ffi/function.h>

// The name matches the manifest's "embed_cubin" key.
TVM_FFI_EMBED_CUBIN(example_kernels);

namespace {

void check_float_vector(const tvm::ffi::TensorView& t, const char* what) {
  TVM_FFI_ICHECK(t.ndim() == 1) << what << " must be 1-D";
  TVM_FFI_ICHECK(t.dtype().code == kDLFloat && t.dtype().bits == 32) << what << " must be float32";
  TVM_FFI_ICHECK(t.device().device_type == kDLCUDA) << what << " must be on a CUDA device";
}

tvm::ffi::cuda_api::StreamHandle stream_of(const tvm::ffi::TensorView& t) {
  return static_cast<tvm::ffi::cuda_api::StreamHandle>(
      TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

tvm::ffi::dim3 grid_for(long long n) { return tvm::ffi::dim3(static_cast<unsigned>((n + 255) / 256)); }

}  // namespace

// y = x + 1
void AddOne(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  check_float_vector(x, "x");
  check_float_vector(y, "y");
  TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y differ in length";
  static auto kernel = TVM_FFI_EMBED_CUBIN_GET_KERNEL(example_kernels, "add_one");
  const void* x_ptr = x.data_ptr();
  void* y_ptr = y.data_ptr();
  long long n = x.size(0);
  void* args[] = {&x_ptr, &y_ptr, &n};
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(kernel.Launch(args, grid_for(n), tvm::ffi::dim3(256), stream_of(x)));
}

// x *= factor, through the template instantiation scale<float>.
void Scale(tvm::ffi::TensorView x, double factor) {
  check_float_vector(x, "x");
  static auto kernel = TVM_FFI_EMBED_CUBIN_GET_KERNEL(example_kernels, "_Z5scaleIfEvPT_S0_x");
  void* x_ptr = x.data_ptr();
  float f = static_cast<float>(factor);
  long long n = x.size(0);
  void* args[] = {&x_ptr, &f, &n};
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(kernel.Launch(args, grid_for(n), tvm::ffi::dim3(256), stream_of(x)));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, Scale);
