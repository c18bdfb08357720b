#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pose.h"
#include "kernels/cuda/rn.cuh"
#include "kernels/pose_common.h"

namespace tcv::kernels::cuda {
namespace {

__device__ __forceinline__ int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * n;
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

template <typename T>
__global__ void filter_kernel(T* out, const T* x, const T* wt, int64_t taps, int64_t n,
                              int64_t inner, int64_t total) {
  const int64_t radius = taps / 2;
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t j = e % inner;
    const int64_t i = (e / inner) % n;
    const int64_t o = e / (inner * n);
    const T* src = x + o * n * inner + j;
    T acc = T(0);
    for (int64_t t = 0; t < taps; ++t)
      acc = add_rn(acc, mul_rn(wt[t], src[reflect(i + t - radius, n) * inner]));
    out[e] = acc;
  }
}

template <typename T>
__global__ void peaks_kernel(uint8_t* mask, const T* x, T thr, int64_t h, int64_t w,
                             int64_t total) {
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t j = e % w;
    const int64_t i = (e / w) % h;
    const T* plane = x + (e / (h * w)) * h * w;
    mask[e] = is_peak(plane, thr, h, w, i, j);
  }
}

}  // namespace

void gaussian_filter1d(const KTensor& out, const KTensor& x, const KTensor& weights, int64_t outer,
                       int64_t n, int64_t inner) {
  check_gaussian_filter1d(out, x, weights);
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  TCV_DISPATCH_FLOAT(x.dtype, "gaussian_filter1d",
                     filter_kernel<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
                         out.ptr<scalar_t>(), x.ptr<const scalar_t>(),
                         weights.ptr<const scalar_t>(), weights.sizes[0], n, inner, total));
  TCV_CUDA_LAUNCH_CHECK();
}

void peak_mask(const KTensor& mask, const KTensor& x, double threshold, int64_t planes, int64_t h,
               int64_t w) {
  check_peak_mask(mask, x);
  const int64_t total = planes * h * w;
  if (total == 0) return;
  TCV_DISPATCH_FLOAT(x.dtype, "peak_mask",
                     peaks_kernel<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
                         mask.ptr<uint8_t>(), x.ptr<const scalar_t>(),
                         static_cast<scalar_t>(threshold), h, w, total));
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace tcv::kernels::cuda
