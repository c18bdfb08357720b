// Segmentation heads with torchvision's structure and parameter names:
// DeepLabV3's ASPP head (DeepLabHead), FCN's head (FCNHead), and PSPNet's
// pyramid pooling head, written the same way (an nn.Sequential whose first
// child is the context module).
//
//   DeepLabHead  0: ASPP (convs.0..4, project) · 1: conv 3x3 · 2: BN · 3: ReLU · 4: conv 1x1
//   FCNHead      0: conv 3x3 · 1: BN · 2: ReLU · 3: Dropout · 4: conv 1x1
//   PSPHead      0: PyramidPooling (stages.k.{1, 2}) · 1: conv 3x3 · 2: BN · 3: ReLU ·
//                4: Dropout2d · 5: conv 1x1
#pragma once

#include <vector>

#include "layers/layers.h"

namespace tcv::models::seg {

/// torchvision's ASPPConv: 3x3 conv (padding = dilation = rate, no bias) → BN → ReLU.
class ASPPConv : public nn::Sequential {
 public:
  ASPPConv(int64_t in_channels, int64_t out_channels, int64_t dilation);
  std::string type_name() const override { return "ASPPConv"; }
};

/// torchvision's ASPPPooling: the image-level branch, AdaptiveAvgPool2d(1) → 1x1
/// conv (no bias) → BN → ReLU, upsampled bilinearly back to the input's size.
class ASPPPooling : public nn::Sequential {
 public:
  ASPPPooling(int64_t in_channels, int64_t out_channels);
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, H, W)
  std::string type_name() const override { return "ASPPPooling"; }
};

/// torchvision's ASPP: `convs` = a 1x1 conv → BN → ReLU branch, one ASPPConv per
/// atrous rate and ASPPPooling, concatenated along channels, then `project` =
/// 1x1 conv (no bias) → BN → ReLU → Dropout(0.5).
class ASPP : public nn::Module {
 public:
  ASPP(int64_t in_channels, const std::vector<int64_t>& atrous_rates, int64_t out_channels = 256);
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, H, W)
  std::string type_name() const override { return "ASPP"; }

  std::shared_ptr<nn::Sequential> convs;  // printed as ModuleList, as torchvision's
  std::shared_ptr<nn::Sequential> project;
};

/// torchvision's DeepLabHead: ASPP(in, rates, 256) → 3x3 conv 256 → BN → ReLU →
/// 1x1 conv to the classes (with bias).
class DeepLabHead : public nn::Sequential {
 public:
  /// `channels`: ASPP's and the 3x3 conv's width (torchvision's 256).
  DeepLabHead(int64_t in_channels, int64_t num_classes, const std::vector<int64_t>& atrous_rates,
              int64_t channels = 256);
  std::string type_name() const override { return "DeepLabHead"; }
};

/// What a head's dropout zeroes.
enum class DropoutKind : uint8_t {
  /// Single activations (nn.Dropout), as torchvision's FCNHead and ASPP.
  element,
  /// Whole channels (nn.Dropout2d), as PSPNet's heads.
  channel,
};

struct FCNHeadOptions {
  /// Hidden channels; 0 means in_channels / 4, as torchvision's FCNHead.
  int64_t channels = 0;
  double dropout = 0.1;
  DropoutKind dropout_kind = DropoutKind::element;
};

/// torchvision's FCNHead: 3x3 conv in → in/4 (no bias) → BN → ReLU → Dropout(0.1)
/// → 1x1 conv to the classes (with bias). Also the auxiliary head on layer3 of
/// every model here (PSPNet's with channel dropout).
class FCNHead : public nn::Sequential {
 public:
  FCNHead(int64_t in_channels, int64_t num_classes, FCNHeadOptions opts = {});
  std::string type_name() const override { return "FCNHead"; }
};

/// PSPNet's pyramid pooling module: `stages`, one per bin b, each
/// AdaptiveAvgPool2d(b) → 1x1 conv in → out (no bias) → BN → ReLU, upsampled
/// bilinearly (align_corners false) to the input's size; the output is the input
/// followed by every stage along channels: (N, in + bins·out, H, W).
class PyramidPooling : public nn::Module {
 public:
  PyramidPooling(int64_t in_channels, const std::vector<int64_t>& bins, int64_t out_channels = 512);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "PyramidPooling"; }
  /// Channels of the output: in + bins·out.
  int64_t output_channels() const { return output_channels_; }

  std::shared_ptr<nn::Sequential> stages;  // printed as ModuleList

 private:
  int64_t output_channels_;
};

/// PSPNet's head: PyramidPooling(in, bins, 512) → 3x3 conv (in + bins·512) → 512
/// (no bias) → BN → ReLU → Dropout2d(0.1) → 1x1 conv to the classes (with bias).
class PSPHead : public nn::Sequential {
 public:
  /// `channels`: each pooling stage's and the 3x3 conv's width (PSPNet's 512).
  PSPHead(int64_t in_channels, int64_t num_classes, const std::vector<int64_t>& bins,
          int64_t channels = 512);
  std::string type_name() const override { return "PSPHead"; }
};

// ---- TorchCV's PSPNet (model/seg/nets/pspnet.py at 5cb5203), with its module names

/// TorchCV's _ConvBatchNormReluBlock: `conv` (no bias, stride 1) then `bn_relu`
/// = ModuleHelper.BNReLU (norm_type batchnorm): Sequential(BatchNorm2d, ReLU).
class ConvBNReLUBlock : public nn::Module {
 public:
  ConvBNReLUBlock(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t padding);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "_ConvBatchNormReluBlock"; }

  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Sequential> bn_relu;
};

/// TorchCV's PPMBilinearDeepsup: `ppm` (a ModuleList), one Sequential per bin b:
/// 0: AdaptiveAvgPool2d(b) · 1: 1x1 conv in → out (no bias) · 2: Sequential(BN, ReLU);
/// each upsampled bilinearly with align_corners=False (TorchCV's source at HEAD;
/// issue 27 says True) and concatenated after the input: (N, in + bins·out, H, W).
class PPMBilinearDeepsup : public nn::Module {
 public:
  PPMBilinearDeepsup(int64_t in_channels, const std::vector<int64_t>& bins = {1, 2, 3, 6},
                     int64_t out_channels = 512);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "PPMBilinearDeepsup"; }

  std::shared_ptr<nn::Sequential> ppm;  // printed as ModuleList
};

/// TorchCV's `dsn` head on layer3: 0: _ConvBatchNormReluBlock(in, in / 2, 3x3, pad 1)
/// · 1: Dropout2d(0.1) · 2: 1x1 conv to the classes (with bias). PSPNet passes
/// in = num_features / 2 = 1024 and hidden num_features / 4 = 512.
std::shared_ptr<nn::Sequential> torchcv_dsn_head(int64_t in_channels, int64_t hidden,
                                                 int64_t num_classes);

/// TorchCV's `cls` head after the pyramid pooling: 0: 3x3 conv in → 512 (pad 1, no
/// bias) · 1: Sequential(BN, ReLU) · 2: Dropout2d(0.1) · 3: 1x1 conv to the classes.
std::shared_ptr<nn::Sequential> torchcv_psp_cls_head(int64_t in_channels, int64_t channels,
                                                     int64_t num_classes);

}  // namespace tcv::models::seg
