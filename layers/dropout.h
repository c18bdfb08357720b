// Dropout, as torch.nn.Dropout and torch.nn.Dropout2d.
#pragma once

#include "layers/module.h"

namespace tcv {
class Generator;
}

namespace tcv::nn {

/// What both dropouts hold: the probability p, in [0, 1], and the generator
/// their masks are drawn from (the default one when null).
class DropoutBase : public Module {
 public:
  std::string extra_repr() const override;

  double p;
  Generator* generator;

 protected:
  /// `name` names the layer in the range error.
  DropoutBase(const char* name, double p, Generator* gen);
};

/// In training, zeroes each element with probability p and scales the rest by
/// 1/(1-p); in eval, the identity.
class Dropout : public DropoutBase {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr) : DropoutBase("Dropout", p, gen) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
};

/// Channel dropout: in training, zeroes each whole channel of (N, C, H, W) with
/// probability p and scales the others by 1/(1-p); in eval, the identity.
class Dropout2d : public DropoutBase {
 public:
  explicit Dropout2d(double p = 0.5, Generator* gen = nullptr) : DropoutBase("Dropout2d", p, gen) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout2d"; }
};

}  // namespace tcv::nn
