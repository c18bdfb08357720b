// ResNet building blocks with torchvision's names (conv1, bn1, conv2, bn2,
// conv3, bn3, downsample.0, downsample.1), shared by every ResNet in tcv.
#pragma once

#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/module.h"
#include "layers/sequential.h"

namespace tcv::models::cls {

/// Two 3x3 convolutions with batch norm and an identity (or 1x1 projection)
/// shortcut: relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)).
/// With dilation > 1 both 3x3 convolutions are dilated (padding = dilation);
/// torchvision refuses dilation in BasicBlock, tcv allows it so that ResNet-18/34
/// have dilated variants too.
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;

  /// downsample: the shortcut's projection, or null for the identity.
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1,
             nn::ModulePtr downsample = nullptr, int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;  // (N, inplanes, H, W) -> (N, planes, H/s, W/s)
  std::string type_name() const override { return "BasicBlock"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  nn::ModulePtr downsample;
};

/// torchvision's Bottleneck (ResNet V1.5: the stride sits on the 3x3 conv):
/// 1x1 conv to `width` -> 3x3 conv (stride, groups, dilation) -> 1x1 conv to
/// planes·4, each with batch norm, plus the shortcut, then ReLU.
/// width = planes · base_width / 64 · groups.
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;

  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride = 1,
             nn::ModulePtr downsample = nullptr, int64_t groups = 1, int64_t base_width = 64,
             int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;  // (N, inplanes, H, W) -> (N, 4·planes, H/s, W/s)
  std::string type_name() const override { return "Bottleneck"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  nn::ModulePtr downsample;
};

enum class BlockKind : uint8_t { basic, bottleneck };

/// Output channels per `planes` of a block kind (1 or 4).
int64_t block_expansion(BlockKind kind);

/// The state torchvision's ResNet carries between its _make_layer calls.
struct LayerState {
  int64_t inplanes = 64;  ///< input channels of the next layer; updated to its output
  int64_t dilation = 1;   ///< current dilation; multiplied by the stride when dilating
  int64_t groups = 1;
  int64_t base_width = 64;
};

/// torchvision's ResNet._make_layer: `blocks` blocks, the first with `stride`
/// (or, with `dilate`, stride 1 and the dilation multiplied by `stride`) and a
/// 1x1 conv + BN projection when the shape changes.
std::shared_ptr<nn::Sequential> make_resnet_layer(BlockKind kind, LayerState& state, int64_t planes,
                                                  int64_t blocks, int64_t stride = 1,
                                                  bool dilate = false);

/// make_resnet_layer for BasicBlock without dilation; `inplanes` is updated to
/// the layer's output channels.
std::shared_ptr<nn::Sequential> make_basic_layer(int64_t& inplanes, int64_t planes, int64_t blocks,
                                                 int64_t stride = 1);

/// torchvision's ResNet initialisation: kaiming_normal_(fan_out, relu) for every
/// Conv2d weight, weight 1 and bias 0 for every BatchNorm2d. With
/// zero_init_residual, each BasicBlock's bn2 and each Bottleneck's bn3 weight
/// starts at 0.
void init_resnet_weights(nn::Module& model, bool zero_init_residual = false);

}  // namespace tcv::models::cls
