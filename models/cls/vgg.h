// VGG-11/13/16/19 with and without batch norm, with torchvision's architecture
// and parameter names (features.N, classifier.N).
#pragma once

#include "layers/layers.h"

namespace tcv::models::cls {

/// torchvision's VGG configurations: "A" (VGG-11), "B" (13), "D" (16), "E" (19).
enum class VggConfig : uint8_t { A, B, D, E };

struct VggOptions {
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// Conv -> BatchNorm2d -> ReLU instead of Conv -> ReLU (vgg16_bn and kin).
  bool batch_norm = false;
  /// Dropout probability in the classifier.
  double dropout = 0.5;
  /// torchvision's init (below); false keeps the layers' PyTorch defaults.
  bool init_weights = true;
};

/// torchvision.models.VGG: `features` (3x3 convs with padding 1 and 2x2
/// max-pools), a 7x7 adaptive average pool, and `classifier` (Linear 25088->4096,
/// ReLU, Dropout, Linear 4096->4096, ReLU, Dropout, Linear 4096->num_classes).
/// Initialised as torchvision: kaiming_normal_(fan_out, relu) convolutions with
/// bias 0, BN weight 1 and bias 0, Linear weights N(0, 0.01²) with bias 0.
/// Any input of at least 32x32 works: the adaptive pool repeats small maps to 7x7.
class VGG : public nn::Module {
 public:
  VGG(VggConfig config, VggOptions opts = {});

  Tensor forward(const Tensor& x) override;  // (N, in_channels, H, W) -> (N, num_classes)
  std::string type_name() const override { return "VGG"; }

  VggOptions options;
  std::shared_ptr<nn::Sequential> features;  // (N, C, H, W) -> (N, 512, H/32, W/32)
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

/// VGG-11, 132,863,336 parameters at 1000 classes (132,868,840 with batch norm).
std::shared_ptr<VGG> vgg11(VggOptions opts = {});
/// VGG-13, 133,047,848 parameters at 1000 classes (133,053,736 with batch norm).
std::shared_ptr<VGG> vgg13(VggOptions opts = {});
/// VGG-16, 138,357,544 parameters at 1000 classes (138,365,992 with batch norm).
std::shared_ptr<VGG> vgg16(VggOptions opts = {});
/// VGG-19, 143,667,240 parameters at 1000 classes (143,678,248 with batch norm).
std::shared_ptr<VGG> vgg19(VggOptions opts = {});

/// Registers vgg11/13/16/19 and their _bn variants (models/registry.h, family "cls").
void register_vgg_models();

}  // namespace tcv::models::cls
