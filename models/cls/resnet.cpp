#include "models/cls/resnet.h"

#include "models/registry.h"

namespace tcv::models::cls {

ResNet::ResNet(BlockKind block_, std::array<int64_t, 4> layers, ResNetOptions opts)
    : block(block_), options(opts) {
  TCV_CHECK(opts.num_classes > 0 && opts.in_channels > 0, "[ResNet] num_classes (",
            opts.num_classes, ") and in_channels (", opts.in_channels, ") must be positive");
  TCV_CHECK(opts.groups > 0 && opts.width_per_group > 0, "[ResNet] groups (", opts.groups,
            ") and width_per_group (", opts.width_per_group, ") must be positive");
  const bool cifar = opts.stem == ResNetStem::cifar;
  conv1 = register_module(
      "conv1",
      std::make_shared<nn::Conv2d>(
          opts.in_channels, 64, cifar ? 3 : 7,
          nn::Conv2dOptions{.stride = cifar ? 1 : 2, .padding = cifar ? 1 : 3, .bias = false}));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(64));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  if (!cifar)
    maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(
                                             3, nn::Pool2dOptions{.stride = 2, .padding = 1}));
  LayerState s{
      .inplanes = 64, .dilation = 1, .groups = opts.groups, .base_width = opts.width_per_group};
  const auto& dil = opts.replace_stride_with_dilation;
  layer1 = register_module("layer1", make_resnet_layer(block, s, 64, layers[0]));
  layer2 = register_module("layer2", make_resnet_layer(block, s, 128, layers[1], 2, dil[0]));
  layer3 = register_module("layer3", make_resnet_layer(block, s, 256, layers[2], 2, dil[1]));
  layer4 = register_module("layer4", make_resnet_layer(block, s, 512, layers[3], 2, dil[2]));
  if (opts.top == ResNetTop::classifier) {
    avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
    fc = register_module(
        "fc", std::make_shared<nn::Linear>(512 * block_expansion(block), opts.num_classes));
  }
  init_resnet_weights(*this, opts.zero_init_residual);
}

ResNetFeatures ResNet::forward_features(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "[ResNet] expects input (N, ",
            options.in_channels, ", H, W), got ", x.shape_str());
  ResNetFeatures f;
  f.stem = bn1->forward_relu(conv1->forward(x));  // (N, 64, H/2, W/2)
  f.layer1 = layer1->forward(maxpool ? maxpool->forward(f.stem) : f.stem);
  f.layer2 = layer2->forward(f.layer1);
  f.layer3 = layer3->forward(f.layer2);
  f.layer4 = layer4->forward(f.layer3);
  return f;
}

Tensor ResNet::forward(const Tensor& x) {
  const Tensor h = forward_features(x).layer4;  // (N, 512·expansion, h, w)
  if (!fc) return h;
  return fc->forward(avgpool->forward(h).flatten(1));
}

std::array<int64_t, 5> ResNet::feature_channels() const {
  const int64_t e = block_expansion(block);
  return {64, 64 * e, 128 * e, 256 * e, 512 * e};
}

std::array<int64_t, 5> ResNet::feature_strides() const {
  const bool cifar = options.stem == ResNetStem::cifar;
  std::array<int64_t, 5> s{cifar ? 1 : 2, cifar ? 1 : 4, 0, 0, 0};
  for (size_t i = 0; i < 3; ++i)
    s[i + 2] = options.replace_stride_with_dilation[i] ? s[i + 1] : 2 * s[i + 1];
  return s;
}

std::shared_ptr<ResNet> resnet18(ResNetOptions opts) {
  return std::make_shared<ResNet>(BlockKind::basic, std::array<int64_t, 4>{2, 2, 2, 2}, opts);
}
std::shared_ptr<ResNet> resnet34(ResNetOptions opts) {
  return std::make_shared<ResNet>(BlockKind::basic, std::array<int64_t, 4>{3, 4, 6, 3}, opts);
}
std::shared_ptr<ResNet> resnet50(ResNetOptions opts) {
  return std::make_shared<ResNet>(BlockKind::bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, opts);
}
std::shared_ptr<ResNet> resnet101(ResNetOptions opts) {
  return std::make_shared<ResNet>(BlockKind::bottleneck, std::array<int64_t, 4>{3, 4, 23, 3}, opts);
}

void register_resnet_models() {
  using Build = std::shared_ptr<ResNet> (*)(ResNetOptions);
  struct Named {
    const char* name;
    Build build;
    const char* description;
  };
  const Named resnets[] = {
      {"resnet18", resnet18, "ResNet-18 (BasicBlock 2-2-2-2)"},
      {"resnet34", resnet34, "ResNet-34 (BasicBlock 3-4-6-3)"},
      {"resnet50", resnet50, "ResNet-50 (Bottleneck 3-4-6-3)"},
      {"resnet101", resnet101, "ResNet-101 (Bottleneck 3-4-23-3)"},
  };
  for (const Named& r : resnets) {
    const std::string description = r.description;
    register_family_model<ResNet, ResNetOptions>(
        {.name = r.name,
         .description =
             description + "; torchvision's architecture and names, 7x7 stem for 224x224 inputs",
         .reference = {.num_classes = 1000, .in_channels = 3}},
        r.build);
    if (std::string(r.name) == "resnet101") continue;
    const Build build = r.build;
    register_family_model<ResNet, ResNetOptions>(
        {.name = std::string(r.name) + "_cifar",
         .description = description +
                        " with a CIFAR stem (3x3 stride-1 conv1, no max-pool) for 32x32 inputs; "
                        "torchvision's names",
         .reference = {.num_classes = 10, .in_channels = 3}},
        [build](ResNetOptions o) {
          o.stem = ResNetStem::cifar;
          return build(o);
        });
  }
}

}  // namespace tcv::models::cls
