// What the pose kernels of both backends (kernels/cpu/pose.cpp,
// kernels/cuda/pose.cu) share: the operands they take, checked once
// (engine/ops/pose.cpp always hands them such operands, so a failure here is a
// caller's bug), and the peak test.
#pragma once

#include "kernels/base.h"
#include "kernels/pointwise.h"  // TCV_HOST_DEVICE

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

/// Whether (i, j) of the h x w `plane` is a peak: above `thr` and not below any
/// of its up to eight neighbours.
template <typename T>
TCV_HOST_DEVICE bool is_peak(const T* plane, T thr, int64_t h, int64_t w, int64_t i, int64_t j) {
  const T v = plane[i * w + j];
  bool peak = v > thr;
  for (int64_t di = -1; di <= 1 && peak; ++di)
    for (int64_t dj = -1; dj <= 1 && peak; ++dj) {
      const int64_t y = i + di, x = j + dj;
      if ((di == 0 && dj == 0) || y < 0 || y >= h || x < 0 || x >= w) continue;
      peak = v >= plane[y * w + x];
    }
  return peak;
}

}  // namespace tcv::kernels
