// Bounds of their own (Tol::bound) for ops whose rounding errors need more
// than the ulps and sums of support/cuda_compare.h's formula: batch norm (with
// its fused activations and running statistics) and softmax/log-softmax. The
// CPU-vs-CUDA tests and the op table share them.
#pragma once

#include "support/cuda_compare.h"

namespace tcv::testing {

/// How batch_norm (batch_norm_relu, batch_norm_relu6) is called: inputs
/// x[, weight, bias][, running_mean, running_var], outputs y[, running_mean,
/// running_var] (the statistics as they are after the call).
struct BatchNormCall {
  enum class Act : uint8_t { none, relu, relu6 };
  bool affine = true;
  bool training = true;
  bool running = true;  ///< running statistics given (training updates them)
  Act act = Act::none;
  double momentum = 0.1;
  double eps = 1e-5;
};

/// batch_norm_f32_bounds (support/error_bound.h) for y and every gradient,
/// scaled by u/u_f32 for f64; 16-bit data adds one rounding of the result. The
/// running statistics r' = (1 − m)·r + m·s are within m times the statistic's
/// bound plus four roundings of their terms. The fused relu (relu6) leaves y's
/// bound as it is; where the normalized value is within y's bound of a kink the
/// mask may differ, which moves that element's gradient and, through the
/// channel's means, every other one's: that is added to the gradients' bounds.
BoundFn batch_norm_bound(const BatchNormCall& call);

/// conv2d's bound: y sums C/groups·R·S products and the bias, dx K/groups·R·S
/// products, dweight and dbias N·OH·OW terms: γ of the longest times Σ|terms|
/// (the op on magnitudes). A 3x3 stride-1 layer may run Winograd F(4x4, 3x3)
/// (oneDNN on AVX-512, cuDNN by its heuristics), which multiplies the bound by
/// (32/3)² (support/error_bound.h).
Tol conv2d_tol(const Shape& x, const Shape& w, const ops::Conv2dParams& p);

/// softmax_bounds (support/error_bound.h) of softmax or log_softmax along dim.
BoundFn softmax_bound(int64_t dim, bool log);

}  // namespace tcv::testing
