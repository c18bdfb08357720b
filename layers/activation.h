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

}  // namespace tcv::nn
