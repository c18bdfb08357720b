#include "models/registry.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "layers/init.h"
#include "models/cls/fmnist.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "models/cls/vgg.h"
#include "models/det/ssd.h"
#include "models/pose/openpose.h"
#include "models/seg/segmentation.h"

namespace tcv::models {

namespace {

struct Entry {
  ModelFactory factory;
  std::string description;
  ModelOptions reference;
  std::optional<int64_t> parameter_count;  // counted on first request
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

// The entry of `name` (r.mu held); an unknown name is an error of `op` listing the known ones.
Entry& entry_of(Registry& r, const std::string& name, const char* op) {
  auto it = r.entries.find(name);
  TCV_CHECK(it != r.entries.end(), "[", op, "] unknown model \"", name,
            "\" (known: ", known_names(r.entries), ")");
  return it->second;
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
      {"resnet18", cls::resnet18, "ResNet-18 (BasicBlock 2-2-2-2)"},
      {"resnet34", cls::resnet34, "ResNet-34 (BasicBlock 3-4-6-3)"},
      {"resnet50", cls::resnet50, "ResNet-50 (Bottleneck 3-4-6-3)"},
      {"resnet101", cls::resnet101, "ResNet-101 (Bottleneck 3-4-23-3)"},
  };
  for (const auto& r : resnets) {
    const ResNetFn fn = r.fn;
    register_model(r.name,
                   [fn](const ModelOptions& o) {
                     return fn({.num_classes = o.num_classes, .in_channels = o.in_channels});
                   },
                   std::string(r.description) +
                       "; torchvision's architecture and names, 7x7 stem for 224x224 inputs",
                   {.num_classes = 1000, .in_channels = 3});
    if (std::string(r.name) == "resnet101") continue;
    register_model(std::string(r.name) + "_cifar",
                   [fn](const ModelOptions& o) {
                     return fn({.num_classes = o.num_classes,
                                .in_channels = o.in_channels,
                                .stem = ResNetStem::cifar});
                   },
                   std::string(r.description) +
                       " with a CIFAR stem (3x3 stride-1 conv1, no max-pool) for 32x32 inputs; "
                       "torchvision's names",
                   {.num_classes = 10, .in_channels = 3});
  }

  using VggFn = std::shared_ptr<cls::VGG> (*)(cls::VggOptions);
  struct VggEntry {
    const char* name;
    VggFn fn;
    bool batch_norm;
    const char* description;
  };
  const VggEntry vggs[] = {
      {"vgg11", cls::vgg11, false, "VGG-11"},
      {"vgg11_bn", cls::vgg11, true, "VGG-11 with batch norm"},
      {"vgg13", cls::vgg13, false, "VGG-13"},
      {"vgg13_bn", cls::vgg13, true, "VGG-13 with batch norm"},
      {"vgg16", cls::vgg16, false, "VGG-16"},
      {"vgg16_bn", cls::vgg16, true, "VGG-16 with batch norm"},
      {"vgg19", cls::vgg19, false, "VGG-19"},
      {"vgg19_bn", cls::vgg19, true, "VGG-19 with batch norm"},
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
            "; torchvision's architecture and names (features.N, classifier.N)",
        {.num_classes = 1000, .in_channels = 3});
  }

  register_model(
      "mobilenet_v2",
      [](const ModelOptions& o) {
        return std::make_shared<cls::MobileNetV2>(
            cls::MobileNetV2Options{.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "MobileNetV2 (width 1.0, ReLU6, dropout 0.2); torchvision's architecture and names",
      {.num_classes = 1000, .in_channels = 3});

  register_model(
      "ssd300",
      [](const ModelOptions& o) {
        return det::ssd300_vgg16({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD300 on VGG-16 (detection, 300x300 input, 8,732 default boxes; the classes include "
      "the background); torchvision's ssd300_vgg16 architecture and names",
      {.num_classes = 21, .in_channels = 3});
  register_model(
      "ssd512",
      [](const ModelOptions& o) {
        return det::ssd512_vgg16({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD512 on VGG-16 (detection, 512x512 input, 24,564 default boxes on 7 maps); the SSD "
      "paper's extra blocks as TorchCV, torchvision's names",
      {.num_classes = 21, .in_channels = 3});
  register_model(
      "ssd300_lite",
      [](const ModelOptions& o) {
        return det::ssd300_lite({.num_classes = o.num_classes, .in_channels = o.in_channels});
      },
      "SSD300 with a quarter of VGG-16's channels and BatchNorm (detection, 300x300 input, "
      "8,732 default boxes, about 1/16 of SSD300's FLOPs), for CPUs and small data sets",
      {.num_classes = 21, .in_channels = 3});

  // Pose models have fixed outputs (38 PAF, 19 heatmap channels: TorchCV's COCO
  // set-up); num_classes does not apply to them (0 in their reference options,
  // so the listing names no classes).
  register_model(
      "openpose",
      [](const ModelOptions& o) { return pose::openpose_vgg19({.in_channels = o.in_channels}); },
      "OpenPose on VGG-19 (pose, output stride 8, 6 stages of 38 PAF + 19 heatmap channels); "
      "torchvision's VGG-19 names for the backbone, TorchCV's for the stages",
      {.num_classes = 0, .in_channels = 3});
  register_model(
      "openpose_lite",
      [](const ModelOptions& o) { return pose::openpose_lite({.in_channels = o.in_channels}); },
      "OpenPose with a quarter of the channels, BatchNorm in the backbone and 3 stages (pose, "
      "output stride 8, 38 PAF + 19 heatmap channels), for CPUs and small data sets",
      {.num_classes = 0, .in_channels = 3});

  using SegFn = std::shared_ptr<seg::SegmentationModel> (*)(seg::SegModelOptions);
  struct SegEntry {
    const char* name;
    SegFn fn;
    const char* description;
  };
  const SegEntry segs[] = {
      {"deeplabv3_resnet50", seg::deeplabv3_resnet50,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-50"},
      {"deeplabv3_resnet101", seg::deeplabv3_resnet101,
       "DeepLabV3 (ASPP rates 12/24/36 + image pooling) on a dilated ResNet-101"},
      {"fcn_resnet50", seg::fcn_resnet50, "FCN on a dilated ResNet-50"},
      {"fcn_resnet101", seg::fcn_resnet101, "FCN on a dilated ResNet-101"},
      {"pspnet_resnet50", seg::pspnet_resnet50,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-50"},
      {"pspnet_resnet101", seg::pspnet_resnet101,
       "PSPNet (pyramid pooling, bins 1/2/3/6) on a dilated ResNet-101"},
      {"pspnet_resnet18", seg::pspnet_resnet18,
       "PSPNet (bins 1/2/3/6, 128-channel head) on a dilated ResNet-18, a small model"},
      {"deeplabv3_resnet18", seg::deeplabv3_resnet18,
       "DeepLabV3 (128-channel ASPP) on a dilated ResNet-18, a small model"},
      {"pspnet_deepbase_resnet50", seg::pspnet_deepbase_resnet50,
       "TorchCV's PSPNet (bins 1/2/3/6) on its deep-stem dilated ResNet-50 "
       "(deepbase_resnet50_d8), TorchCV's names"},
      {"pspnet_deepbase_resnet101", seg::pspnet_deepbase_resnet101,
       "TorchCV's PSPNet (bins 1/2/3/6) on its deep-stem dilated ResNet-101 "
       "(deepbase_resnet101_d8), TorchCV's names"},
  };
  for (const auto& m : segs) {
    const SegFn fn = m.fn;
    register_model(
        m.name,
        [fn](const ModelOptions& o) {
          return fn({.num_classes = o.num_classes, .in_channels = o.in_channels});
        },
        std::string(m.description) +
            (std::string(m.name).find("deepbase") != std::string::npos
                 ? " with the 512-channel auxiliary head (dsn) on layer3 (segmentation, output "
                   "stride 8, outputs at the input size)"
                 : " with the auxiliary FCN head on layer3 (segmentation, output stride 8, "
                   "outputs at the input size); torchvision's segmentation names"),
        {.num_classes = 21, .in_channels = 3});
  }
}

}  // namespace

void register_model(const std::string& name, ModelFactory factory, const std::string& description,
                    const ModelOptions& reference) {
  TCV_CHECK(!name.empty(), "[register_model] empty model name");
  TCV_CHECK(factory != nullptr, "[register_model] \"", name, "\" has no factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TCV_CHECK(!r.entries.count(name), "[register_model] \"", name, "\" is already registered");
  r.entries[name] = Entry{std::move(factory), description, reference, std::nullopt};
}

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& opts) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    factory = entry_of(r, name, "create_model").factory;
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
  return entry_of(r, name, "model_description").description;
}

ModelOptions model_reference_options(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return entry_of(r, name, "model_reference_options").reference;
}

int64_t model_parameter_count(const std::string& name) {
  ModelOptions reference;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const Entry& e = entry_of(r, name, "model_parameter_count");
    if (e.parameter_count) return *e.parameter_count;
    reference = e.reference;
  }
  int64_t count = 0;
  {
    nn::init::SkipInitGuard shapes_only;  // nothing drawn: quick, and the generators stay put
    // A model without classes (0 in its reference) ignores num_classes.
    if (reference.num_classes == 0) reference.num_classes = 1;
    count = create_model(name, reference)->num_parameters();
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.at(name).parameter_count = count;
  return count;
}

namespace {
// 11689512 -> "11,689,512".
std::string with_thousands(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}
}  // namespace

std::string model_listing() {
  const std::vector<std::string> names = model_names();
  size_t width = 0;
  for (const std::string& n : names) width = std::max(width, n.size());
  std::string out;
  for (const std::string& n : names) {
    const ModelOptions ref = model_reference_options(n);
    std::string count = with_thousands(model_parameter_count(n));
    out += n + std::string(width - n.size() + 2, ' ') +
           std::string(11 - std::min<size_t>(11, count.size()), ' ') + count + " parameters (" +
           (ref.num_classes > 0 ? std::to_string(ref.num_classes) + " classes, " : std::string()) +
           std::to_string(ref.in_channels) +
           (ref.in_channels == 1 ? " channel)  " : " channels)  ") + model_description(n) + "\n";
  }
  return out;
}

void register_builtin_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_model("fmnist_cnn",
                   [](const ModelOptions& o) {
                     return std::make_shared<cls::FmnistCnn>(o.num_classes, o.in_channels);
                   },
                   "2-conv CNN for 28x28 images (conv32-pool-conv64-pool-fc128-fc)",
                   {.num_classes = 10, .in_channels = 1});
    register_model(
        "fmnist_resnet",
        [](const ModelOptions& o) {
          return std::make_shared<cls::FmnistResNet>(o.num_classes, o.in_channels);
        },
        "small CIFAR-style ResNet for 28x28 images: 3x3 stem, BasicBlocks x2 at 32/64/128 "
        "channels, global average pool, fc",
        {.num_classes = 10, .in_channels = 1});
    register_zoo_models();
  });
}

}  // namespace tcv::models
