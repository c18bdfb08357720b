#include "layers/dropout.h"

#include "engine/ops/nn.h"

namespace tcv::nn {

DropoutBase::DropoutBase(const char* name, double p_, Generator* gen) : p(p_), generator(gen) {
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[", name, "] probability must be in [0, 1], got ", p);
}

std::string DropoutBase::extra_repr() const {
  return "p=" + repr_float(p) + ", inplace=False";
}

Tensor Dropout::forward(const Tensor& x) {
  return ops::dropout(x, {.p = p, .training = training_, .generator = generator});
}

Tensor Dropout2d::forward(const Tensor& x) {
  return ops::dropout2d(x, {.p = p, .training = training_, .generator = generator});
}

}  // namespace tcv::nn
