#include "layers/l2norm.h"

#include "engine/ops.h"

namespace tcv::nn {

Tensor l2_norm(const Tensor& x, const Tensor& scale, double eps) {
  TCV_CHECK(x.dim() >= 2, "[l2_norm] expects (N, C, ...) input, got ", x.shape_str());
  TCV_CHECK(scale.dim() == 1 && scale.size(0) == x.size(1), "[l2_norm] scale ", scale.shape_str(),
            " does not match the ", x.size(1), " channels of ", x.shape_str());
  Shape s(static_cast<size_t>(x.dim()), 1);
  s[1] = x.size(1);
  return ops::mul(scale.view(s), ops::l2_normalize(x, 1, eps));
}

L2Norm::L2Norm(int64_t channels_, double scale, double eps_) : channels(channels_), eps(eps_) {
  TCV_CHECK(channels > 0, "[L2Norm] channels must be positive, got ", channels);
  weight = register_parameter("weight", full({channels}, scale));
}

Tensor L2Norm::forward(const Tensor& x) {
  return l2_norm(x, weight, eps);
}

std::string L2Norm::extra_repr() const {
  return std::to_string(channels) + ", eps=" + repr_float(eps);
}

}  // namespace tcv::nn
