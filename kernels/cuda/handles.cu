#include <dlfcn.h>

#include <mutex>
#include <string>

#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/settings.h"

namespace tcv::kernels::cuda {

namespace {
constexpr int kMaxDevices = 16;

struct Handles {
  std::once_flag once;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
};
Handles g_handles[kMaxDevices];

Handles& handles() {
  const int dev = current_device();
  TCV_CHECK(dev < kMaxDevices, "[cuda] device index ", dev, " beyond ", kMaxDevices);
  Handles& h = g_handles[dev];
  std::call_once(h.once, [&] {
    auto s = static_cast<cudaStream_t>(stream(dev, StreamKind::compute));
    const CublasApi& api = cublas_api();
    TCV_CUBLAS_CHECK(api.create(&h.cublas));
    TCV_CUBLAS_CHECK(api.set_stream(h.cublas, s));
    TCV_CUDNN_CHECK(cudnnCreate(&h.cudnn));
    TCV_CUDNN_CHECK(cudnnSetStream(h.cudnn, s));
  });
  return h;
}
template <typename Fn>
void resolve(void* lib, const std::string& lib_name, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  TCV_CHECK(fn, "[cuda] ", lib_name, " has no symbol ", symbol);
}
}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    // The major version the headers belong to (cuBLAS keeps its ABI within one).
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    TCV_CHECK(lib, "[cuda] cannot load ", name, " (", dlerror(),
              "); GEMMs on the GPU need cuBLAS on the library path (LD_LIBRARY_PATH)");
    CublasApi a{};
    resolve(lib, name, "cublasCreate_v2", a.create);
    resolve(lib, name, "cublasSetStream_v2", a.set_stream);
    resolve(lib, name, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex);
    resolve(lib, name, "cublasGetStatusString", a.status_string);
    return a;  // the library stays loaded for the life of the process
  }();
  return api;
}

cublasHandle_t cublas_handle() {
  return handles().cublas;
}
cudnnHandle_t cudnn_handle() {
  return handles().cudnn;
}

bool allow_tf32() {
  return get_allow_tf32();
}

}  // namespace tcv::kernels::cuda
