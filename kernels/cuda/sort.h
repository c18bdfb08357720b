// Sorting kernels on the GPU, the same entry points and semantics as
// kernels/cpu/sort.h: stable sort and top-k along one dim of a contiguous
// input viewed as (outer, n, inner). NaN sorts above every number and -0.0
// equals 0.0, as on the CPU.
#pragma once

#include "kernels/cpu/sort.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// values/indices (outer, n, inner) = in sorted along n (CUB segmented stable
/// sort of order-preserving integer keys); equal values keep their input order.
TCV_CUDA_API void sort(const KTensor& values, const KTensor& indices, const KTensor& in,
                       int64_t outer, int64_t n, int64_t inner, bool descending) TCV_CUDA_ENTRY;

/// values/indices (outer, k, inner) = the k largest (or smallest) along n in
/// sorted order, ties to the lower index: a stable sort, of which k are kept.
TCV_CUDA_API void topk(const KTensor& values, const KTensor& indices, const KTensor& in,
                       int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest)
    TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
