// Pose parsing's dense ops dispatch to kernels/{cpu,cuda}/pose.
#include "engine/ops/pose.h"

#include <cmath>

#include "engine/backend.h"
#include "kernels/cpu/pose.h"
#include "kernels/cuda/pose.h"

namespace tcv::ops {

namespace {

void check_maps(const char* op, const Tensor& x) {
  TCV_CHECK(x.defined() && x.dim() >= 2, "[", op, "] x must be (..., H, W), got ",
            x.defined() ? x.shape_str() : "undefined");
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
            "] x must be f32 or f64, got ", dtype_name(x.dtype()));
}

}  // namespace

std::vector<double> gaussian_taps(double sigma, double truncate) {
  TCV_CHECK(std::isfinite(sigma) && sigma > 0, "[gaussian_filter2d] sigma must be positive, got ",
            sigma);
  TCV_CHECK(std::isfinite(truncate) && truncate > 0,
            "[gaussian_filter2d] truncate must be positive, got ", truncate);
  const auto radius = static_cast<int64_t>(truncate * sigma + 0.5);
  std::vector<double> w(static_cast<size_t>(2 * radius + 1));
  double sum = 0;
  for (int64_t t = -radius; t <= radius; ++t) {
    const double v = std::exp(-0.5 / (sigma * sigma) * static_cast<double>(t * t));
    w[static_cast<size_t>(t + radius)] = v;
    sum += v;
  }
  for (double& v : w) v /= sum;
  return w;
}

Tensor gaussian_filter2d(const Tensor& x, double sigma, double truncate) {
  check_maps("gaussian_filter2d", x);
  const std::vector<double> taps = gaussian_taps(sigma, truncate);
  const Tensor weights =
      from_vector(taps, {static_cast<int64_t>(taps.size())}).to(x.dtype()).to(x.device());
  const Tensor xc = x.detach().contiguous();
  const int64_t h = x.size(-2), w = x.size(-1);
  const int64_t planes = h * w == 0 ? 0 : x.numel() / (h * w);
  Tensor tmp = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), gaussian_filter1d, tmp.strided_desc(), xc.strided_desc(),
             weights.strided_desc(), planes, h, w);
  TCV_KERNEL(x.device(), gaussian_filter1d, out.strided_desc(), tmp.strided_desc(),
             weights.strided_desc(), planes * h, w, 1);
  return out;
}

Tensor peak_mask(const Tensor& x, double threshold) {
  check_maps("peak_mask", x);
  TCV_CHECK(!std::isnan(threshold), "[peak_mask] threshold is NaN");
  const Tensor xc = x.detach().contiguous();
  const int64_t h = x.size(-2), w = x.size(-1);
  const int64_t planes = h * w == 0 ? 0 : x.numel() / (h * w);
  Tensor mask = empty(x.shape(), {.dtype = DType::u8, .device = x.device()});
  TCV_KERNEL(x.device(), peak_mask, mask.strided_desc(), xc.strided_desc(), threshold, planes, h,
             w);
  return mask;
}

}  // namespace tcv::ops
