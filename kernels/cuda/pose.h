// Pose parsing's dense kernels on the GPU, the same entry points and
// semantics as kernels/cpu/pose.h. The filter sums its taps in the CPU's order
// with correctly rounded operations (no fused multiply-adds), so both give the
// same bits, and the same peaks.
#pragma once

#include "kernels/cpu/pose.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out = x correlated with weights along the middle axis of (outer, n, inner),
/// scipy's 'reflect' mode; one thread per output element.
TCV_CUDA_API void gaussian_filter1d(const KTensor& out, const KTensor& x, const KTensor& weights,
                                    int64_t outer, int64_t n, int64_t inner) TCV_CUDA_ENTRY;

/// mask = x > threshold and x >= its 8 neighbours inside the plane.
TCV_CUDA_API void peak_mask(const KTensor& mask, const KTensor& x, double threshold, int64_t planes,
                            int64_t h, int64_t w) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
