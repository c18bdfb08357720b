// Pooling layers, as torch.nn.MaxPool2d, AvgPool2d and AdaptiveAvgPool2d.
#pragma once

#include "layers/module.h"

namespace tcv::nn {

struct Pool2dOptions {
  /// 0 means "the kernel size" (PyTorch's stride=None).
  Size2 stride = 0;
  Size2 padding = 0;
  bool ceil_mode = false;
  /// AvgPool2d only: whether padded zeros count in the divisor.
  bool count_include_pad = true;
};

/// Maximum over kernel windows: (N, C, H, W) -> (N, C, H', W').
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, Pool2dOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

  Size2 kernel_size;
  Pool2dOptions options;  // stride already resolved
};

/// Mean over kernel windows: (N, C, H, W) -> (N, C, H', W').
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, Pool2dOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

  Size2 kernel_size;
  Pool2dOptions options;  // stride already resolved
};

/// Mean over PyTorch's adaptive bins: (N, C, H, W) -> (N, C, out_h, out_w).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.tuple_str(); }

  Size2 output_size;
};

}  // namespace tcv::nn
