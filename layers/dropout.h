// Dropout, as torch.nn.Dropout and torch.nn.Dropout2d.
#pragma once

#include "layers/module.h"

namespace tcv {
class Generator;
}

namespace tcv::nn {

/// In training, zeroes each element with probability p and scales the rest by
/// 1/(1-p); in eval, the identity.
class Dropout : public Module {
 public:
  /// gen: the generator masks are drawn from (the default one when null).
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p;
  Generator* generator;
};

/// Channel dropout: in training, zeroes each whole channel of (N, C, H, W) with
/// probability p and scales the others by 1/(1-p); in eval, the identity.
class Dropout2d : public Module {
 public:
  /// gen: the generator masks are drawn from (the default one when null).
  explicit Dropout2d(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout2d"; }
  std::string extra_repr() const override;

  double p;
  Generator* generator;
};

}  // namespace tcv::nn
