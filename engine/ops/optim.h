// Fused optimizer updates and the gradient norm as ops: one pass per device
// and dtype updates a whole list of parameters in place with the update rules
// of torch.optim.SGD and Adam/AdamW (tcv/core/optim_params.h). train/optim.h builds
// the optimizers on them.
#pragma once

#include <initializer_list>
#include <vector>

#include "engine/tensor.h"
#include "tcv/core/optim_params.h"

namespace tcv::ops {

using ::tcv::AdamDecay;
using ::tcv::AdamParams;
using ::tcv::SgdParams;

/// One parameter of a fused step, with its gradient and optimizer state.
struct ParamSlot {
  Tensor param{};
  Tensor grad{};
  Tensor state0{};     ///< SGD's momentum buffer (undefined without momentum); Adam's exp_avg
  Tensor state1{};     ///< Adam's exp_avg_sq
  bool first = false;  ///< SGD: the momentum buffer is new and takes the gradient as it is
};

/// Whether the fused steps take this parameter: f32 or f64 and contiguous, a
/// gradient of its dtype and device (any layout), and the defined states
/// contiguous with its shape, dtype and device. Optimizers update the others
/// with tensor ops.
bool fused_step_supported(const Tensor& param, const Tensor& grad,
                          std::initializer_list<const Tensor*> states);

/// SGD (SgdParams) over every slot, in place: one kernel per device and dtype.
/// Every slot must pass fused_step_supported; with momentum, state0 is defined.
void sgd_step_(const std::vector<ParamSlot>& slots, const SgdParams& p);

/// Adam or AdamW (AdamParams) over every slot, in place: one kernel per device
/// and dtype. Every slot must pass fused_step_supported, state0 and state1 defined.
void adam_step_(const std::vector<ParamSlot>& slots, const AdamParams& p);

/// Σ x² over every element of every tensor (floating, any layout, any devices),
/// accumulated in f64: one pass per device, and one host sync per GPU.
double sum_of_squares(const std::vector<Tensor>& ts);

/// torch.nn.utils.clip_grad_norm_ over the tensors: returns the L2 norm of all of
/// them together; when max_norm > 0 and the norm exceeds it, scales each tensor
/// in place by max_norm / (norm + 1e-6).
double clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm);

}  // namespace tcv::ops
