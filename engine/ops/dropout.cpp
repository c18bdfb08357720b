// Dropout from counter-based random numbers: the mask depends on the
// generator's seed and offset only, never on the thread count.
#include <cmath>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/philox_blocks.h"
#include "engine/rng.h"
#include "kernels/cuda/rng.h"

namespace tcv::ops {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability must be in [0, 1], got ", p);
  TCV_CHECK(is_floating(x.dtype()), "[dropout] needs a floating tensor, got ",
            dtype_name(x.dtype()), " ", x.shape_str());
  if (!training || p == 0.0) return x;
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  // p = 1 would scale by 1/0: everything is dropped, and the gradient is zero too.
  if (p == 1.0) return mul(x, zeros({}, opts));
  if (x.device().is_cpu() && x.dtype() != DType::f32 && x.dtype() != DType::f64) {
    // 16-bit floats on the CPU: the mask through tensor ops (same draws).
    Tensor mask;  // (x.shape): 0 where dropped, 1/(1-p) where kept
    {
      NoGradGuard ng;
      Tensor u = rand(x.shape(), {.dtype = DType::f64, .device = x.device()}, gen);
      mask = where(lt(u, 1.0 - p), full({}, 1.0 / (1.0 - p), opts), zeros({}, opts));
    }
    return mul(x, mask);  // records dx = dy · mask
  }
  // One fused pass draws the Philox words rand() would (element i reads word
  // i % 4 of block base + i / 4, so CPU and CUDA masks match for the same
  // generator state) and writes the mask and x · mask; the backward multiplies
  // by the saved mask.
  Tensor xc = x.detach().contiguous();
  Tensor out = empty(x.shape(), opts), mask = empty(x.shape(), opts);
  Generator& g = gen ? *gen : default_generator();
  const int64_t n = x.numel();
  const uint64_t seed = g.seed();
  const uint64_t base = g.advance(static_cast<uint64_t>((n + 3) / 4));
  if (x.device().is_cuda()) {
    kernels::cuda::DeviceGuard guard(x.device().index);
    kernels::cuda::dropout(out.k(), mask.k(), xc.k(), p, seed, base);
  } else {
    // Kept where (w >> 8) / 2^24 < 1 - p, i.e. (w >> 8) < ceil((1 - p) 2^24): an
    // integer compare (exact: scaling by 2^24 is) that vectorizes.
    const auto threshold = static_cast<uint32_t>(std::ceil((1.0 - p) * 16777216.0));
    auto run = [&](auto* o, auto* m, const auto* in) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
      const T scale = static_cast<T>(1.0 / (1.0 - p));
      for_each_philox_group(seed, base, (n + 3) / 4,
                            [=](int64_t k0, int64_t blocks, const uint32_t* words) {
                              const int64_t i0 = 4 * k0, count = std::min(4 * blocks, n - i0);
                              T* __restrict__ om = m + i0;
                              T* __restrict__ oo = o + i0;
                              const T* __restrict__ xi = in + i0;
                              for (int64_t e = 0; e < count; ++e) {
                                const T mk = scale * static_cast<T>((words[e] >> 8) < threshold);
                                om[e] = mk;
                                oo[e] = xi[e] * mk;
                              }
                            });
    };
    if (x.dtype() == DType::f32)
      run(out.data<float>(), mask.data<float>(), xc.data<float>());
    else
      run(out.data<double>(), mask.data<double>(), xc.data<double>());
  }
  autograd::record("dropout", {x}, {out}, [mask](std::vector<Tensor>& gs) {
    return std::vector<Tensor>{mul(gs[0], mask)};
  });
  return out;
}

Tensor dropout2d(const Tensor& x, double p, bool training, Generator* gen) {
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[dropout2d] probability must be in [0, 1], got ", p);
  TCV_CHECK(is_floating(x.dtype()), "[dropout2d] needs a floating tensor, got ",
            dtype_name(x.dtype()), " ", x.shape_str());
  TCV_CHECK(x.dim() >= 3, "[dropout2d] expects (N, C, d1, ...), got ", x.shape_str());
  if (!training || p == 0.0) return x;
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  // One scale per channel, broadcast over the spatial dims: the forward is one
  // multiply, and the backward (mul's) multiplies by the same (N, C, 1, ...) scale.
  Shape mask_shape(static_cast<size_t>(x.dim()), 1);
  mask_shape[0] = x.size(0);
  mask_shape[1] = x.size(1);
  Tensor mask;  // (N, C, 1, ...): 0 where dropped, 1/(1-p) where kept
  {
    NoGradGuard ng;
    if (p == 1.0) {
      mask = zeros(mask_shape, opts);
    } else {
      Tensor u = rand({x.size(0), x.size(1)}, {.dtype = DType::f64, .device = x.device()}, gen);
      mask = where(lt(u, 1.0 - p), full({}, 1.0 / (1.0 - p), opts), zeros({}, opts))
                 .reshape(mask_shape);
    }
  }
  return mul(x, mask);
}

}  // namespace tcv::ops
