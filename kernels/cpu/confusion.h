// Confusion matrices for segmentation evaluation: counts of (target class,
// predicted class) pairs over every position, from predicted labels or from
// logits (argmax over the classes taken in the kernel).
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {

/// What a confusion-matrix kernel saw besides the pairs it counted.
struct ConfusionCheck {
  /// Positions whose target is neither ignore_index nor in [0, C), or whose
  /// predicted label is outside [0, C); they are not counted.
  int64_t bad = 0;
  /// The first such position (row-major over the target's (N, S)), -1 if none.
  int64_t first_bad = -1;
};

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// counts[t·C + p] += 1 for every position whose target t is not ignore_index,
/// p being its prediction: pred (N, S) i64 labels, or pred (N, C, S) f32/f64
/// logits whose argmax over C is taken (the first maximum, NaN above any
/// number, as torch.argmax). counts (C, C) i64, target (N, S) i64, all contiguous.
ConfusionCheck confusion_matrix_add(const KTensor& counts, const KTensor& pred,
                                    const KTensor& target, int64_t ignore_index);

}  // namespace tcv::kernels::cpu
