// Fully connected layer, as torch.nn.Linear.
#pragma once

#include "layers/module.h"

namespace tcv::nn {

struct LinearOptions {
  bool bias = true;
};

/// y = x · weightᵀ + bias. Parameters "weight" (out, in) and "bias" (out),
/// initialised as PyTorch: U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions opts = {});

  Tensor forward(const Tensor& x) override;  // (..., in) -> (..., out)
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or undefined
};

}  // namespace tcv::nn
