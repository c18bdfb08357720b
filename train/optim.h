// Optimizers: SGD (momentum, nesterov, weight decay), Adam and AdamW, with the
// same update rules as torch.optim, parameter groups for weight decay, gradient
// clipping by global norm, and state that checkpoints save and restore.
#pragma once

#include <string>
#include <vector>

#include "layers/module.h"

namespace tcv::train {

/// Which parameters weight decay applies to.
enum class NoDecay : uint8_t {
  none,         ///< every parameter decays
  bn_and_bias,  ///< parameters with dim <= 1 (BatchNorm weights and biases, all biases) do not
};

/// Parameters that share a weight decay (torch.optim's param_groups).
struct ParamGroup {
  std::string name;            ///< "decay" or "no_decay"
  double weight_decay = 0.0;   ///< for the parameters of this group
  std::vector<size_t> params;  ///< indices into Optimizer::params()
};

class Optimizer {
 public:
  /// Takes the parameters by name (the names key the saved state).
  explicit Optimizer(nn::StateDict named_params, double lr);
  virtual ~Optimizer() = default;

  /// Applies one update from the parameters' .grad (parameters without one are skipped).
  virtual void step() = 0;
  /// Clears gradients (to undefined, or to zero in place).
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t step_count() const { return step_count_; }

  /// Per-parameter state as "<state>.<param name>" tensors plus "step".
  virtual nn::StateDict state_dict() const = 0;
  /// Restores state_dict(); errors name a missing or mis-shaped entry.
  virtual void load_state_dict(const nn::StateDict& state) = 0;

  const nn::StateDict& params() const { return params_; }
  /// The weight-decay groups; every parameter is in exactly one.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

 protected:
  /// Splits the parameters into a "decay" group (weight_decay) and, with
  /// NoDecay::bn_and_bias, a "no_decay" group (0) of the parameters with dim <= 1.
  void make_groups(double weight_decay, NoDecay no_decay);

  nn::StateDict params_;
  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t step_count_ = 0;
};

/// torch.nn.utils.clip_grad_norm_: when the L2 norm of all gradients together
/// exceeds max_norm, scales every gradient by max_norm / (norm + 1e-6). Returns
/// the norm before clipping. max_norm <= 0 only measures.
double clip_grad_norm(const nn::StateDict& params, double max_norm);

/// Whether every element of every defined floating tensor in `ts` is finite.
/// CUDA tensors: one fused f64 sum of squares per device and one host sync for
/// the whole list (finite iff every element is: an f32, f16 or bf16 square
/// cannot overflow f64); CPU tensors: one sum per tensor (and a sum of 0·x,
/// 0 or NaN, where finite values overflow the first).
bool all_finite(const std::vector<Tensor>& ts);

/// The name of the first floating tensor of `named` holding inf or NaN, or ""
/// when there is none. One check per tensor: for the error path, not each step.
std::string first_nonfinite(const nn::StateDict& named);

/// The gradient to seed backward from `loss` with: 1 + 0·loss, which is 1 for a
/// finite loss (the gradients are those of a plain backward, to the bit) and
/// NaN otherwise, so that a non-finite loss makes the gradients non-finite too.
/// Data-parallel training seeds with it: one rank's non-finite loss then reaches
/// every rank through the all-reduced gradients, and all ranks decide alike.
Tensor nonfinite_seed(const Tensor& loss);

/// The defined gradients of `params`, in order.
std::vector<Tensor> grads_of(const nn::StateDict& params);

/// (name, gradient) for the parameters of `params` that have one, in order.
nn::StateDict named_grads(const nn::StateDict& params);

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  NoDecay no_decay = NoDecay::none;
};

class SGD final : public Optimizer {
 public:
  SGD(nn::StateDict named_params, SGDOptions opts);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

 private:
  void step_one(size_t i, double lr, double momentum, double weight_decay);

  SGDOptions opts_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until first used
};

/// torch.optim.Adam: weight decay is L2, added to the gradient.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  NoDecay no_decay = NoDecay::none;
};

/// torch.optim.AdamW: weight decay is decoupled (p *= 1 - lr·weight_decay).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  NoDecay no_decay = NoDecay::none;
};

class Adam : public Optimizer {
 public:
  Adam(nn::StateDict named_params, AdamOptions opts);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

 protected:
  Adam(nn::StateDict named_params, AdamOptions opts, bool decoupled, const char* name);

 private:
  AdamOptions opts_;
  bool decoupled_;
  const char* name_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

class AdamW final : public Adam {
 public:
  AdamW(nn::StateDict named_params, AdamWOptions opts);
};

}  // namespace tcv::train
