// Layers that reshape or resample: Flatten and Upsample.
#pragma once

#include "engine/ops/nn.h"
#include "layers/module.h"

namespace tcv::nn {

/// Flattens dims [start_dim, end_dim] into one: (N, C, H, W) -> (N, C·H·W) by default.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

struct UpsampleOptions {
  /// Output (H, W); set either this or scale_factor.
  Size2 size = 0;
  /// Output = floor(input · scale_factor) per spatial dim; 0 = use `size`.
  double scale_factor = 0.0;
  ops::InterpMode mode = ops::InterpMode::nearest;
  /// Bilinear only, as torch.
  bool align_corners = false;
};

/// Resizes (N, C, H, W) to a fixed size or by a scale factor. With a scale
/// factor the output size is floor(H·s); the sampling grid follows the sizes,
/// which equals PyTorch's for integer factors.
class Upsample : public Module {
 public:
  explicit Upsample(UpsampleOptions opts);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Upsample"; }
  std::string extra_repr() const override;

  UpsampleOptions options;
};

}  // namespace tcv::nn
