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
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::mean,
                                        const Tensor& pos_weight = Tensor());

}  // namespace tcv::ops
