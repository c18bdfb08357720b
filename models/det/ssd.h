// SSD300 and SSD512 on VGG-16: torchvision's ssd300_vgg16 (architecture,
// parameter names and order, initialisation) and the SSD paper's SSD512 as
// TorchCV ships it, in the same structure.
//
//   backbone.scale_weight                    conv4_3's L2-norm scale (512), 20
//   backbone.features.{0..21}                VGG-16 up to conv4_3 (+ReLU), pool3 ceil-mode
//   backbone.extra.0.{1,3,5}                 pool4, conv5_1..conv5_3
//   backbone.extra.0.7.{1,3}                 pool5 3x3/1/1, conv6 (3x3, dilation 6) -> 1024, conv7
//   1x1 backbone.extra.{1..}.{0,2}               the extra blocks (1x1 then 3x3)
//   head.classification_head.module_list.k   3x3 conv per map -> anchors·classes
//   head.regression_head.module_list.k       3x3 conv per map -> anchors·4
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "layers/layers.h"
#include "models/det/anchors.h"

namespace tcv::models::det {

enum class SsdVariant : uint8_t { ssd300, ssd512 };

/// Whether the backbone's and extra blocks' convolutions are followed by BatchNorm.
enum class SsdNorm : uint8_t {
  none,        ///< torchvision's and the paper's SSD
  batch_norm,  ///< conv (no bias), BatchNorm, ReLU: trains from scratch in far fewer steps
};

struct SsdOptions {
  /// Classes including the background (class 0): 21 for Pascal VOC.
  int64_t num_classes = 21;
  int64_t in_channels = 3;
  /// Default boxes; empty aspect_ratios means the variant's own
  /// (ssd300_anchor_options / ssd512_anchor_options).
  AnchorOptions anchors = {};
  /// torchvision's initialisation: VGG convolutions kaiming_normal_(fan_out,
  /// relu), conv6/conv7, the extra blocks and the heads xavier_uniform_, biases
  /// 0, the conv4_3 scale 20. false keeps the layers' PyTorch defaults.
  bool init_weights = true;
  /// Every channel count of the backbone and the extra blocks divided by this:
  /// 1 is the paper's SSD; 4 costs about 1/16 of its FLOPs (a model for CPUs,
  /// small data sets and tests).
  int64_t width_divisor = 1;
  SsdNorm norm = SsdNorm::none;
};

/// The two head outputs for N images and A default boxes.
struct SsdOutput {
  Tensor loc;   ///< (N, A, 4) box codes relative to the default boxes
  Tensor conf;  ///< (N, A, num_classes) class logits
};

/// torchvision's SSDFeatureExtractorVGG (named "backbone" in SSD): the
/// feature maps the heads read, conv4_3 L2-normalised and scaled first.
class SsdBackbone : public nn::Module {
 public:
  SsdBackbone(SsdVariant variant, int64_t in_channels, int64_t width_divisor = 1,
              SsdNorm norm = SsdNorm::none);
  /// The feature maps, largest first: 6 (SSD300) or 7 (SSD512).
  std::vector<Tensor> features_of(const Tensor& x);
  /// Returns the last feature map (the Module interface; use features_of).
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SSDFeatureExtractorVGG"; }
  /// Output channels of each feature map.
  std::vector<int64_t> out_channels() const;
  /// The (height, width) of each feature map for an input of (h, w).
  std::vector<std::array<int64_t, 2>> feature_sizes(int64_t h, int64_t w) const;

  Tensor scale_weight;                       // (512 / width_divisor)
  std::shared_ptr<nn::Sequential> features;  // conv1_1 .. relu4_3
  std::shared_ptr<nn::Sequential> extra;     // blocks, each an nn::Sequential

 private:
  int64_t div_ = 1;
};

/// SSD's classification or regression head (torchvision's SSDScoringHead): a
/// 3x3 convolution per feature map, its output (N, A_k·K, H, W) laid out as
/// (N, H·W·A_k, K) and concatenated over the maps.
class SsdScoringHead : public nn::Module {
 public:
  SsdScoringHead(const std::vector<int64_t>& in_channels, const std::vector<int64_t>& anchors,
                 int64_t columns);
  Tensor forward_maps(const std::vector<Tensor>& maps);
  Tensor forward(const Tensor& x) override;  // a single map
  std::string type_name() const override { return "SSDScoringHead"; }

  int64_t columns;
  std::shared_ptr<nn::Sequential> module_list;
};

/// torchvision's SSDHead: classification_head then regression_head.
class SsdHead : public nn::Module {
 public:
  SsdHead(const std::vector<int64_t>& in_channels, const std::vector<int64_t>& anchors,
          int64_t num_classes);
  Tensor forward(const Tensor& x) override;  // a single map: (N, A, 4 + classes)
  std::string type_name() const override { return "SSDHead"; }

  std::shared_ptr<SsdScoringHead> classification_head;
  std::shared_ptr<SsdScoringHead> regression_head;
};

/// SSD on VGG-16. The input is the normalised image batch (N, 3, S, S) with S
/// = 300 or 512 (torchvision subtracts the mean (0.48235, 0.45882, 0.40784) of
/// 0-1 images and scales by 255; that is the data pipeline's job here).
class SSD : public nn::Module {
 public:
  SSD(SsdVariant variant, SsdOptions opts = {});

  /// The two head outputs.
  SsdOutput forward_heads(const Tensor& x);
  /// Both outputs in one tensor (N, A, 4 + num_classes): loc, then conf.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SSD"; }

  /// Default boxes (A, 4) in pixels for an input of (h, w), in the heads'
  /// order, in the model's floating dtype (f64 when converted to f64: the
  /// corners computed in f64, as torchvision's generator does); computed once
  /// per size, device and dtype, then cached.
  Tensor default_boxes(int64_t h, int64_t w, Device device = kCPU);

  SsdVariant variant;
  SsdOptions options;
  std::shared_ptr<SsdBackbone> backbone;
  std::shared_ptr<SsdHead> head;

 private:
  struct Cached {
    int64_t h = -1, w = -1;
    Device device;
    DType dtype = DType::f32;
    Tensor boxes;
  };
  Cached cached_;
};

/// SSD300-VGG16: 26,285,486 parameters for 21 classes, as torchvision's
/// ssd300_vgg16(num_classes=21); 8,732 default boxes.
std::shared_ptr<SSD> ssd300_vgg16(SsdOptions opts = {});
/// SSD512-VGG16: 24,564 default boxes on 7 maps (64, 32, 16, 8, 4, 2, 1).
std::shared_ptr<SSD> ssd512_vgg16(SsdOptions opts = {});
/// SSD300 with a quarter of VGG-16's channels and BatchNorm after every
/// backbone and extra-block convolution (opts' width_divisor and norm are set
/// to 4 and batch_norm): the same 8,732 default boxes at about 1/16 of the
/// FLOPs, trained from scratch on small data sets (configs/det/scenes_ssd300.toml).
std::shared_ptr<SSD> ssd300_lite(SsdOptions opts = {});

/// Registers ssd300, ssd512 and ssd300_lite (models/registry.h, family "det",
/// built from SsdOptions: models::create_family_model<SSD>(name, opts)).
void register_ssd_models();

}  // namespace tcv::models::det
