// Losses. Reductions follow torch.nn.functional.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

enum class Reduction : uint8_t { none, mean, sum };

/// cross_entropy's options, torch.nn.functional.cross_entropy's keywords:
/// `cross_entropy(logits, y, {.ignore_index = 255, .label_smoothing = 0.1})`.
struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  /// Targets equal to this count neither in the loss nor in the mean.
  int64_t ignore_index = -100;
  /// In [0, 1]: the target distribution mixes the one-hot class with the uniform one.
  double label_smoothing = 0.0;
  /// (C) class weights, or undefined for 1.
  Tensor weight{};
};

/// logits (N, C) or (N, C, d1, ...), target i64 class indices (N) or (N, d1, ...).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& opts = {});

/// nll_loss's options, torch.nn.functional.nll_loss's keywords.
struct NllLossOptions {
  Reduction reduction = Reduction::mean;
  int64_t ignore_index = -100;
  Tensor weight{};  ///< (C) class weights, or undefined for 1
};

/// log_probs (N, C, ...) and i64 targets.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& opts = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// smooth_l1_loss's options: `beta` is where the loss turns from quadratic to linear.
struct SmoothL1Options {
  Reduction reduction = Reduction::mean;
  double beta = 1.0;
};
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1Options& opts = {});

/// binary_cross_entropy_with_logits' options: `pos_weight` (broadcast to the
/// input) weighs the positive term, or is undefined for 1.
struct BceWithLogitsOptions {
  Reduction reduction = Reduction::mean;
  Tensor pos_weight{};
};
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const BceWithLogitsOptions& opts = {});

}  // namespace tcv::ops
