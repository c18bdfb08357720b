// Reductions over dimensions, with keepdim.
#pragma once

#include "engine/tensor.h"

namespace tcv::ops {

/// Sum over `dims` (all dims when empty).
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Variance over `dims`; `correction` 1 is the unbiased estimator (PyTorch's default).
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
/// Max/min over one dim: values and (i64) indices of the first extreme.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max/min of all elements (0-d).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

struct ConfusionOptions {
  /// Positions with this target are not counted.
  int64_t ignore_index = 255;
};

/// The (C, C) i64 confusion matrix on pred's device: counts[t][p] = the number
/// of positions with target t and prediction p, positions whose target is
/// ignore_index left out. pred is either class labels (i64, target's shape) or
/// logits (N, C, d1, ...) for targets (N, d1, ...), whose argmax over dim 1 is
/// taken in the kernel (the first maximum, as argmax). A target (or label)
/// that is neither ignore_index nor in [0, C) is an error naming it and its
/// position. Not differentiable. On CUDA: one small copy back (the check).
Tensor confusion_matrix(const Tensor& pred, const Tensor& target, int64_t num_classes,
                        const ConfusionOptions& opts = {});
/// counts += confusion_matrix(pred, target, C, opts), in place: counts is a
/// contiguous (C, C) i64 tensor on pred's device (an evaluation's running total).
void confusion_matrix_add_(const Tensor& counts, const Tensor& pred, const Tensor& target,
                           const ConfusionOptions& opts = {});

}  // namespace tcv::ops
