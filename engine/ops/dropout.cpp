// Dropout from counter-based random numbers: the mask depends on the
// generator's seed and offset only, never on the thread count.
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/rng.h"

namespace tcv::ops {

Tensor dropout(const Tensor& x, const DropoutOptions& o) {
  const double p = o.p;
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability must be in [0, 1], got ", p);
  TCV_CHECK(is_floating(x.dtype()), "[dropout] needs a floating tensor, got ",
            dtype_name(x.dtype()), " ", x.shape_str());
  if (!o.training || p == 0.0) return x;
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  // p = 1 would scale by 1/0: everything is dropped, and the gradient is zero too.
  if (p == 1.0) return mul(x, zeros({}, opts));
  // One fused pass draws the Philox words rand() would (element i reads word
  // i % 4 of block base + i / 4, so CPU and CUDA masks match for the same
  // generator state) and writes the mask and x · mask; the backward multiplies
  // by the saved mask.
  Tensor xc = x.detach().contiguous();
  Tensor out = empty(x.shape(), opts), mask = empty(x.shape(), opts);
  Generator& g = o.generator ? *o.generator : default_generator();
  const uint64_t seed = g.seed();
  const uint64_t base = g.advance(static_cast<uint64_t>((x.numel() + 3) / 4));
  if (x.numel() > 0)
    TCV_KERNEL(x.device(), dropout, out.strided_desc(), mask.strided_desc(), xc.strided_desc(), p,
               seed, base);
  autograd::record("dropout", {x}, {out}, [mask](std::vector<Tensor>& gs) {
    return std::vector<Tensor>{mul(gs[0], mask)};
  });
  return out;
}

Tensor dropout2d(const Tensor& x, const DropoutOptions& o) {
  const double p = o.p;
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[dropout2d] probability must be in [0, 1], got ", p);
  TCV_CHECK(is_floating(x.dtype()), "[dropout2d] needs a floating tensor, got ",
            dtype_name(x.dtype()), " ", x.shape_str());
  TCV_CHECK(x.dim() >= 3, "[dropout2d] expects (N, C, d1, ...), got ", x.shape_str());
  if (!o.training || p == 0.0) return x;
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
      Tensor u =
          rand({x.size(0), x.size(1)}, {.dtype = DType::f64, .device = x.device()}, o.generator);
      mask = where(lt(u, 1.0 - p), full({}, 1.0 / (1.0 - p), opts), zeros({}, opts))
                 .reshape(mask_shape);
    }
  }
  return mul(x, mask);
}

}  // namespace tcv::ops
