#include "layers/activation.h"

#include "engine/ops/elementwise.h"

namespace tcv::nn {

Tensor ReLU::forward(const Tensor& x) {
  return ops::relu(x);
}

Tensor ReLU6::forward(const Tensor& x) {
  return ops::relu6(x);
}

}  // namespace tcv::nn
