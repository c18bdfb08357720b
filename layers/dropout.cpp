#include "layers/dropout.h"

#include "engine/ops/nn.h"

namespace tcv::nn {

Dropout::Dropout(double p_, Generator* gen) : p(p_), generator(gen) {
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[Dropout] probability must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  return ops::dropout(x, p, training_, generator);
}

std::string Dropout::extra_repr() const {
  return "p=" + repr_float(p) + ", inplace=False";
}

Dropout2d::Dropout2d(double p_, Generator* gen) : p(p_), generator(gen) {
  TCV_CHECK(p >= 0.0 && p <= 1.0, "[Dropout2d] probability must be in [0, 1], got ", p);
}

Tensor Dropout2d::forward(const Tensor& x) {
  return ops::dropout2d(x, p, training_, generator);
}

std::string Dropout2d::extra_repr() const {
  return "p=" + repr_float(p) + ", inplace=False";
}

}  // namespace tcv::nn
