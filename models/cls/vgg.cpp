#include "models/cls/vgg.h"

#include <vector>

#include "models/registry.h"

namespace tcv::models::cls {

namespace {

constexpr int64_t kPool = 0;  // "M" in torchvision's cfgs

std::vector<int64_t> config_layers(VggConfig c) {
  switch (c) {
    case VggConfig::A:
      return {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case VggConfig::B:
      return {64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case VggConfig::D:
      return {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
              kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
    case VggConfig::E:
      return {64,  64,  kPool, 128, 128,   kPool, 256, 256, 256, 256,  kPool,
              512, 512, 512,   512, kPool, 512,   512, 512, 512, kPool};
  }
  TCV_CHECK(false, "[VGG] unknown config ", static_cast<int>(c));
  return {};
}

}  // namespace

VGG::VGG(VggConfig config, VggOptions opts) : options(opts) {
  TCV_CHECK(opts.num_classes > 0 && opts.in_channels > 0, "[VGG] num_classes (", opts.num_classes,
            ") and in_channels (", opts.in_channels, ") must be positive");
  features = register_module("features", std::make_shared<nn::Sequential>());
  int64_t in = opts.in_channels;
  for (int64_t v : config_layers(config)) {
    if (v == kPool) {
      features->push_back(std::make_shared<nn::MaxPool2d>(2, nn::Pool2dOptions{.stride = 2}));
      continue;
    }
    features->push_back(std::make_shared<nn::Conv2d>(in, v, 3, nn::Conv2dOptions{.padding = 1}));
    if (opts.batch_norm) features->push_back(std::make_shared<nn::BatchNorm2d>(v));
    features->push_back(std::make_shared<nn::ReLU>());
    in = v;
  }
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(7));
  classifier = register_module(
      "classifier",
      std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
          std::make_shared<nn::Linear>(512 * 7 * 7, 4096), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Dropout>(opts.dropout), std::make_shared<nn::Linear>(4096, 4096),
          std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(opts.dropout),
          std::make_shared<nn::Linear>(4096, opts.num_classes)}));

  if (!opts.init_weights) return;
  nn::init::init_cnn_weights(*this, /*linear_std=*/0.01);
}

Tensor VGG::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "[VGG] expects input (N, ",
            options.in_channels, ", H, W), got ", x.shape_str());
  const Tensor h = avgpool->forward(features->forward(x)).flatten(1);  // (N, 25088)
  return classifier->forward(h);
}

std::shared_ptr<VGG> vgg11(VggOptions opts) {
  return std::make_shared<VGG>(VggConfig::A, opts);
}
std::shared_ptr<VGG> vgg13(VggOptions opts) {
  return std::make_shared<VGG>(VggConfig::B, opts);
}
std::shared_ptr<VGG> vgg16(VggOptions opts) {
  return std::make_shared<VGG>(VggConfig::D, opts);
}
std::shared_ptr<VGG> vgg19(VggOptions opts) {
  return std::make_shared<VGG>(VggConfig::E, opts);
}

void register_vgg_models() {
  using Build = std::shared_ptr<VGG> (*)(VggOptions);
  struct Named {
    const char* name;
    Build build;
    const char* description;
  };
  const Named vggs[] = {
      {"vgg11", vgg11, "VGG-11"},
      {"vgg13", vgg13, "VGG-13"},
      {"vgg16", vgg16, "VGG-16"},
      {"vgg19", vgg19, "VGG-19"},
  };
  const std::string names = "; torchvision's architecture and names (features.N, classifier.N)";
  for (const Named& v : vggs)
    for (const bool bn : {false, true}) {
      const Build build = v.build;
      register_family_model<VGG, VggOptions>(
          {.name = std::string(v.name) + (bn ? "_bn" : ""),
           .description = v.description + std::string(bn ? " with batch norm" : "") + names,
           .reference = {.num_classes = 1000, .in_channels = 3}},
          [build, bn](VggOptions o) {
            o.batch_norm = bn;
            return build(o);
          });
    }
}

}  // namespace tcv::models::cls
