// Softmax and log-softmax on the GPU along one dim of a contiguous tensor
// viewed as (outer, r, inner), the same entry points and semantics as
// kernels/cpu/softmax.h. f32 and f64 (f16/bf16 compute in float, though the
// engine op accepts only f32/f64).
#pragma once

#include "kernels/cpu/softmax.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out = softmax(in) or log_softmax(in) over r, the row maximum subtracted first.
TCV_CUDA_API void softmax(SoftmaxKind kind, const KTensor& out, const KTensor& in, int64_t outer,
                          int64_t r, int64_t inner) TCV_CUDA_ENTRY;

/// softmax: dx = y · (dy − Σ_r dy·y); log_softmax: dx = dy − exp(y) · Σ_r dy.
TCV_CUDA_API void softmax_backward(SoftmaxKind kind, const KTensor& dx, const KTensor& dy,
                                   const KTensor& y, int64_t outer, int64_t r, int64_t inner)
    TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
