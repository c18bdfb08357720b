#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {

namespace {
// Updates are a few flops per element: only large parameters are worth forking for.
constexpr int64_t kOptimGrain = 65536;
}  // namespace

template <typename T>
void sgd_step(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n,
              double lr_d, double momentum_d, double dampening_d, double wd_d, bool nesterov,
              bool first) {
  // Scalars in the parameter's type, as PyTorch's per-tensor ops compute them.
  const T lr = static_cast<T>(lr_d), mom = static_cast<T>(momentum_d);
  const T damp = static_cast<T>(1.0 - dampening_d), wd = static_cast<T>(wd_d);
  const bool use_mom = momentum_d != 0.0;
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
               int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
               AdamDecay mode, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const bool decoupled = mode == AdamDecay::decoupled;
  const T decay = static_cast<T>(decoupled ? 1.0 - lr * weight_decay : 1.0);
  const T wd = static_cast<T>(decoupled ? 0.0 : weight_decay);
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T a1 = static_cast<T>(1.0 - beta1), a2 = static_cast<T>(1.0 - beta2);
  const T step_size = static_cast<T>(lr / bc1);
  const T bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  const T e = static_cast<T>(eps);
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

template void sgd_step<float>(float*, const float*, float*, int64_t, double, double, double, double,
                              bool, bool);
template void sgd_step<double>(double*, const double*, double*, int64_t, double, double, double,
                               double, bool, bool);
template void adam_step<float>(float*, const float*, float*, float*, int64_t, double, double,
                               double, double, double, AdamDecay, int64_t);
template void adam_step<double>(double*, const double*, double*, double*, int64_t, double, double,
                                double, double, double, AdamDecay, int64_t);

}  // namespace tcv::kernels::cpu
