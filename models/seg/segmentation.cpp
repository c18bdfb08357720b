#include "models/seg/segmentation.h"

#include <array>
#include <utility>

#include "engine/ops/nn.h"
#include "models/registry.h"
#include "models/seg/heads.h"

namespace tcv::models::seg {

namespace {

std::shared_ptr<cls::ResNet> dilated_resnet(const SegModelOptions& o) {
  TCV_CHECK(o.depth == 18 || o.depth == 34 || o.depth == 50 || o.depth == 101,
            "[SegmentationModel] ResNet depth must be 18, 34, 50 or 101, got ", o.depth);
  TCV_CHECK(o.output_stride == 8 || o.output_stride == 16,
            "[SegmentationModel] output_stride must be 8 or 16, got ", o.output_stride);
  const cls::ResNetOptions ro{.in_channels = o.in_channels,
                              .replace_stride_with_dilation = {false, o.output_stride == 8, true},
                              .top = cls::ResNetTop::none};
  switch (o.depth) {
    case 18:
      return cls::resnet18(ro);
    case 34:
      return cls::resnet34(ro);
    case 50:
      return cls::resnet50(ro);
    default:
      return cls::resnet101(ro);
  }
}

/// TorchCV's DeepbaseResNet (lib/model/base/deepbase_resnet.py) cut as pspnet.py
/// cuts it: stage1 = conv1, bn1, relu1, conv2, bn2, relu2, conv3, bn3, relu3,
/// maxpool, layer1, layer2, layer3; stage2 = layer4. Dilated as torchvision's
/// replace_stride_with_dilation (deepbase_resnet*_d8: {False, True, True}):
/// layer3's first block keeps dilation 1 with stride 1, its others 2; layer4's
/// first 2, its others 4. Initialised as DeepbaseResNet: kaiming_normal_(fan_out,
/// relu) convolutions, BN weight 1 and bias 0.
std::pair<std::shared_ptr<nn::Sequential>, std::shared_ptr<nn::Sequential>> deepbase_stages(
    const SegModelOptions& o) {
  TCV_CHECK(o.depth == 50 || o.depth == 101,
            "[SegmentationModel] TorchCV's deep-base ResNet depth must be 50 or 101, got ",
            o.depth);
  TCV_CHECK(o.output_stride == 8 || o.output_stride == 16,
            "[SegmentationModel] output_stride must be 8 or 16, got ", o.output_stride);
  auto conv3x3 = [](int64_t in, int64_t out, int64_t stride) {
    return std::make_shared<nn::Conv2d>(
        in, out, 3, nn::Conv2dOptions{.stride = stride, .padding = 1, .bias = false});
  };
  auto stage1 = std::make_shared<nn::Sequential>();
  stage1->push_back(conv3x3(o.in_channels, 64, 2));  // 0 conv1
  stage1->push_back(std::make_shared<nn::BatchNorm2d>(64));
  stage1->push_back(std::make_shared<nn::ReLU>());
  stage1->push_back(conv3x3(64, 64, 1));  // 3 conv2
  stage1->push_back(std::make_shared<nn::BatchNorm2d>(64));
  stage1->push_back(std::make_shared<nn::ReLU>());
  stage1->push_back(conv3x3(64, 128, 1));  // 6 conv3
  stage1->push_back(std::make_shared<nn::BatchNorm2d>(128));
  stage1->push_back(std::make_shared<nn::ReLU>());
  // nn.MaxPool2d(kernel_size=3, stride=2, padding=1): floor mode (issue 27 says
  // ceil mode; the source at HEAD has none).
  stage1->push_back(
      std::make_shared<nn::MaxPool2d>(3, nn::Pool2dOptions{.stride = 2, .padding = 1}));
  const std::array<int64_t, 4> blocks =
      o.depth == 50 ? std::array<int64_t, 4>{3, 4, 6, 3} : std::array<int64_t, 4>{3, 4, 23, 3};
  const auto kind = cls::BlockKind::bottleneck;
  cls::LayerState s{.inplanes = 128, .dilation = 1, .groups = 1, .base_width = 64};
  stage1->push_back(cls::make_resnet_layer(kind, s, 64, blocks[0]));
  stage1->push_back(cls::make_resnet_layer(kind, s, 128, blocks[1], 2, false));
  stage1->push_back(cls::make_resnet_layer(kind, s, 256, blocks[2], 2, o.output_stride == 8));
  auto stage2 = cls::make_resnet_layer(kind, s, 512, blocks[3], 2, true);
  cls::init_resnet_weights(*stage1);
  cls::init_resnet_weights(*stage2);
  return {stage1, stage2};
}

Tensor upsample_to(const Tensor& x, int64_t h, int64_t w) {
  return ops::upsample(x, {h, w}, {.mode = ops::InterpMode::bilinear});
}

}  // namespace

SegmentationModel::SegmentationModel(SegHead head_, SegModelOptions opts)
    : head(head_), options(std::move(opts)) {
  TCV_CHECK(options.num_classes > 0, "[SegmentationModel] num_classes must be positive, got ",
            options.num_classes);
  if (head == SegHead::pspnet_deepbase) {
    // TorchCV's registration order: stage1, stage2, dsn, ppm, cls.
    auto [s1, s2] = deepbase_stages(options);
    stage1 = register_module("stage1", s1);
    stage2 = register_module("stage2", s2);
    const int64_t features = 2048;  // num_features (512 only for resnet18 in TorchCV)
    if (options.aux == AuxHead::on)
      dsn =
          register_module("dsn", torchcv_dsn_head(features / 2, features / 4, options.num_classes));
    const int64_t width = options.head_channels > 0 ? options.head_channels : 512;
    auto p = std::make_shared<PPMBilinearDeepsup>(features, options.pyramid_bins, width);
    ppm = register_module("ppm", p);
    const int64_t cat = features + static_cast<int64_t>(options.pyramid_bins.size()) * width;
    cls = register_module("cls", torchcv_psp_cls_head(cat, width, options.num_classes));
    return;
  }
  backbone = register_module("backbone", dilated_resnet(options));
  const auto ch = backbone->feature_channels();  // {.., layer3 1024, layer4 2048}
  const bool small = options.depth < 50;         // BasicBlock: layer4 has 512 channels
  auto width = [&](int64_t own) {
    return options.head_channels > 0 ? options.head_channels : small ? 128 : own;
  };
  switch (head) {
    case SegHead::deeplabv3: {
      std::vector<int64_t> rates = options.atrous_rates;
      if (rates.empty())
        rates = options.output_stride == 8 ? std::vector<int64_t>{12, 24, 36}
                                           : std::vector<int64_t>{6, 12, 18};
      options.atrous_rates = rates;
      classifier = register_module(
          "classifier",
          std::make_shared<DeepLabHead>(ch[4], options.num_classes, rates, width(256)));
      break;
    }
    case SegHead::fcn:
      classifier =
          register_module("classifier", std::make_shared<FCNHead>(ch[4], options.num_classes));
      break;
    case SegHead::pspnet_deepbase:  // unreachable: built above
    case SegHead::pspnet:
      classifier = register_module(
          "classifier",
          std::make_shared<PSPHead>(ch[4], options.num_classes, options.pyramid_bins, width(512)));
      break;
  }
  if (options.aux == AuxHead::on) {
    // torchvision's aux head drops single activations; PSPNet's whole channels.
    const FCNHeadOptions aux_opts{.dropout_kind = head == SegHead::pspnet ? DropoutKind::channel
                                                                          : DropoutKind::element};
    aux_classifier = register_module(
        "aux_classifier", std::make_shared<FCNHead>(ch[3], options.num_classes, aux_opts));
  }
}

SegOutput SegmentationModel::forward_seg(const Tensor& x) {
  TCV_CHECK(x.dim() == 4, "[", type_name(), "] expects input (N, ", options.in_channels,
            ", H, W), got ", x.shape_str());
  const int64_t h = x.size(2), w = x.size(3);
  if (head == SegHead::pspnet_deepbase) {
    // pspnet.py's forward; both upsamplings align_corners=False as TorchCV's HEAD.
    const Tensor l3 = stage1->forward(x);  // (N, 1024, H/8, W/8)
    SegOutput o;
    if (dsn) o.aux = upsample_to(dsn->forward(l3), h, w);
    o.out = upsample_to(cls->forward(ppm->forward(stage2->forward(l3))), h, w);
    return o;
  }
  cls::ResNetFeatures f = backbone->forward_features(x);
  SegOutput o;
  o.out = upsample_to(classifier->forward(f.layer4), h, w);
  if (aux_classifier) o.aux = upsample_to(aux_classifier->forward(f.layer3), h, w);
  return o;
}

Tensor SegmentationModel::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4, "[", type_name(), "] expects input (N, ", options.in_channels,
            ", H, W), got ", x.shape_str());
  if (head == SegHead::pspnet_deepbase)
    return upsample_to(cls->forward(ppm->forward(stage2->forward(stage1->forward(x)))), x.size(2),
                       x.size(3));
  const Tensor features = backbone->forward(x);  // layer4
  return upsample_to(classifier->forward(features), x.size(2), x.size(3));
}

std::string SegmentationModel::type_name() const {
  switch (head) {
    case SegHead::deeplabv3:
      return "DeepLabV3";
    case SegHead::fcn:
      return "FCN";
    case SegHead::pspnet:
    case SegHead::pspnet_deepbase:
      return "PSPNet";
  }
  return "SegmentationModel";
}

namespace {

std::shared_ptr<SegmentationModel> make(SegHead head, int64_t depth, SegModelOptions opts) {
  opts.depth = depth;
  return std::make_shared<SegmentationModel>(head, std::move(opts));
}

}  // namespace

// The named builders of segmentation.h: a head on a ResNet of that depth.
#define TCV_SEG_MODEL(name, head, depth)                          \
  std::shared_ptr<SegmentationModel> name(SegModelOptions opts) { \
    return make(SegHead::head, depth, std::move(opts));           \
  }
TCV_SEG_MODEL(deeplabv3_resnet50, deeplabv3, 50)
TCV_SEG_MODEL(deeplabv3_resnet101, deeplabv3, 101)
TCV_SEG_MODEL(fcn_resnet50, fcn, 50)
TCV_SEG_MODEL(fcn_resnet101, fcn, 101)
TCV_SEG_MODEL(pspnet_resnet50, pspnet, 50)
TCV_SEG_MODEL(pspnet_resnet101, pspnet, 101)
TCV_SEG_MODEL(pspnet_resnet18, pspnet, 18)
TCV_SEG_MODEL(deeplabv3_resnet18, deeplabv3, 18)
TCV_SEG_MODEL(pspnet_deepbase_resnet50, pspnet_deepbase, 50)
TCV_SEG_MODEL(pspnet_deepbase_resnet101, pspnet_deepbase, 101)
#undef TCV_SEG_MODEL

void register_segmentation_models() {
  std::vector<FamilyEntry<SegmentationModel, SegModelOptions>> models = {
      {"deeplabv3_resnet50", deeplabv3_resnet50,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-50"},
      {"deeplabv3_resnet101", deeplabv3_resnet101,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-101"},
      {"fcn_resnet50", fcn_resnet50, "FCN on a dilated ResNet-50"},
      {"fcn_resnet101", fcn_resnet101, "FCN on a dilated ResNet-101"},
      {"pspnet_resnet50", pspnet_resnet50,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-50"},
      {"pspnet_resnet101", pspnet_resnet101,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-101"},
      {"pspnet_resnet18", pspnet_resnet18,
       "PSPNet (bins 1/2/3/6, 128-channel head) on a dilated ResNet-18, a small model"},
      {"deeplabv3_resnet18", deeplabv3_resnet18,
       "DeepLabV3 (128-channel ASPP) on a dilated ResNet-18, a small model"},
      {"pspnet_deepbase_resnet50", pspnet_deepbase_resnet50,
       "TorchCV's PSPNet (bins 1/2/3/6) on its deep-stem dilated ResNet-50 "
       "(deepbase_resnet50_d8), TorchCV's names"},
      {"pspnet_deepbase_resnet101", pspnet_deepbase_resnet101,
       "TorchCV's PSPNet (bins 1/2/3/6) on its deep-stem dilated ResNet-101 "
       "(deepbase_resnet101_d8), TorchCV's names"},
  };
  for (auto& m : models)
    m.description += m.name.find("deepbase") != std::string::npos
                         ? " with the 512-channel auxiliary head (dsn) on layer3 (segmentation, "
                           "output stride 8, outputs at the input size)"
                         : " with the auxiliary FCN head on layer3 (segmentation, output stride "
                           "8, outputs at the input size); torchvision's segmentation names";
  register_family_models("seg", {.num_classes = 21, .in_channels = 3}, models);
}

}  // namespace tcv::models::seg
