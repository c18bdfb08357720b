#include <mutex>

#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/settings.h"

namespace tcv::kernels::cuda {

namespace {
constexpr int kMaxDevices = 16;

struct Handles {
  std::once_flag once;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  cudnnHandle_t cudnn = nullptr;
};
Handles g_handles[kMaxDevices];

Handles& handles() {
  const int dev = current_device();
  TCV_CHECK(dev < kMaxDevices, "[cuda] device index ", dev, " beyond ", kMaxDevices);
  Handles& h = g_handles[dev];
  std::call_once(h.once, [&] {
    auto s = static_cast<cudaStream_t>(stream(dev, StreamKind::compute));
    TCV_CUBLAS_CHECK(cublasCreate(&h.cublas));
    TCV_CUBLAS_CHECK(cublasSetStream(h.cublas, s));
    TCV_CUBLAS_CHECK(cublasLtCreate(&h.cublaslt));
    TCV_CUDNN_CHECK(cudnnCreate(&h.cudnn));
    TCV_CUDNN_CHECK(cudnnSetStream(h.cudnn, s));
  });
  return h;
}
}  // namespace

cublasHandle_t cublas_handle() {
  return handles().cublas;
}
cublasLtHandle_t cublaslt_handle() {
  return handles().cublaslt;
}
cudnnHandle_t cudnn_handle() {
  return handles().cudnn;
}

bool allow_tf32() {
  return get_allow_tf32();
}

}  // namespace tcv::kernels::cuda
