// Confusion matrices on the GPU, the same entry point and semantics as
// kernels/cpu/confusion.h: (target, prediction) pair counts from labels or
// from logits (argmax in the kernel), accumulated into an i64 (C, C) tensor.
#pragma once

#include "kernels/cpu/confusion.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// counts[t·C + p] += 1 per position with target t != ignore_index (pred (N, S)
/// i64 labels, or (N, C, S) f32/f64/f16/bf16 logits: the first maximum, NaN
/// above any number). Copies the two check numbers back (one sync).
TCV_CUDA_API ConfusionCheck confusion_matrix_add(const KTensor& counts, const KTensor& pred,
                                                 const KTensor& target, int64_t ignore_index)
    TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
