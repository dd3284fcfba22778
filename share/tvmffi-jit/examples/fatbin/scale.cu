// Device code only: built into a fatbin (SASS for sm_80 and sm_90, plus
// compute_90 PTX for newer GPUs) for loading with the CUDA driver
// (cuLibraryLoadData / tvm::ffi::CubinModule) or embedding with embed_cubin.
extern "C" __global__ void scale(float* data, float factor, long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}
