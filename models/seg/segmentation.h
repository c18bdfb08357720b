// Semantic segmentation models on dilated ResNets: DeepLabV3 and FCN as
// torchvision 0.14's deeplabv3_resnet50/101 and fcn_resnet50/101 (structure,
// parameter names and counts), and PSPNet built the same way.
//
//   backbone.*        ResNet-50/101 without avgpool and fc (torchvision's
//                     IntermediateLayerGetter), layer3 and layer4 dilated
//   classifier.*      DeepLabHead, FCNHead or PSPHead on layer4 (2048 channels)
//   aux_classifier.*  FCNHead on layer3 (1024 channels), optional
//
// Both outputs are upsampled bilinearly (align_corners false) to the input's size.
//
//   auto net = deeplabv3_resnet50({.num_classes = 21});
//   SegOutput o = net->forward_seg(x);  // o.out, o.aux: (N, 21, H, W)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layers.h"
#include "models/cls/resnet.h"

namespace tcv::models::seg {

/// The head on layer4.
enum class SegHead : uint8_t {
  /// DeepLabV3: ASPP (1x1, three atrous 3x3, image pooling) → 3x3 conv → 1x1 conv.
  deeplabv3,
  /// FCN: 3x3 conv to 512 → 1x1 conv.
  fcn,
  /// PSPNet: pyramid pooling (bins 1, 2, 3, 6) → 3x3 conv to 512 → 1x1 conv.
  pspnet,
};

/// Whether the model has the auxiliary FCN head on layer3 (torchvision's aux_loss).
enum class AuxHead : uint8_t { on, off };

struct SegModelOptions {
  int64_t num_classes = 21;
  int64_t in_channels = 3;
  /// ResNet depth: 50 or 101 (torchvision's), or 18 or 34 (BasicBlock, dilated
  /// as mmsegmentation's r18-d8: small models for CPUs and small data sets).
  int64_t depth = 50;
  /// 8 (layer3 and layer4 dilated, torchvision's) or 16 (layer4 dilated).
  int64_t output_stride = 8;
  AuxHead aux = AuxHead::on;
  /// DeepLabV3's ASPP rates; empty means {12, 24, 36} at output stride 8
  /// (torchvision's) and {6, 12, 18} at 16 (the DeepLabV3 paper's).
  std::vector<int64_t> atrous_rates = {};
  /// PSPNet's pooling bins.
  std::vector<int64_t> pyramid_bins = {1, 2, 3, 6};
  /// The main head's width; 0: the model's own, 512 (PSPNet) or 256 (DeepLabV3's
  /// ASPP) on ResNet-50/101, 128 on ResNet-18/34 as mmsegmentation's r18 models.
  /// FCN's head keeps torchvision's in / 4.
  int64_t head_channels = 0;
};

/// The outputs of a segmentation model, each (N, num_classes, H, W) for an input
/// of (N, C, H, W): torchvision's result["out"] and result["aux"].
struct SegOutput {
  Tensor out{};  ///< the main head's logits
  Tensor aux{};  ///< the auxiliary head's logits; undefined with AuxHead::off
};

/// A segmentation network: backbone, classifier and optional aux_classifier, in
/// that registration order (torchvision's _SimpleSegmentationModel). The
/// backbone starts as torchvision's ResNet does (kaiming_normal_ fan_out
/// convolutions, BN 1/0), the heads with PyTorch's default layer initialisation.
class SegmentationModel : public nn::Module {
 public:
  SegmentationModel(SegHead head, SegModelOptions opts = {});

  /// Both outputs at the input's size; aux only when the model has the head.
  SegOutput forward_seg(const Tensor& x);
  /// The main output only (the auxiliary head is not run): (N, C, H, W) ->
  /// (N, num_classes, H, W).
  Tensor forward(const Tensor& x) override;
  /// "DeepLabV3", "FCN" or "PSPNet".
  std::string type_name() const override;

  SegHead head;
  SegModelOptions options;
  std::shared_ptr<cls::ResNet> backbone;
  std::shared_ptr<nn::Sequential> classifier;
  std::shared_ptr<nn::Sequential> aux_classifier;  // null with AuxHead::off
};

/// torchvision's deeplabv3_resnet50: 42,004,074 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> deeplabv3_resnet50(SegModelOptions opts = {});
/// torchvision's deeplabv3_resnet101: 60,996,202 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> deeplabv3_resnet101(SegModelOptions opts = {});
/// torchvision's fcn_resnet50: 35,322,218 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> fcn_resnet50(SegModelOptions opts = {});
/// torchvision's fcn_resnet101: 54,314,346 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> fcn_resnet101(SegModelOptions opts = {});
/// PSPNet on ResNet-50: 48,957,802 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> pspnet_resnet50(SegModelOptions opts = {});
/// PSPNet on ResNet-101: 67,949,930 parameters at 21 classes with aux.
std::shared_ptr<SegmentationModel> pspnet_resnet101(SegModelOptions opts = {});
/// PSPNet and DeepLabV3 on a dilated ResNet-18 with 128-channel heads and a
/// 64-channel auxiliary head (mmsegmentation's pspnet/deeplabv3 r18-d8).
std::shared_ptr<SegmentationModel> pspnet_resnet18(SegModelOptions opts = {});
std::shared_ptr<SegmentationModel> deeplabv3_resnet18(SegModelOptions opts = {});

/// The segmentation models by registry name (deeplabv3_resnet18/50/101,
/// fcn_resnet50/101, pspnet_resnet18/50/101) with `opts` (its depth set by
/// the name); null for another name.
std::shared_ptr<SegmentationModel> create_segmentation_model(const std::string& name,
                                                             SegModelOptions opts);
/// Those names.
std::vector<std::string> segmentation_model_names();

}  // namespace tcv::models::seg
