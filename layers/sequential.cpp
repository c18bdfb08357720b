#include "layers/sequential.h"

#include <typeinfo>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/sync_batch_norm.h"

namespace tcv::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  TCV_CHECK(m != nullptr, "[Sequential] cannot append a null module at position ", modules_.size());
  register_child(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

namespace {

/// A BatchNorm2d (or SyncBatchNorm) followed by a plain ReLU or ReLU6 runs as
/// one fused pass (BatchNorm2d::forward_relu, forward_relu6); null otherwise.
BatchNorm2d* bn_act_pair(Module& m, const Module& next) {
  const bool bn = typeid(m) == typeid(BatchNorm2d) || typeid(m) == typeid(SyncBatchNorm);
  const bool act = typeid(next) == typeid(ReLU) || typeid(next) == typeid(ReLU6);
  return bn && act ? static_cast<BatchNorm2d*>(&m) : nullptr;
}

/// A Conv2d followed by a plain ReLU runs as one op (Conv2d::forward_relu: on
/// the CPU the ReLU is a post-op of the convolution, with no pre-activation
/// tensor and no separate pass; its node frees the output once it has masked
/// the gradient, as a relu node would); null otherwise.
Conv2d* conv_relu_pair(Module& m, const Module& next) {
  return typeid(m) == typeid(Conv2d) && typeid(next) == typeid(ReLU) ? static_cast<Conv2d*>(&m)
                                                                     : nullptr;
}

}  // namespace

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (i + 1 < modules_.size()) {
      if (BatchNorm2d* bn = bn_act_pair(*modules_[i], *modules_[i + 1])) {
        y = typeid(*modules_[i + 1]) == typeid(ReLU) ? bn->forward_relu(y) : bn->forward_relu6(y);
        ++i;
        continue;
      }
      if (Conv2d* conv = conv_relu_pair(*modules_[i], *modules_[i + 1])) {
        y = conv->forward_relu(y);
        ++i;
        continue;
      }
    }
    y = modules_[i]->forward(y);
  }
  return y;
}

const ModulePtr& Sequential::operator[](size_t i) const {
  TCV_CHECK(i < modules_.size(), "[Sequential] index ", i, " out of range for ", modules_.size(),
            " modules");
  return modules_[i];
}

}  // namespace tcv::nn
