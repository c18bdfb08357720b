// L2 normalisation over channels with a learned per-channel scale (SSD's
// conv4_3 rescaling, ParseNet's L2Norm).
#pragma once

#include "layers/module.h"

namespace tcv::nn {

/// scale.view(1, C, 1, 1) · x / max(‖x‖₂ over C, eps) for x (N, C, ...), as
/// torchvision's SSD computes it (F.normalize, then the scale).
Tensor l2_norm(const Tensor& x, const Tensor& scale, double eps = 1e-12);

/// The layer form of l2_norm: parameter "weight" (C), initialised to `scale`
/// (20 in SSD), as TorchCV's L2Norm.
class L2Norm : public Module {
 public:
  explicit L2Norm(int64_t channels, double scale = 20.0, double eps = 1e-12);
  Tensor forward(const Tensor& x) override;  // (N, C, ...) -> (N, C, ...)
  std::string type_name() const override { return "L2Norm"; }
  std::string extra_repr() const override;

  int64_t channels;
  double eps;
  Tensor weight;  // (C)
};

}  // namespace tcv::nn
