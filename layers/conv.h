// 2-D convolution, as torch.nn.Conv2d.
#pragma once

#include "layers/module.h"

namespace tcv::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// y = conv2d(x, weight, bias). Parameters "weight" (out, in/groups, kh, kw) and
/// "bias" (out), initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
///
///   auto conv = std::make_shared<Conv2d>(3, 64, 7, Conv2dOptions{.stride = 2, .padding = 3,
///                                                                .bias = false});
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions opts = {});

  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, H', W')
  /// relu(forward(x)) in one pass where the backend fuses it (ops::conv2d_relu).
  Tensor forward_relu(const Tensor& x);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  /// Redraws weight and bias with PyTorch's default initialisation.
  void reset_parameters();

  int64_t in_channels, out_channels;
  Size2 kernel_size;
  Conv2dOptions options;
  Tensor weight;  // (out, in/groups, kh, kw)
  Tensor bias;    // (out) or undefined
};

}  // namespace tcv::nn
