// Parameter initialisers with torch.nn.init's formulas, drawing from tcv's
// Philox generator (the default one unless a Generator is passed).
#pragma once

#include <cstdint>
#include <utility>

#include "engine/rng.h"
#include "engine/tensor.h"

namespace tcv::nn {
class Module;
}

namespace tcv::nn::init {

/// Which fan scales Kaiming initialisation: fan_in keeps the forward variance,
/// fan_out the backward one.
enum class FanMode : uint8_t { fan_in, fan_out };
enum class Nonlinearity : uint8_t { linear, sigmoid, tanh, relu, leaky_relu };

/// While alive, on this thread, the initialisers below leave tensors as they are
/// and draw nothing: a module built under it has its parameters' shapes with
/// unset values, and the generators do not move (torch.nn.utils.skip_init). For
/// counting parameters, or building a model whose weights are loaded next.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;
  /// Whether a guard is alive on this thread.
  static bool active();

 private:
  bool previous_;
};

/// (fan_in, fan_out) of a weight of 2 or more dims: size(1)·receptive and size(0)·receptive.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
/// torch.nn.init.calculate_gain; `param` is leaky_relu's negative slope.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

/// U(low, high), in place, no autograd.
void uniform_(const Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
/// N(mean, std²), in place, no autograd.
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);

/// U(-b, b) with b = gain·sqrt(3 / fan). With a = sqrt(5), fan_in and leaky_relu
/// (the defaults of Conv2d and Linear) this is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                      Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                      Generator* gen = nullptr);
/// N(0, std²) with std = gain / sqrt(fan). torchvision's ResNet uses
/// kaiming_normal_(w, 0, FanMode::fan_out, Nonlinearity::relu) for convolutions.
void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                     Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                     Generator* gen = nullptr);
/// U(-b, b) with b = gain·sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
/// N(0, std²) with std = gain·sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);

/// torchvision's CNN initialisation over every module of `model`: convolutions
/// kaiming_normal_(fan_out, relu) with zero bias, batch norms weight 1 and bias 0,
/// and, when linear_std > 0, Linear weights normal(0, linear_std) with zero bias
/// (otherwise Linear layers keep their default init).
void init_cnn_weights(Module& model, double linear_std = 0.0);

}  // namespace tcv::nn::init
