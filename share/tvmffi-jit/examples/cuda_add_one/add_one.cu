// A CUDA TVM FFI module: one kernel and one TensorView entry point that
// launches it on the stream TVM FFI reports for the tensor's device. The
// export macro is added by tvmffi-jit from the manifest's "functions".
#include <cstdint>

#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

void add_one_cuda(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(x.ndim() == 1 && y.ndim() == 1) << "x and y must be 1-D tensors";
  DLDataType f32{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.dtype() == f32 && y.dtype() == f32) << "x and y must be float32";
  TVM_FFI_ICHECK(x.device().device_type == kDLCUDA && y.device().device_type == kDLCUDA)
      << "x and y must be CUDA tensors";
  TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same length";
  const int64_t n = x.size(0);
  if (n == 0) return;
  cudaStream_t stream =
      static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  add_one_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), n);
  cudaError_t err = cudaGetLastError();
  TVM_FFI_ICHECK(err == cudaSuccess) << "add_one_kernel launch failed: " << cudaGetErrorString(err);
}
