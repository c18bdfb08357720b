// What the fused optimizer steps of both backends share (kernels/cpu/optim.h,
// kernels/cuda/optim.h): the update rules' hyper-parameters (tcv/core/
// optim_params.h) as the loops use them, and the list of parameters one call
// updates.
#pragma once

#include <cmath>
#include <cstdint>

#include "tcv/core/optim_params.h"

namespace tcv::kernels {

using ::tcv::AdamDecay;
using ::tcv::AdamParams;
using ::tcv::SgdParams;

/// AdamParams as the update loops use them, in the parameter's type T: the bias
/// corrections folded into the step size and the denominator, weight decay as a
/// gradient term (l2) or a parameter factor (decoupled). Computed on the host,
/// once per step, the same way for both backends.
template <typename T>
struct AdamCoefficients {
  T decay, wd, b1, b2, a1, a2, step_size, bc2_sqrt, eps;

  static AdamCoefficients of(const AdamParams& h) {
    const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
    const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
    const bool decoupled = h.decay == AdamDecay::decoupled;
    return {static_cast<T>(decoupled ? 1.0 - h.lr * h.weight_decay : 1.0),
            static_cast<T>(decoupled ? 0.0 : h.weight_decay),
            static_cast<T>(h.beta1),
            static_cast<T>(h.beta2),
            static_cast<T>(1.0 - h.beta1),
            static_cast<T>(1.0 - h.beta2),
            static_cast<T>(h.lr / bc1),
            static_cast<T>(std::sqrt(bc2)),
            static_cast<T>(h.eps)};
  }
};

/// One parameter of a multi-tensor step: contiguous arrays of n elements of the
/// step's dtype on the step's device. s0 is the momentum buffer (SGD; null
/// without momentum) or exp_avg (Adam); s1 is exp_avg_sq (Adam). `first`: SGD's
/// momentum buffer is fresh and takes d as it is.
struct MultiTensorEntry {
  void* p = nullptr;
  const void* g = nullptr;
  void* s0 = nullptr;
  void* s1 = nullptr;
  int64_t n = 0;
  bool first = false;
};

}  // namespace tcv::kernels
