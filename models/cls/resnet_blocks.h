// ResNet building blocks with torchvision's names (conv1, bn1, conv2, bn2,
// downsample.0, downsample.1), shared by every ResNet in tcv.
#pragma once

#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/module.h"
#include "layers/sequential.h"

namespace tcv::models::cls {

/// Two 3x3 convolutions with batch norm and an identity (or 1x1 projection)
/// shortcut: relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)).
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;

  /// downsample: the shortcut's projection, or null for the identity.
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1,
             nn::ModulePtr downsample = nullptr);
  Tensor forward(const Tensor& x) override;  // (N, inplanes, H, W) -> (N, planes, H/s, W/s)
  std::string type_name() const override { return "BasicBlock"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  nn::ModulePtr downsample;
};

/// torchvision's _make_layer for BasicBlock: `blocks` blocks, the first with
/// `stride` and a 1x1 conv + BN projection when the shape changes.
/// `inplanes` is updated to the layer's output channels.
std::shared_ptr<nn::Sequential> make_basic_layer(int64_t& inplanes, int64_t planes, int64_t blocks,
                                                 int64_t stride = 1);

/// torchvision's ResNet initialisation: kaiming_normal_(fan_out, relu) for every
/// Conv2d weight, weight 1 and bias 0 for every BatchNorm2d. With
/// zero_init_residual, each BasicBlock's bn2 weight starts at 0.
void init_resnet_weights(nn::Module& model, bool zero_init_residual = false);

}  // namespace tcv::models::cls
