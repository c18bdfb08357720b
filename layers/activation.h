// Activation layers.
#pragma once

#include "layers/module.h"

namespace tcv::nn {

/// max(x, 0).
class ReLU : public Module {
 public:
  ReLU() = default;
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

/// min(max(x, 0), 6), as torch.nn.ReLU6 (MobileNetV2); the gradient passes for
/// 0 < x < 6, as torch's hardtanh.
class ReLU6 : public Module {
 public:
  ReLU6() = default;
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU6"; }
};

}  // namespace tcv::nn
