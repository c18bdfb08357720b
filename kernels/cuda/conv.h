// 2-D convolution on the GPU through cuDNN's legacy API, the same entry points
// and semantics as kernels/cpu/conv.h (contiguous NCHW, groups, dilation),
// for f32, f64, f16 and bf16 (the 16-bit types compute in f32).
//
// The algorithm of every (geometry, dtype, math, direction) is chosen once and
// cached, like torch.backends.cudnn.benchmark: cudnnFind*AlgorithmEx when
// get_cudnn_benchmark() is on, cudnnGet*_v7 heuristics otherwise. f32 runs
// without TF32 unless allow_tf32().
#pragma once

#include "kernels/cpu/conv.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// y = conv(x, weight) + bias; `bias` may be null (or ignored when !has_bias).
TCV_CUDA_API void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                                 const KTensor* bias, const KTensor& y) TCV_CUDA_ENTRY;

/// Gradients given dy (n, k, oh, ow); each output pointer may be null when that
/// gradient is not wanted. x is read only for dweight, weight only for dx.
TCV_CUDA_API void conv2d_backward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                                  const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                                  const KTensor* dbias) TCV_CUDA_ENTRY;

/// Number of cached convolution configurations (descriptors and algorithms).
TCV_CUDA_API size_t conv2d_cache_size() TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
