#include "models/seg/segmentation.h"

#include "engine/ops/nn.h"
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

Tensor upsample_to(const Tensor& x, int64_t h, int64_t w) {
  return ops::upsample(x, {h, w}, ops::InterpMode::bilinear, false);
}

}  // namespace

SegmentationModel::SegmentationModel(SegHead head_, SegModelOptions opts)
    : head(head_), options(std::move(opts)) {
  TCV_CHECK(options.num_classes > 0, "[SegmentationModel] num_classes must be positive, got ",
            options.num_classes);
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
  cls::ResNetFeatures f = backbone->forward_features(x);
  SegOutput o;
  o.out = upsample_to(classifier->forward(f.layer4), h, w);
  if (aux_classifier) o.aux = upsample_to(aux_classifier->forward(f.layer3), h, w);
  return o;
}

Tensor SegmentationModel::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4, "[", type_name(), "] expects input (N, ", options.in_channels,
            ", H, W), got ", x.shape_str());
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

std::shared_ptr<SegmentationModel> deeplabv3_resnet50(SegModelOptions opts) {
  return make(SegHead::deeplabv3, 50, std::move(opts));
}
std::shared_ptr<SegmentationModel> deeplabv3_resnet101(SegModelOptions opts) {
  return make(SegHead::deeplabv3, 101, std::move(opts));
}
std::shared_ptr<SegmentationModel> fcn_resnet50(SegModelOptions opts) {
  return make(SegHead::fcn, 50, std::move(opts));
}
std::shared_ptr<SegmentationModel> fcn_resnet101(SegModelOptions opts) {
  return make(SegHead::fcn, 101, std::move(opts));
}
std::shared_ptr<SegmentationModel> pspnet_resnet50(SegModelOptions opts) {
  return make(SegHead::pspnet, 50, std::move(opts));
}
std::shared_ptr<SegmentationModel> pspnet_resnet101(SegModelOptions opts) {
  return make(SegHead::pspnet, 101, std::move(opts));
}
std::shared_ptr<SegmentationModel> pspnet_resnet18(SegModelOptions opts) {
  return make(SegHead::pspnet, 18, std::move(opts));
}
std::shared_ptr<SegmentationModel> deeplabv3_resnet18(SegModelOptions opts) {
  return make(SegHead::deeplabv3, 18, std::move(opts));
}

namespace {

struct Named {
  const char* name;
  SegHead head;
  int64_t depth;
};

constexpr Named kModels[] = {
    {"deeplabv3_resnet18", SegHead::deeplabv3, 18},
    {"deeplabv3_resnet50", SegHead::deeplabv3, 50},
    {"deeplabv3_resnet101", SegHead::deeplabv3, 101},
    {"fcn_resnet50", SegHead::fcn, 50},
    {"fcn_resnet101", SegHead::fcn, 101},
    {"pspnet_resnet18", SegHead::pspnet, 18},
    {"pspnet_resnet50", SegHead::pspnet, 50},
    {"pspnet_resnet101", SegHead::pspnet, 101},
};

}  // namespace

std::shared_ptr<SegmentationModel> create_segmentation_model(const std::string& name,
                                                             SegModelOptions opts) {
  for (const auto& m : kModels)
    if (name == m.name) return make(m.head, m.depth, std::move(opts));
  return nullptr;
}

std::vector<std::string> segmentation_model_names() {
  std::vector<std::string> names;
  for (const auto& m : kModels) names.push_back(m.name);
  return names;
}

}  // namespace tcv::models::seg
