// A chain of modules, as torch.nn.Sequential.
#pragma once

#include <initializer_list>

#include "layers/module.h"

namespace tcv::nn {

/// Runs its children in order; they are named "0", "1", ... (so state_dict keys
/// read "features.0.weight", as torchvision's).
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<ModulePtr> modules);

  /// Appends a module named by its position.
  void push_back(ModulePtr m);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// The i-th module (throws when out of range).
  const ModulePtr& operator[](size_t i) const;
  /// The i-th module as M (throws when it is not an M).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    TCV_CHECK(p != nullptr, "[Sequential] module ", i, " is a ", (*this)[i]->type_name(),
              ", not the requested type");
    return p;
  }

 private:
  std::vector<ModulePtr> modules_;
};

}  // namespace tcv::nn
