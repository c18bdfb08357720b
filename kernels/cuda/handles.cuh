// cuBLAS, cuBLASLt and cuDNN handles: one per device, bound to that device's
// compute stream, created on first use. Included only from .cu files.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/cuda/common.cuh"

#define TCV_CUBLAS_CHECK(call)                                                              \
  do {                                                                                      \
    const cublasStatus_t st_ = (call);                                                      \
    TCV_CHECK(st_ == CUBLAS_STATUS_SUCCESS, "[cublas] ", #call,                             \
              " failed: ", cublasGetStatusString(st_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

#define TCV_CUDNN_CHECK(call)                                                             \
  do {                                                                                    \
    const cudnnStatus_t st_ = (call);                                                     \
    TCV_CHECK(st_ == CUDNN_STATUS_SUCCESS, "[cudnn] ", #call,                             \
              " failed: ", cudnnGetErrorString(st_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

namespace tcv::kernels::cuda {

/// The current device's handles, bound to its compute stream.
cublasHandle_t cublas_handle();
cublasLtHandle_t cublaslt_handle();
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
