// Loss kernels on the CPU: fused log-softmax + NLL (with label smoothing and
// class weights) over class-indexed targets, NLL over log-probabilities, and
// pointwise regression / binary losses, each with its backward.
//
// Class losses see their input as contiguous (N, C, S), S being the product
// of the spatial dims (1 for plain classification), and targets as (N, S) i64.
#pragma once

#include "kernels/base.h"
#include "kernels/pointwise.h"

namespace tcv::kernels {

/// What a class loss needs for its mean: the number of non-ignored targets and
/// the sum of their class weights (equal to the count without weights); and
/// the first target that is neither ignore_index nor a class, if any.
struct ClassLossStats {
  int64_t count = 0;
  double weight_sum = 0.0;
  bool out_of_bounds = false;
  int64_t bad_target = 0;
};

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// *stats = the count and weight sum of the targets, or the first target that
/// is neither ignore_index nor in [0, classes). target (N, S) i64 contiguous;
/// weight (C) or null.
void class_targets(const KTensor& target, int64_t classes, int64_t ignore_index,
                   const KTensor* weight, ClassLossStats* stats);

/// For each position (n, s) with target t != ignore_index, lse = log Σ_c exp x[n, c, s]:
///   nll[n, s] = w[t]·(lse − x[n, t, s]),  smooth[n, s] = Σ_c w[c]·(lse − x[n, c, s]),
/// with w ≡ 1 when weight is null. Ignored positions get 0 in nll and smooth.
/// smooth may be null. lse (N, S) is kept for the backward. Targets must have
/// passed class_targets.
void cross_entropy_forward(const KTensor& nll, const KTensor* smooth, const KTensor& lse,
                           const KTensor& logits, const KTensor& target, const KTensor* weight,
                           int64_t ignore_index);

/// dlogits[n, c, s] = a·w[t]·(p_c − [c = t]) + b·(p_c·Σw − w[c]), p = exp(x − lse),
/// a = grad[n, s]·scale_nll, b = grad[n, s]·scale_smooth; 0 at ignored positions.
/// grad is (N, S) and may be broadcast (stride 0).
void cross_entropy_backward(const KTensor& dlogits, const KTensor& logits, const KTensor& target,
                            const KTensor* weight, const KTensor& lse, int64_t ignore_index,
                            const KTensor& grad, double scale_nll, double scale_smooth);

/// out[n, s] = −w[t]·log_probs[n, t, s], 0 where t == ignore_index.
void nll_forward(const KTensor& out, const KTensor& log_probs, const KTensor& target,
                 const KTensor* weight, int64_t ignore_index);

/// dlog_probs is zero except dlog_probs[n, t, s] = −w[t]·grad[n, s]·scale.
void nll_backward(const KTensor& dlog_probs, const KTensor& target, const KTensor* weight,
                  int64_t ignore_index, const KTensor& grad, double scale);

/// out = loss(input, target) elementwise; all operands broadcast to out's shape
/// and of one floating dtype.
///   mse:             (x − y)²
///   smooth_l1:       |d| < beta ? 0.5·d²/beta : |d| − 0.5·beta, d = x − y
///   bce_with_logits: (1 − y)·x + (1 + (pw − 1)·y)·softplus(−x), softplus
///                    computed as max(z, 0) + log1p(exp(−|z|)); pw ≡ 1 when null.
void pointwise_loss(PointwiseLoss loss, const KTensor& out, const KTensor& input,
                    const KTensor& target, const KTensor* pos_weight, double beta);

/// d = grad · ∂loss/∂arg elementwise (same broadcasting as the forward).
void pointwise_loss_backward(PointwiseLoss loss, LossArg arg, const KTensor& d, const KTensor& grad,
                             const KTensor& input, const KTensor& target, const KTensor* pos_weight,
                             double beta);

}  // namespace tcv::kernels::cpu
