// What the pose kernels of both backends (kernels/cpu/pose.cpp,
// kernels/cuda/pose.cu) take, checked once: engine/ops/pose.cpp always hands
// them such operands, so a failure here is a caller's bug.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {

inline void check_gaussian_filter1d(const KTensor& out, const KTensor& x, const KTensor& weights) {
  TCV_CHECK(out.is_contiguous() && x.is_contiguous() && weights.is_contiguous() &&
                x.dtype == out.dtype && weights.dtype == x.dtype && weights.ndim == 1 &&
                weights.sizes[0] % 2 == 1,
            "[gaussian_filter1d] kernel needs contiguous operands of one dtype and odd taps");
}

inline void check_peak_mask(const KTensor& mask, const KTensor& x) {
  TCV_CHECK(mask.is_contiguous() && x.is_contiguous() && mask.dtype == DType::u8,
            "[peak_mask] kernel needs a contiguous x and u8 mask");
}

}  // namespace tcv::kernels
