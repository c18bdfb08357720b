// 2-D pooling on the GPU, the same entry points and semantics as
// kernels/cpu/pool.h: max (argmax kept as i64 indices for the backward),
// average with PyTorch's divisor rules, adaptive average. Backward passes
// gather per input element, so they are deterministic.
#pragma once

#include "kernels/cpu/pool.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// Bytes the max-pool backward needs from the forward: one i64 argmax (index
/// within the h·w plane) per output element. 0 for average pooling.
TCV_CUDA_API size_t pool2d_workspace_bytes(const Pool2dGeom& g, DType dtype) TCV_CUDA_ENTRY;

/// y = pool(x); for max pooling `workspace` (may be null) receives the argmax indices.
TCV_CUDA_API void pool2d_forward(const Pool2dGeom& g, const KTensor& x, const KTensor& y,
                                 const KTensor* workspace) TCV_CUDA_ENTRY;

/// dx from dy; max pooling reads the forward's `workspace`.
TCV_CUDA_API void pool2d_backward(const Pool2dGeom& g, const KTensor& dy, const KTensor& dx,
                                  const KTensor* workspace) TCV_CUDA_ENTRY;

/// Adaptive average pooling with PyTorch's bins, x (n, c, h, w) -> y (n, c, oh, ow).
TCV_CUDA_API void adaptive_avg_pool2d_forward(const KTensor& x, const KTensor& y) TCV_CUDA_ENTRY;
TCV_CUDA_API void adaptive_avg_pool2d_backward(const KTensor& dy, const KTensor& dx) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
