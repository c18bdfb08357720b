#include "kernels/cpu/rng.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/philox_blocks.h"

namespace tcv::kernels::cpu {

namespace {

template <typename T>
void dropout_typed(T* out, T* mask, const T* x, int64_t n, double p, uint64_t seed, uint64_t base) {
  // Kept where (w >> 8) / 2^24 < 1 - p, i.e. (w >> 8) < ceil((1 - p) 2^24): an
  // integer compare (exact: scaling by 2^24 is) that vectorizes.
  const auto threshold = static_cast<uint32_t>(std::ceil((1.0 - p) * 16777216.0));
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for_each_philox_group(
      seed, base, (n + 3) / 4, [=](int64_t k0, int64_t blocks, const uint32_t* words) {
        const int64_t i0 = 4 * k0, count = std::min(4 * blocks, n - i0);
        T* __restrict__ om = mask + i0;
        T* __restrict__ oo = out + i0;
        const T* __restrict__ xi = x + i0;
        for (int64_t e = 0; e < count; ++e) {
          const T mk = static_cast<T>(scale * static_cast<T>((words[e] >> 8) < threshold));
          om[e] = mk;
          oo[e] = static_cast<T>(xi[e] * mk);
        }
      });
}

}  // namespace

void dropout(const KTensor& out, const KTensor& mask, const KTensor& x, double p, uint64_t seed,
             uint64_t base) {
  const int64_t n = x.numel();
  if (n == 0) return;
  switch (x.dtype) {
    case DType::f32:
      dropout_typed(out.ptr<float>(), mask.ptr<float>(), x.ptr<const float>(), n, p, seed, base);
      break;
    case DType::f64:
      dropout_typed(out.ptr<double>(), mask.ptr<double>(), x.ptr<const double>(), n, p, seed, base);
      break;
    case DType::f16:
      dropout_typed(out.ptr<Half>(), mask.ptr<Half>(), x.ptr<const Half>(), n, p, seed, base);
      break;
    case DType::bf16:
      dropout_typed(out.ptr<BFloat16>(), mask.ptr<BFloat16>(), x.ptr<const BFloat16>(), n, p, seed,
                    base);
      break;
    default:
      TCV_THROW("[dropout] not implemented for dtype ", dtype_name(x.dtype));
  }
}

}  // namespace tcv::kernels::cpu
