#include <algorithm>
#include <cuda_runtime.h>

#include "kernels/base.h"
#include "kernels/cuda/runtime.h"

#define TCV_CUDA_CHECK(call)                                                          \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    TCV_CHECK(err_ == cudaSuccess, "[cuda] ", #call, " failed: ", cudaGetErrorString(err_), \
              " (", __FILE__, ":", __LINE__, ")");                                    \
  } while (0)

namespace tcv::kernels::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

void* device_malloc(size_t nbytes, int device) {
  if (nbytes == 0) return nullptr;
  TCV_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  TCV_CUDA_CHECK(cudaMalloc(&p, nbytes));
  return p;
}

void device_free(void* ptr, int device) {
  if (ptr == nullptr) return;
  cudaSetDevice(device);
  cudaFree(ptr);
}

void memcpy_h2d(void* dst, const void* src, size_t nbytes, int device) {
  TCV_CUDA_CHECK(cudaSetDevice(device));
  TCV_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
}

void memcpy_d2h(void* dst, const void* src, size_t nbytes, int device) {
  TCV_CUDA_CHECK(cudaSetDevice(device));
  TCV_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
}

namespace {
__global__ void fill_f32_kernel(float* dst, size_t n, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(blockDim.x) * gridDim.x)
    dst[i] = value;
}
}  // namespace

void fill_f32(float* dst, size_t n, float value, int device) {
  if (n == 0) return;
  TCV_CUDA_CHECK(cudaSetDevice(device));
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<size_t>((n + threads - 1) / threads, 65535));
  fill_f32_kernel<<<blocks, threads>>>(dst, n, value);
  TCV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tcv::kernels::cuda
