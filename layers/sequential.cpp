#include "layers/sequential.h"

namespace tcv::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  TCV_CHECK(m != nullptr, "[Sequential] cannot append a null module at position ", modules_.size());
  register_child(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : modules_) y = m->forward(y);
  return y;
}

const ModulePtr& Sequential::operator[](size_t i) const {
  TCV_CHECK(i < modules_.size(), "[Sequential] index ", i, " out of range for ", modules_.size(),
            " modules");
  return modules_[i];
}

}  // namespace tcv::nn
