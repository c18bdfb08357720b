// cuBLAS and cuDNN handles: one per device, bound to that device's compute
// stream, created on first use. Included only from .cu files.
//
// cuBLAS is opened with dlopen on first use instead of being linked: loading it
// pulls in cuBLASLt, which costs about 150 MiB of resident memory and 60 ms in
// every process, including CPU-only runs of a CUDA build. Its few entry points
// go through cublas_api().
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/cuda/common.cuh"

#define TCV_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                           \
    const cublasStatus_t st_ = (call);                                                           \
    TCV_CHECK(st_ == CUBLAS_STATUS_SUCCESS, "[cublas] ", #call,                                  \
              " failed: ", cublas_api().status_string(st_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

#define TCV_CUDNN_CHECK(call)                                                             \
  do {                                                                                    \
    const cudnnStatus_t st_ = (call);                                                     \
    TCV_CHECK(st_ == CUDNN_STATUS_SUCCESS, "[cudnn] ", #call,                             \
              " failed: ", cudnnGetErrorString(st_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

namespace tcv::kernels::cuda {

/// The cuBLAS functions tcv calls, resolved from libcublas.so.<major> on first
/// use; throws naming the library when it cannot be loaded.
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  // The C entry point (the header adds a C++ overload taking cudaDataType).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int m, int n, int k, const void* alpha, const void* a,
                                            cudaDataType, int lda, long long stride_a,
                                            const void* b, cudaDataType, int ldb,
                                            long long stride_b, const void* beta, void* c,
                                            cudaDataType, int ldc, long long stride_c, int batch,
                                            cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusString) status_string;
};
const CublasApi& cublas_api();

/// The current device's handles, bound to its compute stream.
cublasHandle_t cublas_handle();
cudnnHandle_t cudnn_handle();

/// Whether f32 GEMMs and convolutions may use TF32 tensor cores (off by default).
bool allow_tf32();

/// Scratch memory from the caching allocator, freed (back to the cache) at
/// scope exit; stream-ordered, so no sync is needed.
class Workspace {
 public:
  explicit Workspace(size_t nbytes)
      : ptr_(nbytes ? cached_malloc(nbytes, current_device()) : nullptr), size_(nbytes) {}
  ~Workspace() { cached_free(ptr_); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_;
  size_t size_;
};

}  // namespace tcv::kernels::cuda
