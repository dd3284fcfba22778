// Device code only: compiled to a cubin (one arch) and embedded into the
// module as __tvm_ffi__cubin_example_kernels. No host headers: the same file
// also compiles with NVRTC (`tvmffi-jit build --compiler nvrtc --emit cubin`).
extern "C" __global__ void add_one(const float* x, float* y, long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

// A template kernel: in the cubin under its mangled name
// (_Z5scaleIfEvPT_S0_x), which is what TVM_FFI_EMBED_CUBIN_GET_KERNEL takes.
template <typename T>
__global__ void scale(T* x, T factor, long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
template __global__ void scale<float>(float*, float, long long);
