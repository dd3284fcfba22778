// Kernels for the driver-validation GPU test (tests/gpu/run.sh): five kernels
// with different resource profiles, so driver attributes can be compared with
// the offline parse (registers, static shared, user constants, stack, launch
// bounds, cluster dims).
__constant__ float scale_table[64];

extern "C" __global__ void __launch_bounds__(256, 2) add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i] * scale_table[i & 63];
}

__global__ void smem(float* out) {
  __shared__ float tile[1024];
  __shared__ double extra[33];
  tile[threadIdx.x] = out[threadIdx.x];
  extra[threadIdx.x % 33] = tile[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[1023 - threadIdx.x] + static_cast<float>(extra[(threadIdx.x + 1) % 33]);
}

struct Big {
  float v[40];
};

template <typename T>
__global__ void loc(T* out, Big b, int k) {
  T local[64];
  for (int i = 0; i < 64; ++i) local[i] = b.v[(i * k) % 40] * static_cast<T>(i);
  out[threadIdx.x] = local[(threadIdx.x * k) & 63];
}
template __global__ void loc<float>(float*, Big, int);

#ifndef TVMFFI_JIT_NO_CLUSTER
extern "C" __global__ void __cluster_dims__(2, 1, 1) __maxnreg__(40) clu(int* out) {
  out[blockIdx.x] = static_cast<int>(blockIdx.x);
}
#endif

extern "C" __global__ void reqntid_kernel(int* out) { out[threadIdx.x] = threadIdx.x * 3; }
