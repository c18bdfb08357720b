// Elementwise CUDA kernels, the same entry points and semantics (and the same
// formulas, kernels/pointwise.h) as kernels/cpu/elementwise.h: operands arrive
// broadcast to the output's shape and, except for copy, in one dtype. f16/bf16
// compute in float.
#pragma once

#include "kernels/base.h"
#include "kernels/cuda/entry.h"
#include "kernels/pointwise.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

TCV_CUDA_API void binary(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
                         double alpha = 1.0) TCV_CUDA_ENTRY;
TCV_CUDA_API void unary(UnaryOp op, const KTensor& out, const KTensor& in, double p0 = 0.0,
                        double p1 = 0.0) TCV_CUDA_ENTRY;
TCV_CUDA_API void unary_backward(UnaryOp op, const KTensor& dx, const KTensor& dy,
                                 const KTensor& saved, double p0 = 0.0, double p1 = 0.0)
    TCV_CUDA_ENTRY;
/// dst = src, converting dtype; src may be broadcast or strided.
TCV_CUDA_API void copy(const KTensor& dst, const KTensor& src) TCV_CUDA_ENTRY;
TCV_CUDA_API void fill(const KTensor& dst, double value) TCV_CUDA_ENTRY;
TCV_CUDA_API void where(const KTensor& out, const KTensor& cond, const KTensor& a, const KTensor& b)
    TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
