// The classification zoo: parameter counts, state_dict names and shapes equal to
// torchvision's (checked against torchvision's structure in PyTorch 1.13, see
// scripts/make_golden_cls.py --check-counts), output and feature-map shapes,
// dilated backbones, initialisation and the registry entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "models/cls/mobilenet_v2.h"
#include "models/cls/resnet.h"
#include "models/cls/vgg.h"
#include "models/registry.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using models::cls::ResNetStem;

std::map<std::string, Shape> shapes(const nn::Module& m) {
  std::map<std::string, Shape> s;
  for (const auto& [name, t] : m.state_dict()) s[name] = t.shape();
  return s;
}

/// Expects each key to exist with the given shape.
void expect_keys(const nn::Module& m, const std::vector<std::pair<std::string, Shape>>& want) {
  const auto s = shapes(m);
  for (const auto& [key, shape] : want) {
    auto it = s.find(key);
    if (it == s.end()) {
      ADD_FAILURE() << "missing key " << key;
      continue;
    }
    EXPECT_EQ(it->second, shape) << key;
  }
}

std::vector<std::string> first_keys(const nn::Module& m, size_t n) {
  std::vector<std::string> k;
  for (const auto& [name, t] : m.state_dict())
    if (k.size() < n) k.push_back(name);
  return k;
}

/// Big models, built once per process (each build initialises millions of weights).
template <typename Make>
std::shared_ptr<nn::Module> cached(const std::string& key, Make make) {
  static std::map<std::string, std::shared_ptr<nn::Module>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make()).first;
  return it->second;
}

std::shared_ptr<models::cls::ResNet> resnet(const std::string& name) {
  using models::cls::ResNet;
  static const std::map<std::string, std::shared_ptr<ResNet> (*)(models::cls::ResNetOptions)> fns =
      {{"resnet18", models::cls::resnet18},
       {"resnet34", models::cls::resnet34},
       {"resnet50", models::cls::resnet50},
       {"resnet101", models::cls::resnet101}};
  if (name == "resnet18_cifar10")
    return std::dynamic_pointer_cast<ResNet>(cached(name, [] {
      return models::cls::resnet18({.num_classes = 10, .stem = ResNetStem::cifar});
    }));
  return std::dynamic_pointer_cast<ResNet>(
      cached(name, [&] { return fns.at(name)(models::cls::ResNetOptions{}); }));
}

/// Root mean square of a tensor's elements.
double rms(const Tensor& t) {
  double ss = 0;
  const auto v = t.contiguous().to_vector<double>();
  for (double e : v) ss += e * e;
  return std::sqrt(ss / static_cast<double>(v.size()));
}

TEST(ResNet, ParameterCountsEqualTorchvision) {
  EXPECT_EQ(resnet("resnet18")->num_parameters(), 11689512);
  EXPECT_EQ(resnet("resnet34")->num_parameters(), 21797672);
  EXPECT_EQ(resnet("resnet50")->num_parameters(), 25557032);
  EXPECT_EQ(resnet("resnet101")->num_parameters(), 44549160);
  // CIFAR stem, 10 classes (the torch.nn equivalent has 11,173,962).
  EXPECT_EQ(resnet("resnet18_cifar10")->num_parameters(), 11173962);
}

TEST(ResNet, StateDictNamesEqualTorchvision) {
  auto r18 = resnet("resnet18");
  EXPECT_EQ(r18->state_dict().size(), 122u);
  EXPECT_EQ(first_keys(*r18, 8),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                      "bn1.running_var", "bn1.num_batches_tracked",
                                      "layer1.0.conv1.weight", "layer1.0.bn1.weight"}));
  expect_keys(*r18, {{"conv1.weight", {64, 3, 7, 7}},
                     {"layer2.0.downsample.0.weight", {128, 64, 1, 1}},
                     {"layer2.0.downsample.1.running_mean", {128}},
                     {"layer4.1.bn2.running_var", {512}},
                     {"layer4.1.conv2.weight", {512, 512, 3, 3}},
                     {"fc.weight", {1000, 512}},
                     {"fc.bias", {1000}}});
  EXPECT_FALSE(shapes(*r18).count("layer1.0.downsample.0.weight"));

  auto r50 = resnet("resnet50");
  EXPECT_EQ(r50->state_dict().size(), 320u);
  expect_keys(*r50, {{"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
                     {"layer1.0.conv3.weight", {256, 64, 1, 1}},
                     {"layer2.0.conv2.weight", {128, 128, 3, 3}},  // V1.5: stride on the 3x3
                     {"layer3.5.bn3.running_var", {1024}},
                     {"layer4.0.downsample.0.weight", {2048, 1024, 1, 1}},
                     {"fc.weight", {1000, 2048}}});
  EXPECT_EQ(r50->layer2->at<models::cls::Bottleneck>(0)->conv2->options.stride, nn::Size2(2));
  EXPECT_EQ(r50->layer2->at<models::cls::Bottleneck>(0)->conv1->options.stride, nn::Size2(1));
  EXPECT_EQ(resnet("resnet101")->state_dict().size(), 626u);
  EXPECT_EQ(resnet("resnet34")->state_dict().size(), 218u);

  // The CIFAR stem changes conv1's kernel and drops the (parameterless) max-pool only.
  auto cifar =
      models::cls::resnet18({.num_classes = 10, .in_channels = 1, .stem = ResNetStem::cifar});
  EXPECT_EQ(cifar->state_dict().size(), 122u);
  expect_keys(*cifar, {{"conv1.weight", {64, 1, 3, 3}}, {"fc.weight", {10, 512}}});
  EXPECT_EQ(cifar->maxpool, nullptr);
}

TEST(ResNet, OutputShapes) {
  manual_seed(0);
  EXPECT_EQ(resnet("resnet18")->forward(randn({2, 3, 64, 64})).shape(), (Shape{2, 1000}));
  EXPECT_EQ(resnet("resnet18_cifar10")->forward(randn({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  auto r50 = resnet("resnet50");
  EXPECT_EQ(r50->forward(randn({2, 3, 32, 32})).shape(), (Shape{2, 1000}));
  const std::string err = testing::error_of([&] { r50->forward(randn({1, 1, 32, 32})); });
  EXPECT_NE(err.find("[ResNet] expects input (N, 3, H, W)"), std::string::npos) << err;
}

TEST(ResNet, FeatureMapsAndStrides) {
  manual_seed(1);
  const Tensor x = randn({1, 3, 64, 64});
  auto r18 = resnet("resnet18");
  const auto f = r18->forward_features(x);
  EXPECT_EQ(f.stem.shape(), (Shape{1, 64, 32, 32}));
  EXPECT_EQ(f.layer1.shape(), (Shape{1, 64, 16, 16}));
  EXPECT_EQ(f.layer2.shape(), (Shape{1, 128, 8, 8}));
  EXPECT_EQ(f.layer3.shape(), (Shape{1, 256, 4, 4}));
  EXPECT_EQ(f.layer4.shape(), (Shape{1, 512, 2, 2}));
  EXPECT_EQ(r18->feature_strides(), (std::array<int64_t, 5>{2, 4, 8, 16, 32}));
  EXPECT_EQ(r18->feature_channels(), (std::array<int64_t, 5>{64, 64, 128, 256, 512}));
  // forward() is forward_features() -> pool -> fc.
  r18->eval();
  const Tensor pooled = ops::adaptive_avg_pool2d(r18->forward_features(x).layer4, {1, 1});
  testing::expect_close(r18->forward(x), r18->fc->forward(pooled.flatten(1)), 1e-6, 1e-5,
                        "forward = fc(pool(layer4))");
  r18->train();

  auto cifar = resnet("resnet18_cifar10");
  const auto fc = cifar->forward_features(randn({1, 3, 32, 32}));
  EXPECT_EQ(fc.stem.shape(), (Shape{1, 64, 32, 32}));
  EXPECT_EQ(fc.layer1.shape(), (Shape{1, 64, 32, 32}));
  EXPECT_EQ(fc.layer4.shape(), (Shape{1, 512, 4, 4}));
  EXPECT_EQ(cifar->feature_strides(), (std::array<int64_t, 5>{1, 1, 2, 4, 8}));
}

TEST(ResNet, DilatedOutputStride8And16) {
  manual_seed(2);
  const Tensor x = randn({1, 3, 32, 32});
  // Output stride 8, as torchvision's segmentation backbones.
  auto os8 = models::cls::resnet50({.replace_stride_with_dilation = {false, true, true}});
  EXPECT_EQ(os8->num_parameters(), 25557032);  // dilation adds no parameters
  const auto f8 = os8->forward_features(x);
  EXPECT_EQ(f8.layer1.shape(), (Shape{1, 256, 8, 8}));
  EXPECT_EQ(f8.layer2.shape(), (Shape{1, 512, 4, 4}));
  EXPECT_EQ(f8.layer3.shape(), (Shape{1, 1024, 4, 4}));
  EXPECT_EQ(f8.layer4.shape(), (Shape{1, 2048, 4, 4}));
  EXPECT_EQ(os8->feature_strides(), (std::array<int64_t, 5>{2, 4, 8, 8, 8}));
  EXPECT_EQ(os8->feature_channels(), (std::array<int64_t, 5>{64, 256, 512, 1024, 2048}));
  // torchvision's dilation schedule: the first block of a dilated layer keeps the
  // previous dilation, the others use the new one; the projection has stride 1.
  using models::cls::Bottleneck;
  EXPECT_EQ(os8->layer3->at<Bottleneck>(0)->conv2->options.dilation, nn::Size2(1));
  EXPECT_EQ(os8->layer3->at<Bottleneck>(1)->conv2->options.dilation, nn::Size2(2));
  EXPECT_EQ(os8->layer3->at<Bottleneck>(1)->conv2->options.padding, nn::Size2(2));
  EXPECT_EQ(os8->layer4->at<Bottleneck>(0)->conv2->options.dilation, nn::Size2(2));
  EXPECT_EQ(os8->layer4->at<Bottleneck>(2)->conv2->options.dilation, nn::Size2(4));
  EXPECT_EQ(os8->layer4->at<Bottleneck>(0)->conv2->options.stride, nn::Size2(1));
  auto ds = std::dynamic_pointer_cast<nn::Sequential>(os8->layer4->at<Bottleneck>(0)->downsample);
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->at<nn::Conv2d>(0)->options.stride, nn::Size2(1));
  EXPECT_EQ(os8->forward(x).shape(), (Shape{1, 1000}));

  // Output stride 16 on a BasicBlock ResNet: tcv dilates both 3x3 convolutions of
  // a BasicBlock (torchvision refuses dilation there).
  using models::cls::BasicBlock;
  auto os16 = models::cls::resnet18({.replace_stride_with_dilation = {false, false, true}});
  const auto f16 = os16->forward_features(x);
  EXPECT_EQ(f16.layer3.shape(), (Shape{1, 256, 2, 2}));
  EXPECT_EQ(f16.layer4.shape(), (Shape{1, 512, 2, 2}));
  EXPECT_EQ(os16->feature_strides(), (std::array<int64_t, 5>{2, 4, 8, 16, 16}));
  EXPECT_EQ(os16->layer4->at<BasicBlock>(0)->conv1->options.stride, nn::Size2(1));
  EXPECT_EQ(os16->layer4->at<BasicBlock>(0)->conv1->options.dilation, nn::Size2(1));
  EXPECT_EQ(os16->layer4->at<BasicBlock>(1)->conv1->options.dilation, nn::Size2(2));
  EXPECT_EQ(os16->layer4->at<BasicBlock>(1)->conv2->options.padding, nn::Size2(2));
}

TEST(ResNet, InitAsTorchvision) {
  manual_seed(3);
  auto block = resnet("resnet50")->layer3->at<models::cls::Bottleneck>(1);
  // kaiming_normal_(fan_out, relu): std = sqrt(2 / (out · k · k)).
  const double want = std::sqrt(2.0 / (256 * 9));
  EXPECT_NEAR(rms(block->conv2->weight), want, 0.03 * want);
  EXPECT_NEAR(rms(block->conv3->weight), std::sqrt(2.0 / 1024), 0.03 * std::sqrt(2.0 / 1024));
  EXPECT_EQ(block->bn3->weight.to_vector<float>(), std::vector<float>(1024, 1.0f));
  EXPECT_EQ(block->bn3->bias.to_vector<float>(), std::vector<float>(1024, 0.0f));

  models::cls::Bottleneck zb(1024, 256);
  models::cls::init_resnet_weights(zb, /*zero_init_residual=*/true);
  EXPECT_EQ(zb.bn3->weight.to_vector<float>(), std::vector<float>(1024, 0.0f));
  EXPECT_EQ(zb.bn2->weight.to_vector<float>(), std::vector<float>(256, 1.0f));
  auto z18 = models::cls::resnet18({.num_classes = 10, .zero_init_residual = true});
  EXPECT_EQ(z18->layer1->at<models::cls::BasicBlock>(0)->bn2->weight.to_vector<float>(),
            std::vector<float>(64, 0.0f));
  // With every residual branch zeroed, each block is relu(x + shortcut): in eval
  // mode layer1 (identity shortcuts) maps its non-negative input to itself.
  z18->eval();
  NoGradGuard no_grad;
  const auto f = z18->forward_features(randn({1, 3, 32, 32}));
  testing::expect_close(f.layer1, z18->maxpool->forward(f.stem), 0, 0, "identity residuals");
}

TEST(VGG, ParameterCountsNamesAndShapes) {
  manual_seed(4);
  // One at a time: each holds ~0.5 GB of parameters. init_weights = false skips
  // torchvision's init (slow on 120M weights) where only the structure matters.
  {
    auto bn = models::cls::vgg11({.batch_norm = true, .init_weights = false});
    EXPECT_EQ(bn->num_parameters(), 132868840);
    // VGG-11 without batch norm (132,863,336) has the same layers minus the BNs'
    // weight and bias; building it too would cost another 0.5 GB and a second.
    int64_t bn_params = 0;
    for (auto& [name, m] : bn->named_modules())
      if (auto* b = dynamic_cast<nn::BatchNorm2d*>(m)) bn_params += 2 * b->num_features;
    EXPECT_EQ(bn->num_parameters() - bn_params, 132863336);
  }
  {
    auto bn = models::cls::vgg16({.batch_norm = true, .init_weights = false});
    EXPECT_EQ(bn->num_parameters(), 138365992);
    EXPECT_EQ(bn->state_dict().size(), 97u);
    expect_keys(*bn, {{"features.0.weight", {64, 3, 3, 3}},
                      {"features.1.running_var", {64}},
                      {"features.41.running_var", {512}},
                      {"features.40.weight", {512, 512, 3, 3}}});
  }
  auto v = models::cls::vgg16();
  EXPECT_EQ(v->num_parameters(), 138357544);
  EXPECT_EQ(v->state_dict().size(), 32u);
  expect_keys(*v, {{"features.0.weight", {64, 3, 3, 3}},
                   {"features.28.weight", {512, 512, 3, 3}},
                   {"features.28.bias", {512}},
                   {"classifier.0.weight", {4096, 25088}},
                   {"classifier.3.weight", {4096, 4096}},
                   {"classifier.6.weight", {1000, 4096}},
                   {"classifier.6.bias", {1000}}});
  // torchvision's init: convs kaiming_normal_(fan_out) with bias 0, Linear N(0, 0.01²), bias 0.
  auto conv = v->features->at<nn::Conv2d>(28);
  EXPECT_NEAR(rms(conv->weight), std::sqrt(2.0 / (512 * 9)), 0.02 * std::sqrt(2.0 / (512 * 9)));
  EXPECT_EQ(rms(conv->bias), 0.0);
  auto fc = v->classifier->at<nn::Linear>(3);
  EXPECT_NEAR(rms(fc->weight), 0.01, 0.0002);
  EXPECT_EQ(rms(fc->bias), 0.0);
  EXPECT_NE(v->str().find("Dropout(p=0.5"), std::string::npos);

  // Small inputs: 32x32 leaves a 1x1 map that the adaptive pool repeats to 7x7.
  EXPECT_EQ(v->forward(randn({1, 3, 32, 32})).shape(), (Shape{1, 1000}));
  v->eval();
  NoGradGuard no_grad;
  const Tensor h = v->avgpool->forward(v->features->forward(randn({1, 3, 32, 32})));
  EXPECT_EQ(h.shape(), (Shape{1, 512, 7, 7}));
  const auto hv = h.to_vector<float>();
  EXPECT_EQ(hv[0], hv[48]);
  const std::string err = testing::error_of([&] { v->forward(randn({1, 1, 32, 32})); });
  EXPECT_NE(err.find("[VGG] expects input (N, 3, H, W)"), std::string::npos) << err;
}

TEST(MobileNetV2, ParameterCountNamesAndShapes) {
  manual_seed(6);
  models::cls::MobileNetV2 m;
  EXPECT_EQ(m.num_parameters(), 3504872);
  EXPECT_EQ(m.state_dict().size(), 314u);
  EXPECT_EQ(
      first_keys(m, 7),
      (std::vector<std::string>{"features.0.0.weight", "features.0.1.weight", "features.0.1.bias",
                                "features.0.1.running_mean", "features.0.1.running_var",
                                "features.0.1.num_batches_tracked", "features.1.conv.0.0.weight"}));
  expect_keys(m, {{"features.0.0.weight", {32, 3, 3, 3}},
                  {"features.1.conv.0.0.weight", {32, 1, 3, 3}},  // depthwise, no expansion
                  {"features.1.conv.1.weight", {16, 32, 1, 1}},
                  {"features.2.conv.0.0.weight", {96, 16, 1, 1}},
                  {"features.2.conv.1.0.weight", {96, 1, 3, 3}},
                  {"features.17.conv.2.weight", {320, 960, 1, 1}},
                  {"features.17.conv.3.running_var", {320}},
                  {"features.18.0.weight", {1280, 320, 1, 1}},
                  {"features.18.1.num_batches_tracked", {}},
                  {"classifier.1.weight", {1000, 1280}},
                  {"classifier.1.bias", {1000}}});
  EXPECT_EQ(m.features->size(), 19u);
  EXPECT_EQ(models::cls::MobileNetV2({.num_classes = 10}).num_parameters(), 2236682);
  EXPECT_EQ(models::cls::make_divisible(32 * 0.75, 8), 24);
  EXPECT_EQ(models::cls::make_divisible(1280 * 1.4, 8), 1792);
  EXPECT_EQ(models::cls::make_divisible(16 * 0.35, 8), 8);

  // Residual connections exactly where torchvision has them (stride 1, inp == oup).
  using models::cls::InvertedResidual;
  EXPECT_FALSE(m.features->at<InvertedResidual>(1)->use_res_connect);
  EXPECT_TRUE(m.features->at<InvertedResidual>(3)->use_res_connect);
  EXPECT_FALSE(m.features->at<InvertedResidual>(4)->use_res_connect);
  EXPECT_TRUE(m.features->at<InvertedResidual>(16)->use_res_connect);

  // Init: kaiming_normal_(fan_out), Linear N(0, 0.01²) and bias 0.
  auto pw = m.features->at<InvertedResidual>(17)->conv->at<nn::Conv2d>(2);
  EXPECT_NEAR(rms(pw->weight), std::sqrt(2.0 / 320), 0.02 * std::sqrt(2.0 / 320));
  auto fc = m.classifier->at<nn::Linear>(1);
  EXPECT_NEAR(rms(fc->weight), 0.01, 0.0003);
  EXPECT_EQ(rms(fc->bias), 0.0);

  auto small = models::cls::MobileNetV2({.num_classes = 10, .in_channels = 1});
  EXPECT_EQ(small.forward(randn({2, 1, 64, 64})).shape(), (Shape{2, 10}));
  EXPECT_EQ(small.features->forward(randn({1, 1, 64, 64})).shape(), (Shape{1, 1280, 2, 2}));
}

TEST(ReLU6, ClampsToZeroSix) {
  nn::ReLU6 r;
  const Tensor y = r.forward(from_vector<float>({-1.0f, 0.5f, 5.0f, 7.0f}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.0f, 0.5f, 5.0f, 6.0f}));
}

TEST(ClsRegistry, EveryModelIsRegisteredAndBuilds) {
  models::register_builtin_models();
  const auto names = models::model_names();
  for (const char* n : {"resnet18", "resnet34", "resnet50", "resnet101", "resnet18_cifar",
                        "resnet34_cifar", "resnet50_cifar", "vgg11", "vgg11_bn", "vgg13",
                        "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "mobilenet_v2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_FALSE(models::model_description(n).empty()) << n;
  }
  // torchvision's counts at 1000 classes, counted on the models themselves.
  EXPECT_EQ(models::model_parameter_count("vgg16"), 138357544);
  EXPECT_EQ(models::model_parameter_count("resnet50"), 25557032);
  // A small one through the registry (the big ones' counts are checked above).
  EXPECT_EQ(models::create_model("mobilenet_v2", {.num_classes = 1000, .in_channels = 3})
                ->num_parameters(),
            3504872);
  // num_classes and in_channels from ModelOptions.
  auto m = models::create_model("resnet18_cifar", {.num_classes = 10, .in_channels = 1});
  expect_keys(*m, {{"conv1.weight", {64, 1, 3, 3}}, {"fc.weight", {10, 512}}});
  EXPECT_EQ(m->num_parameters(), 11173962 - 64 * 2 * 9);
  auto mb = models::create_model("mobilenet_v2", {.num_classes = 5, .in_channels = 1});
  expect_keys(*mb, {{"features.0.0.weight", {32, 1, 3, 3}}, {"classifier.1.weight", {5, 1280}}});
}

}  // namespace
}  // namespace tcv
