#include "layers/linear.h"

#include <cmath>

#include "engine/ops/linalg.h"
#include "layers/init.h"

namespace tcv::nn {

Linear::Linear(int64_t in, int64_t out, LinearOptions opts) : in_features(in), out_features(out) {
  TCV_CHECK(in > 0 && out > 0, "[Linear] features must be positive, got in_features=", in,
            ", out_features=", out);
  weight = register_parameter("weight", empty({out, in}));
  if (opts.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  return ops::linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

}  // namespace tcv::nn
