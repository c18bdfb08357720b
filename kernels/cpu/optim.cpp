#include "kernels/cpu/optim.h"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/exp_sum.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {

namespace {
// Updates are a few flops per element: only large parameters are worth forking for.
constexpr int64_t kOptimGrain = 65536;
// Elements per piece of a sum of squares: pieces are summed in parallel, then in order.
constexpr int64_t kSquaresPiece = 16384;

template <typename T>
void sgd_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n,
              const SgdParams& h, bool first) {
  // Scalars in the parameter's type, as PyTorch's per-tensor ops compute them.
  const T lr = static_cast<T>(h.lr), mom = static_cast<T>(h.momentum);
  const T damp = static_cast<T>(1.0 - h.dampening), wd = static_cast<T>(h.weight_decay);
  const bool use_mom = h.momentum != 0.0, nesterov = h.nesterov;
  parallel_for(n, kOptimGrain, [&](int64_t b, int64_t e) {
    if (!use_mom) {
      for (int64_t i = b; i < e; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    } else if (first) {
      for (int64_t i = b; i < e; ++i) {
        const T d = g[i] + wd * p[i];
        buf[i] = d;
        p[i] -= lr * (nesterov ? d + mom * d : d);
      }
    } else {
      for (int64_t i = b; i < e; ++i) {
        const T d = g[i] + wd * p[i];
        const T m = mom * buf[i] + damp * d;
        buf[i] = m;
        p[i] -= lr * (nesterov ? d + mom * m : m);
      }
    }
  });
}

template <typename T>
void adam_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
               int64_t n, const AdamParams& h) {
  // Plain copies, not structured bindings: clang 14 (scripts/fuzz.sh's) cannot
  // capture those in the lambda below.
  const AdamCoefficients<T> c = AdamCoefficients<T>::of(h);
  const T decay = c.decay, wd = c.wd, b1 = c.b1, b2 = c.b2, a1 = c.a1, a2 = c.a2;
  const T step_size = c.step_size, bc2_sqrt = c.bc2_sqrt, e = c.eps;
  parallel_for(n, kOptimGrain, [&](int64_t b, int64_t end) {
    for (int64_t i = b; i < end; ++i) {
      const T gi = wd != T(0) ? g[i] + wd * p[i] : g[i];
      const T mi = b1 * m[i] + a1 * gi;
      const T vi = b2 * v[i] + a2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      const T denom = std::sqrt(vi) / bc2_sqrt + e;
      p[i] = p[i] * decay - step_size * (mi / denom);
    }
  });
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  const int64_t pieces = (n + kSquaresPiece - 1) / kSquaresPiece;
  std::vector<double> part(static_cast<size_t>(pieces));
  parallel_for(pieces, std::max<int64_t>(1, kGrain / kSquaresPiece), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const T* xk = x + k * kSquaresPiece;
      part[static_cast<size_t>(k)] =
          lane_sum(std::min(kSquaresPiece, n - k * kSquaresPiece), [xk](int64_t i) {
            // f16/bf16 widen through float (their arithmetic type), f32/f64 directly.
            double v;
            if constexpr (std::is_same_v<T, double>)
              v = xk[i];
            else
              v = static_cast<double>(static_cast<float>(xk[i]));
            return v * v;
          });
    }
  });
  double s = 0.0;
  for (const double v : part) s += v;
  return s;
}

}  // namespace

void sgd_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const SgdParams& p) {
  TCV_DISPATCH_FLOAT(dt, "SGD", {
    for (const MultiTensorEntry& e : ts)
      sgd_step<scalar_t>(static_cast<scalar_t*>(e.p), static_cast<const scalar_t*>(e.g),
                         static_cast<scalar_t*>(e.s0), e.n, p, e.first);
  });
}

void adam_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const AdamParams& p) {
  TCV_DISPATCH_FLOAT(dt, "Adam", {
    for (const MultiTensorEntry& e : ts)
      adam_step<scalar_t>(static_cast<scalar_t*>(e.p), static_cast<const scalar_t*>(e.g),
                          static_cast<scalar_t*>(e.s0), static_cast<scalar_t*>(e.s1), e.n, p);
  });
}

void sum_squares_multi(const std::vector<KTensor>& ts, double* out) {
  double total = 0.0;
  for (const KTensor& t : ts) {
    switch (t.dtype) {
      case DType::f32:
        total += sum_squares(t.ptr<const float>(), t.numel());
        break;
      case DType::f64:
        total += sum_squares(t.ptr<const double>(), t.numel());
        break;
      case DType::f16:
        total += sum_squares(t.ptr<const Half>(), t.numel());
        break;
      case DType::bf16:
        total += sum_squares(t.ptr<const BFloat16>(), t.numel());
        break;
      default:
        TCV_THROW("[sum_of_squares] takes floating tensors, got ", dtype_name(t.dtype));
    }
  }
  *out = total;
}

}  // namespace tcv::kernels::cpu
