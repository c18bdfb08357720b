// Module: the base of every layer and model, with named parameters, buffers
// and children in torchvision's naming ("layer1.0.conv1.weight").
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tcv::nn {

/// Ordered (name, tensor) pairs, as PyTorch's state_dict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

enum class Strict : uint8_t { no, yes };

/// A (height, width) pair that a single number also fills, like PyTorch's
/// `kernel_size=3` vs `kernel_size=(3, 5)`: `Size2 k = 3;` or `Size2 k = {3, 5};`.
struct Size2 {
  int64_t h = 0, w = 0;
  constexpr Size2() = default;
  constexpr Size2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, like torch's int-or-tuple
  constexpr Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  std::array<int64_t, 2> arr() const { return {h, w}; }
  bool operator==(const Size2&) const = default;
  /// "3" when square, "(3, 5)" otherwise, as PyTorch prints int-or-tuple arguments.
  std::string str() const;
  /// Always "(3, 3)", as PyTorch prints Conv2d's normalised tuples.
  std::string tuple_str() const;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The forward pass of single-input modules.
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  /// Type name for printing, e.g. "Conv2d".
  virtual std::string type_name() const = 0;
  /// Extra text inside the parentheses when printed, e.g. "3, 64, kernel_size=(7, 7)".
  virtual std::string extra_repr() const { return ""; }

  // ---- traversal (registration order, recursive with dotted names) ----
  StateDict named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  StateDict named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// Every module below (and including, with name "") this one.
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters() const;

  // ---- mode ----
  /// Sets training mode here and in every child.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- state ----
  /// Parameters then buffers of each module, recursively, in registration order.
  StateDict state_dict() const;
  /// Copies values in (no reallocation). With Strict::yes, missing or unexpected
  /// keys are an error listing them; shape mismatches are always an error.
  void load_state_dict(const StateDict& state, Strict strict = Strict::yes);

  /// Moves (or converts) every parameter and buffer in place: handles held
  /// elsewhere (optimizers, layers' members) see the new data.
  void to(Device device);
  void to(DType dtype);  ///< floating parameters and buffers only
  /// Clears gradients: to undefined (set_to_none) or to zero in place.
  void zero_grad(bool set_to_none = true);

  /// A readable tree, like print(model) in PyTorch.
  std::string str() const;

 protected:
  /// Registers a parameter (sets requires_grad) and returns the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  void register_child(const std::string& name, std::shared_ptr<Module> m);

  bool training_ = true;

 private:
  StateDict params_;
  StateDict buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

using ModulePtr = std::shared_ptr<Module>;

/// A double as Python's repr writes it ("1e-05", "0.1", "2.0"), for extra_repr().
std::string repr_float(double v);

}  // namespace tcv::nn
