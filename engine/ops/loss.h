// Losses. Reductions follow torch.nn.functional.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

enum class Reduction : uint8_t { none, mean, sum };

/// logits (N, C) or (N, C, d1, ...), target i64 class indices (N) or (N, d1, ...).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, const Tensor& weight = Tensor());
/// log_probs (N, C, ...) and i64 targets.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                const Tensor& weight = Tensor());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
/// TorchCV's OHEM cross-entropy (FSOhemCELoss).
struct OhemOptions {
  /// Pixels whose softmax probability of their target class is below this are hard.
  double thresh = 0.7;
  /// At least this many pixels are kept (when there are that many): the
  /// threshold rises to the (min_kept + 1)-th smallest target probability.
  int64_t min_kept = 100000;
  int64_t ignore_index = 255;
  /// Class weights (C) or undefined: a kept pixel's loss is w[t]·nll.
  Tensor weight = {};
  /// mean (over the kept pixels, not their weights, as TorchCV) or sum.
  Reduction reduction = Reduction::mean;
};

/// Online hard example mining over class-indexed logits (N, C, d1, ...) and
/// targets (N, d1, ...): with p the softmax probability of each non-ignored
/// pixel's target class and p₍k₎ the k-th smallest of them (0-based, k =
/// min(min_kept, count − 1)), the pixels with p < max(p₍k₎, thresh) are kept and
/// the loss is the mean (or sum) of their w[t]·(−log p); 0 when none is kept.
/// The selection is a constant of the backward. One host sync for the counts.
Tensor ohem_cross_entropy(const Tensor& logits, const Tensor& target, const OhemOptions& opts = {});
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::mean,
                                        const Tensor& pos_weight = Tensor());

}  // namespace tcv::ops
