#include "models/registry.h"

#include <map>
#include <mutex>

#include "models/cls/fmnist.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "models/cls/vgg.h"
#include "models/det/ssd.h"
#include "models/seg/segmentation.h"

namespace tcv::models {

namespace {

struct Entry {
  ModelFactory factory;
  std::string description;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> entries;  // sorted, so listings are too
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string known_names(const std::map<std::string, Entry>& entries) {
  if (entries.empty()) return "none registered; call register_builtin_models() first";
  std::string s;
  for (const auto& [name, e] : entries) s += (s.empty() ? "" : ", ") + name;
  return s;
}

void register_zoo_models() {
  using cls::ResNetOptions;
  using cls::ResNetStem;
  using ResNetFn = std::shared_ptr<cls::ResNet> (*)(ResNetOptions);
  struct ResNetEntry {
    const char* name;
    ResNetFn fn;
    const char* description;
  };
  const ResNetEntry resnets[] = {
      {"resnet18", cls::resnet18, "ResNet-18 (BasicBlock 2-2-2-2), 11,689,512 parameters"},
      {"resnet34", cls::resnet34, "ResNet-34 (BasicBlock 3-4-6-3), 21,797,672 parameters"},
      {"resnet50", cls::resnet50, "ResNet-50 (Bottleneck 3-4-6-3), 25,557,032 parameters"},
      {"resnet101", cls::resnet101, "ResNet-101 (Bottleneck 3-4-23-3), 44,549,160 parameters"},
  };
  for (const auto& r : resnets) {
    const ResNetFn fn = r.fn;
    register_model(
        r.name,
        [fn](const ModelOptions& o) {
          return fn({.num_classes = o.num_classes, .in_channels = o.in_channels});
        },
        std::string(r.description) +
            " at 1000 classes; torchvision's architecture and names, 7x7 stem for 224x224 "
            "inputs");
    if (std::string(r.name) == "resnet101") continue;
    register_model(
        std::string(r.name) + "_cifar",
        [fn](const ModelOptions& o) {
          return fn({.num_classes = o.num_classes,
                     .in_channels = o.in_channels,
                     .stem = ResNetStem::cifar});
        },
        std::string(r.description).substr(0, std::string(r.description).find(',')) +
            " with a CIFAR stem (3x3 stride-1 conv1, no max-pool) for 32x32 inputs; "
            "torchvision's names");
  }

  using VggFn = std::shared_ptr<cls::VGG> (*)(cls::VggOptions);
  struct VggEntry {
    const char* name;
    VggFn fn;
    bool batch_norm;
    const char* description;
  };
  const VggEntry vggs[] = {
      {"vgg11", cls::vgg11, false, "VGG-11, 132,863,336 parameters"},
      {"vgg11_bn", cls::vgg11, true, "VGG-11 with batch norm, 132,868,840 parameters"},
      {"vgg13", cls::vgg13, false, "VGG-13, 133,047,848 parameters"},
      {"vgg13_bn", cls::vgg13, true, "VGG-13 with batch norm, 133,053,736 parameters"},
      {"vgg16", cls::vgg16, false, "VGG-16, 138,357,544 parameters"},
      {"vgg16_bn", cls::vgg16, true, "VGG-16 with batch norm, 138,365,992 parameters"},
      {"vgg19", cls::vgg19, false, "VGG-19, 143,667,240 parameters"},
      {"vgg19_bn", cls::vgg19, true, "VGG-19 with batch norm, 143,678,248 parameters"},
  };
  for (const auto& v : vggs) {
    const VggFn fn = v.fn;
    const bool bn = v.batch_norm;
    register_model(
        v.name,
        [fn, bn](const ModelOptions& o) {
          return fn({.num_classes = o.num_classes, .in_channels = o.in_channels, .batch_norm = bn});
        },
        std::string(v.description) +
            " at 1000 classes; torchvision's architecture and names (features.N, classifier.N)");
  }

  register_model(
      "mobilenet_v2",
      [](const ModelOptions& o) {
        return std::make_shared<cls::MobileNetV2>(
            cls::MobileNetV2Options{.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "MobileNetV2 (width 1.0, ReLU6, dropout 0.2), 3,504,872 parameters at 1000 classes; "
      "torchvision's architecture and names");

  register_model(
      "ssd300",
      [](const ModelOptions& o) {
        return det::ssd300_vgg16({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD300 on VGG-16 (detection, 300x300 input, 8,732 default boxes), 26,285,486 parameters "
      "at 21 classes (background included); torchvision's ssd300_vgg16 architecture and names");
  register_model(
      "ssd512",
      [](const ModelOptions& o) {
        return det::ssd512_vgg16({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD512 on VGG-16 (detection, 512x512 input, 24,564 default boxes on 7 maps), "
      "26,795,460 parameters at 21 classes; the SSD paper's extra blocks as TorchCV, "
      "torchvision's names");
  register_model(
      "ssd300_lite",
      [](const ModelOptions& o) {
        return det::ssd300_lite({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD300 with a quarter of VGG-16's channels and BatchNorm (detection, 300x300 input, "
      "8,732 default boxes, about 1/16 of SSD300's FLOPs), for CPUs and small data sets");

  using SegFn = std::shared_ptr<seg::SegmentationModel> (*)(seg::SegModelOptions);
  struct SegEntry {
    const char* name;
    SegFn fn;
    const char* description;
  };
  const SegEntry segs[] = {
      {"deeplabv3_resnet50", seg::deeplabv3_resnet50,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-50, 42,004,074 "
       "parameters"},
      {"deeplabv3_resnet101", seg::deeplabv3_resnet101,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-101, 60,996,202 "
       "parameters"},
      {"fcn_resnet50", seg::fcn_resnet50, "FCN on a dilated ResNet-50, 35,322,218 parameters"},
      {"fcn_resnet101", seg::fcn_resnet101, "FCN on a dilated ResNet-101, 54,314,346 parameters"},
      {"pspnet_resnet50", seg::pspnet_resnet50,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-50, 48,957,802 parameters"},
      {"pspnet_resnet101", seg::pspnet_resnet101,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-101, 67,949,930 parameters"},
      {"pspnet_resnet18", seg::pspnet_resnet18,
       "PSPNet (bins 1/2/3/6, 128-channel head) on a dilated ResNet-18, a small model"},
      {"deeplabv3_resnet18", seg::deeplabv3_resnet18,
       "DeepLabV3 (128-channel ASPP) on a dilated ResNet-18, a small model"},
  };
  for (const auto& m : segs) {
    const SegFn fn = m.fn;
    register_model(
        m.name,
        [fn](const ModelOptions& o) {
          return fn({.num_classes = o.num_classes, .in_channels = o.in_channels});
        },
        std::string(m.description) +
            " at 21 classes with the auxiliary FCN head on layer3 (segmentation, output stride "
            "8, outputs at the input size); torchvision's segmentation names");
  }
}

}  // namespace

void register_model(const std::string& name, ModelFactory factory, const std::string& description) {
  TCV_CHECK(!name.empty(), "[register_model] empty model name");
  TCV_CHECK(factory != nullptr, "[register_model] \"", name, "\" has no factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TCV_CHECK(!r.entries.count(name), "[register_model] \"", name, "\" is already registered");
  r.entries[name] = Entry{std::move(factory), description};
}

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.entries.find(name);
    TCV_CHECK(it != r.entries.end(), "[create_model] unknown model \"", name,
              "\" (known: ", known_names(r.entries), ")");
    factory = it->second.factory;
  }
  TCV_CHECK(opts.num_classes > 0, "[create_model] ", name, ": num_classes must be positive, got ",
            opts.num_classes);
  TCV_CHECK(opts.in_channels > 0, "[create_model] ", name, ": in_channels must be positive, got ",
            opts.in_channels);
  return factory(opts);
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : r.entries) names.push_back(name);
  return names;
}

std::string model_description(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(name);
  TCV_CHECK(it != r.entries.end(), "[model_description] unknown model \"", name,
            "\" (known: ", known_names(r.entries), ")");
  return it->second.description;
}

void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_model(
        "fmnist_cnn",
        [](const ModelOptions& o) {
          return std::make_shared<cls::FmnistCnn>(o.num_classes, o.in_channels);
        },
        "2-conv CNN for 28x28 images (conv32-pool-conv64-pool-fc128-fc), 421,642 parameters for "
        "1 channel and 10 classes");
    register_model(
        "fmnist_resnet",
        [](const ModelOptions& o) {
          return std::make_shared<cls::FmnistResNet>(o.num_classes, o.in_channels);
        },
        "small CIFAR-style ResNet for 28x28 images: 3x3 stem, BasicBlocks x2 at 32/64/128 "
        "channels, global average pool, fc");
    register_zoo_models();
  });
}

}  // namespace tcv::models
