#include "kernels/cpu/pose.h"

#include "kernels/pose_common.h"

namespace tcv::kernels::cpu {

namespace {

// scipy's 'reflect' extension of an axis of length n (period 2n).
inline int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * n;
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

template <typename T>
void filter_typed(T* out, const T* x, const T* wt, int64_t taps, int64_t outer, int64_t n,
                  int64_t inner) {
  const int64_t radius = taps / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      const T* src = x + o * n * inner;
      T* dst = out + (o * n + i) * inner;
      const bool interior = i - radius >= 0 && i + radius < n;
      for (int64_t j = 0; j < inner; ++j) dst[j] = T(0);
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t r = interior ? i + t - radius : reflect(i + t - radius, n);
        const T wv = wt[t];
        const T* row = src + r * inner;
        for (int64_t j = 0; j < inner; ++j) dst[j] += wv * row[j];
      }
    }
}

template <typename T>
void peaks_typed(uint8_t* mask, const T* x, T thr, int64_t planes, int64_t h, int64_t w) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < h; ++i) {
      const T* plane = x + p * h * w;
      for (int64_t j = 0; j < w; ++j) mask[(p * h + i) * w + j] = is_peak(plane, thr, h, w, i, j);
    }
}

}  // namespace

void gaussian_filter1d(const KTensor& out, const KTensor& x, const KTensor& weights, int64_t outer,
                       int64_t n, int64_t inner) {
  check_gaussian_filter1d(out, x, weights);
  if (outer * n * inner == 0) return;
  TCV_DISPATCH_FLOAT(
      x.dtype, "gaussian_filter1d",
      filter_typed<scalar_t>(out.ptr<scalar_t>(), x.ptr<const scalar_t>(),
                             weights.ptr<const scalar_t>(), weights.sizes[0], outer, n, inner));
}

void peak_mask(const KTensor& mask, const KTensor& x, double threshold, int64_t planes, int64_t h,
               int64_t w) {
  check_peak_mask(mask, x);
  if (planes * h * w == 0) return;
  TCV_DISPATCH_FLOAT(x.dtype, "peak_mask",
                     peaks_typed<scalar_t>(mask.ptr<uint8_t>(), x.ptr<const scalar_t>(),
                                           static_cast<scalar_t>(threshold), planes, h, w));
}

}  // namespace tcv::kernels::cpu
