// MobileNetV2 with torchvision's architecture and parameter names
// (features.0.0.weight, features.1.conv.0.0.weight, ..., classifier.1.weight).
#pragma once

#include "layers/layers.h"

namespace tcv::models::cls {

/// torchvision's Conv2dNormActivation with MobileNetV2's defaults, a Sequential of
/// Conv2d (no bias, padding (k-1)/2) -> BatchNorm2d -> ReLU6, named "0", "1", "2".
class ConvBNReLU6 : public nn::Sequential {
 public:
  ConvBNReLU6(int64_t in_planes, int64_t out_planes, int64_t kernel_size = 3, int64_t stride = 1,
              int64_t groups = 1);
  std::string type_name() const override { return "Conv2dNormActivation"; }
};

/// torchvision's InvertedResidual: [1x1 expansion ConvBNReLU6 when expand_ratio
/// != 1] -> 3x3 depthwise ConvBNReLU6 (stride) -> 1x1 projection conv -> BN, all in
/// the Sequential "conv"; plus the input when stride is 1 and inp == oup.
class InvertedResidual : public nn::Module {
 public:
  InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio);
  Tensor forward(const Tensor& x) override;  // (N, inp, H, W) -> (N, oup, H/s, W/s)
  std::string type_name() const override { return "InvertedResidual"; }

  bool use_res_connect;
  std::shared_ptr<nn::Sequential> conv;
};

struct MobileNetV2Options {
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// Multiplies every layer's channels (rounded to a multiple of round_nearest).
  double width_mult = 1.0;
  int64_t round_nearest = 8;
  /// Dropout probability before the classifier's Linear.
  double dropout = 0.2;
};

/// torchvision.models.MobileNetV2: `features` (a stride-2 3x3 ConvBNReLU6 to 32
/// channels, 17 InvertedResidual blocks, a 1x1 ConvBNReLU6 to 1280 channels),
/// global average pool, `classifier` (Dropout, Linear). 3,504,872 parameters at
/// 1000 classes. Initialised as torchvision: kaiming_normal_(fan_out) convolutions,
/// BN weight 1 and bias 0, Linear weight N(0, 0.01²) and bias 0.
class MobileNetV2 : public nn::Module {
 public:
  explicit MobileNetV2(MobileNetV2Options opts = {});
  Tensor forward(const Tensor& x) override;  // (N, in_channels, H, W) -> (N, num_classes)
  std::string type_name() const override { return "MobileNetV2"; }

  MobileNetV2Options options;
  int64_t last_channel;
  std::shared_ptr<nn::Sequential> features;  // (N, C, H, W) -> (N, 1280, H/32, W/32)
  std::shared_ptr<nn::Sequential> classifier;
};

/// torchvision's _make_divisible: v rounded to the nearest multiple of `divisor`
/// (at least min_value, default divisor), never more than 10% below v.
int64_t make_divisible(double v, int64_t divisor, int64_t min_value = 0);

/// Registers mobilenet_v2 (models/registry.h, family "cls").
void register_mobilenet_models();

}  // namespace tcv::models::cls
