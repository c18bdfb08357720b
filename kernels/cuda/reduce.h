// Reductions on the GPU over a contiguous input viewed as (outer, r, inner),
// the same entry point and semantics as kernels/cpu/reduce.h.
#pragma once

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out (outer, inner) = sum / max / min over r. f32 and f16/bf16 sum in float,
/// f64 in double, integers in i64, each as a tree over the threads of a block
/// (and over blocks, in a second pass, when few outputs share a long r). For
/// max/min, `indices` (i64) receives the first extreme's position in r when
/// non-null; NaN wins max and min.
TCV_CUDA_API void reduce(ReduceOp op, const KTensor& out, const KTensor& in, int64_t outer,
                         int64_t r, int64_t inner, const KTensor* indices = nullptr) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
