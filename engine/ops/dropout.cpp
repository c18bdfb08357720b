// Dropout from counter-based random numbers: the mask depends on the
// generator's seed and offset only, never on the thread count.
#include "engine/autograd.h"
#include "engine/ops.h"
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
  if (x.device().is_cuda()) {
    // One fused kernel draws the same Philox words as rand() below would (so
    // masks match the CPU's for the same generator state) and writes the mask
    // and x · mask; the backward multiplies by the saved mask.
    Tensor xc = x.detach().contiguous();
    Tensor out = empty(x.shape(), opts), mask = empty(x.shape(), opts);  // (x.shape)
    Generator& g = gen ? *gen : default_generator();
    const uint64_t seed = g.seed();
    const uint64_t base = g.advance(static_cast<uint64_t>((x.numel() + 3) / 4));
    {
      kernels::cuda::DeviceGuard guard(x.device().index);
      kernels::cuda::dropout(out.k(), mask.k(), xc.k(), p, seed, base);
    }
    autograd::record("dropout", {x}, {out}, [mask](std::vector<Tensor>& gs) {
      return std::vector<Tensor>{mul(gs[0], mask)};
    });
    return out;
  }
  Tensor mask;  // (x.shape): 0 where dropped, 1/(1-p) where kept
  {
    NoGradGuard ng;
    Tensor u = rand(x.shape(), {.dtype = DType::f64, .device = x.device()}, gen);
    mask = where(lt(u, 1.0 - p), full({}, 1.0 / (1.0 - p), opts), zeros({}, opts));
  }
  // mul records dx = dy · mask.
  return mul(x, mask);
}

}  // namespace tcv::ops
