// Optimizers: SGD (momentum, nesterov, weight decay) and AdamW, with the same
// update rules as torch.optim, and state that checkpoints save and restore.
#pragma once

#include <string>
#include <vector>

#include "layers/module.h"

namespace tcv::train {

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

 protected:
  nn::StateDict params_;
  double lr_;
  int64_t step_count_ = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  SGD(nn::StateDict named_params, SGDOptions opts);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

 private:
  SGDOptions opts_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until first used
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW final : public Optimizer {
 public:
  AdamW(nn::StateDict named_params, AdamWOptions opts);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

 private:
  AdamWOptions opts_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace tcv::train
