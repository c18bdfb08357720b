// Fused optimizer updates on the CPU: one pass over each parameter, no
// temporaries, split across OpenMP threads. The same entry points as
// kernels/cuda/optim.h; the update rules are in kernels/optim.h.
#pragma once

#include <vector>

#include "kernels/base.h"
#include "kernels/optim.h"

namespace tcv::kernels::cpu {

/// SGD over every entry (dt: f32 or f64).
void sgd_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const SgdParams& p);

/// Adam / AdamW over every entry (dt: f32 or f64).
void adam_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const AdamParams& p);

/// *out = Σ x² over every element of every tensor (contiguous, floating),
/// accumulated in f64 in fixed pieces added in order: the same on any thread count.
void sum_squares_multi(const std::vector<KTensor>& ts, double* out);

}  // namespace tcv::kernels::cpu
