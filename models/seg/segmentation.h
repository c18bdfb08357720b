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
// pspnet_deepbase_resnet50/101 are PSPNet as TorchCV builds it (model/seg/nets/
// pspnet.py and lib/model/base/deepbase_resnet.py at 5cb5203), with TorchCV's
// state_dict names, so a TorchCV checkpoint's keys map one to one:
//
//   stage1.0/1/2        conv1 (3→64, 3x3 stride 2), bn1, relu1  } the deep stem
//   stage1.3/4/5        conv2 (64→64), bn2, relu2                }
//   stage1.6/7/8        conv3 (64→128), bn3, relu3               }
//   stage1.9            maxpool 3x3 / 2, padding 1, floor (ceil_mode false)
//   stage1.10/11/12     layer1 (reads 128 channels), layer2, layer3 (dilated)
//   stage2              layer4 (dilated)
//   dsn.0.conv, dsn.0.bn_relu.0, dsn.2      aux head on layer3 (1024→512→classes)
//   ppm.ppm.k.1, ppm.ppm.k.2.0              pyramid pooling, bins 1, 2, 3, 6
//   cls.0, cls.1.0, cls.3                   3x3 conv 4096→512, BN, 1x1 → classes
//
// (the backbone's names: stage1.10.* is TorchCV's pretrained layer1.*, and so on).
// TorchCV's source at HEAD upsamples with align_corners=False everywhere (issue
// 27's text says True); tcv follows the source.
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
  /// TorchCV's PSPNet: the same head on TorchCV's deep-stem ResNet, with a
  /// 512-channel `dsn` aux head and TorchCV's module names (stage1, stage2, dsn,
  /// ppm, cls). ResNet-50/101 only.
  pspnet_deepbase,
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

  // SegHead::pspnet_deepbase only (the three above are then null), TorchCV's names:
  std::shared_ptr<nn::Sequential> stage1;  // deep stem, maxpool, layer1..layer3
  std::shared_ptr<nn::Sequential> stage2;  // layer4
  std::shared_ptr<nn::Sequential> dsn;     // aux head on layer3; null with AuxHead::off
  std::shared_ptr<nn::Module> ppm;         // PPMBilinearDeepsup
  std::shared_ptr<nn::Sequential> cls;
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
/// TorchCV's PSPNet on deepbase_resnet50_d8: 51,444,710 parameters at 19 classes.
std::shared_ptr<SegmentationModel> pspnet_deepbase_resnet50(SegModelOptions opts = {});
/// TorchCV's PSPNet on deepbase_resnet101_d8: 70,436,838 parameters at 19 classes.
std::shared_ptr<SegmentationModel> pspnet_deepbase_resnet101(SegModelOptions opts = {});

/// Registers the models above by their function's name (models/registry.h,
/// family "seg", built from SegModelOptions with the depth the name says:
/// models::create_family_model<SegmentationModel>(name, opts)).
void register_segmentation_models();

}  // namespace tcv::models::seg
