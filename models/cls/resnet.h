// ResNet-18/34/50/101 with torchvision's architecture and parameter names
// (conv1, bn1, layer1.0.conv1, ..., layer2.0.downsample.0, fc), an optional
// CIFAR stem and dilated variants for dense prediction.
#pragma once

#include <array>

#include "layers/layers.h"
#include "models/cls/resnet_blocks.h"

namespace tcv::models::cls {

/// The first layers before layer1.
enum class ResNetStem : uint8_t {
  /// torchvision's: 7x7 conv stride 2 (pad 3), BN, ReLU, 3x3 max-pool stride 2.
  imagenet,
  /// For 32x32 inputs: 3x3 conv stride 1 (pad 1), BN, ReLU, no max-pool
  /// (the module "maxpool" does not exist, so no state_dict key changes).
  cifar,
};

/// What follows layer4.
enum class ResNetTop : uint8_t {
  /// torchvision's classifier: adaptive average pool to 1x1, then fc.
  classifier,
  /// Nothing: the network ends at layer4 and forward() returns its feature map.
  /// A backbone for dense prediction, as torchvision's segmentation models cut
  /// ResNet with IntermediateLayerGetter: no avgpool, no fc.* in the state_dict.
  none,
};

/// torchvision.models.ResNet's keyword arguments, plus the input channels and the stem.
struct ResNetOptions {
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// Starts each block's last BN weight at 0, so each residual block starts as the identity.
  bool zero_init_residual = false;
  int64_t groups = 1;
  int64_t width_per_group = 64;
  /// For layer2, layer3 and layer4: replace the stride 2 by a dilation, as
  /// torchvision. {false, true, true} gives output stride 8, {false, false, true} 16.
  std::array<bool, 3> replace_stride_with_dilation = {false, false, false};
  ResNetStem stem = ResNetStem::imagenet;
  ResNetTop top = ResNetTop::classifier;
};

/// The intermediate feature maps of a ResNet, for detection and segmentation heads.
struct ResNetFeatures {
  Tensor stem;    // after conv1-bn1-relu (before the max-pool): stride 2 (1 for the CIFAR stem)
  Tensor layer1;  // stride 4 (1 for the CIFAR stem), 64·expansion channels
  Tensor layer2;  // stride 8 (2), 128·expansion
  Tensor layer3;  // stride 16 (4) unless dilated, 256·expansion
  Tensor layer4;  // stride 32 (8) unless dilated, 512·expansion
};

/// torchvision.models.ResNet: stem, layer1..layer4, adaptive average pool, fc.
/// Initialised as torchvision: kaiming_normal_(fan_out, relu) convolutions, BN
/// weight 1 and bias 0, PyTorch's default Linear init for fc.
///
///   auto net = resnet50({.num_classes = 10, .replace_stride_with_dilation = {false, true, true}});
///   ResNetFeatures f = net->forward_features(x);  // f.layer4: (N, 2048, H/8, W/8)
class ResNet : public nn::Module {
 public:
  /// layers: blocks per stage, e.g. {2, 2, 2, 2} for ResNet-18, {3, 4, 6, 3} for ResNet-50.
  ResNet(BlockKind block, std::array<int64_t, 4> layers, ResNetOptions opts = {});

  /// (N, in_channels, H, W) -> (N, num_classes), or layer4's (N, 512·expansion,
  /// H/s, W/s) with ResNetTop::none.
  Tensor forward(const Tensor& x) override;
  /// The stem and layer1..layer4 outputs (no pooling, no fc).
  ResNetFeatures forward_features(const Tensor& x);
  std::string type_name() const override { return "ResNet"; }

  /// Channels of {stem, layer1, layer2, layer3, layer4}.
  std::array<int64_t, 5> feature_channels() const;
  /// Strides of {stem, layer1, layer2, layer3, layer4} relative to the input.
  std::array<int64_t, 5> feature_strides() const;

  BlockKind block;
  ResNetOptions options;

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;  // null with the CIFAR stem
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;  // null with ResNetTop::none
  std::shared_ptr<nn::Linear> fc;                  // null with ResNetTop::none
};

/// ResNet-18: BasicBlock {2, 2, 2, 2}, 11,689,512 parameters at 1000 classes.
std::shared_ptr<ResNet> resnet18(ResNetOptions opts = {});
/// ResNet-34: BasicBlock {3, 4, 6, 3}, 21,797,672 parameters at 1000 classes.
std::shared_ptr<ResNet> resnet34(ResNetOptions opts = {});
/// ResNet-50: Bottleneck {3, 4, 6, 3}, 25,557,032 parameters at 1000 classes.
std::shared_ptr<ResNet> resnet50(ResNetOptions opts = {});
/// ResNet-101: Bottleneck {3, 4, 23, 3}, 44,549,160 parameters at 1000 classes.
std::shared_ptr<ResNet> resnet101(ResNetOptions opts = {});

/// Registers resnet18/34/50/101 and resnet18/34/50_cifar (models/registry.h, family "cls").
void register_resnet_models();

}  // namespace tcv::models::cls
