// Fused multi-tensor optimizer steps on the GPU, the update rules of
// kernels/optim.h: one launch updates a whole list of parameters, packed
// into chunks of kChunk elements (PyTorch's multi_tensor_apply), the list's
// pointers and sizes travelling in the kernel's arguments (no host-device copy).
//
// f32 and f64 parameters; the arithmetic rounds once per operation of the CPU
// loop's source (no fused multiply-add). The host compiler contracts the CPU
// loop into FMAs where it likes (-march=native, GCC's default
// -ffp-contract=fast), so the two agree within an ulp or so per operation,
// not always to the last bit.
#pragma once

#include <vector>

#include "kernels/base.h"
#include "kernels/cuda/entry.h"
#include "kernels/optim.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// Elements per chunk: one thread block updates one chunk.
constexpr int64_t kOptimChunk = 65536;

/// SGD over every entry (dt: f32 or f64).
TCV_CUDA_API void sgd_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts,
                                 const SgdParams& p) TCV_CUDA_ENTRY;

/// Adam / AdamW over every entry (dt: f32 or f64).
TCV_CUDA_API void adam_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts,
                                  const AdamParams& p) TCV_CUDA_ENTRY;

/// *out = Σ x² over every element of every tensor (contiguous, floating, on the
/// current device), accumulated in f64. One host sync to return it.
TCV_CUDA_API void sum_squares_multi(const std::vector<KTensor>& ts, double* out) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
