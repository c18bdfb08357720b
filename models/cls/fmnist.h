// Small classifiers for 28x28 images (Fashion-MNIST): the benchmark CNN and a
// CIFAR-style ResNet.
#pragma once

#include "layers/layers.h"
#include "models/cls/resnet_blocks.h"

namespace tcv::models::cls {

/// conv 3x3/32 (pad 1) -> relu -> maxpool 2 -> conv 3x3/64 (pad 1) -> relu ->
/// maxpool 2 -> flatten -> fc 128 -> relu -> fc num_classes, as one Sequential:
/// the same modules and state_dict keys ("0.weight", "3.weight", "7.weight",
/// "9.weight", ...) as the nn.Sequential in bench/compare/fmnist_cnn_torch.py,
/// so weights move between the two through safetensors.
/// (N, in_channels, 28, 28) -> (N, num_classes); 421,642 parameters for 1 channel, 10 classes.
class FmnistCnn : public nn::Sequential {
 public:
  explicit FmnistCnn(int64_t num_classes = 10, int64_t in_channels = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "FmnistCnn"; }

  // Handles into the sequence (modules 0, 3, 7 and 9).
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

/// 3x3 stem conv 32 + BN + ReLU, layer1/2/3 of two BasicBlocks at 32, 64 (stride 2)
/// and 128 (stride 2) channels, global average pool, fc. Initialised as torchvision's ResNet.
/// (N, in_channels, 28, 28) -> (N, num_classes).
class FmnistResNet : public nn::Module {
 public:
  explicit FmnistResNet(int64_t num_classes = 10, int64_t in_channels = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "FmnistResNet"; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;
};

/// Registers fmnist_cnn and fmnist_resnet (models/registry.h, family "cls").
void register_fmnist_models();

}  // namespace tcv::models::cls
