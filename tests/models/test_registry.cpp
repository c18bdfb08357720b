// The model registry and the Fashion-MNIST models: names, errors, shapes,
// parameter counts and key names equal to the PyTorch equivalents, init, and a
// few training steps that lower the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "models/cls/fmnist.h"
#include "models/cls/resnet.h"
#include "models/det/ssd.h"
#include "models/pose/openpose.h"
#include "models/registry.h"
#include "models/seg/segmentation.h"
#include "support/gradcheck.h"
#include "train/optim.h"

namespace tcv {
namespace {

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (const auto& [n, t] : sd) k.push_back(n);
  return k;
}

bool has_key(const nn::StateDict& sd, const std::string& key) {
  return std::any_of(sd.begin(), sd.end(), [&](const auto& p) { return p.first == key; });
}

TEST(Registry, ListsBuiltinsWithDescriptions) {
  models::register_builtin_models();
  models::register_builtin_models();  // idempotent
  const auto names = models::model_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "fmnist_cnn"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "fmnist_resnet"), names.end());
  EXPECT_FALSE(models::model_description("fmnist_cnn").empty());
  EXPECT_FALSE(models::model_description("fmnist_resnet").empty());
}

// The listing's counts come from the models, so they cannot drift from the code.
TEST(Registry, ListingCountsParametersOnTheModels) {
  models::register_builtin_models();
  manual_seed(5);
  const uint64_t offset = default_generator().offset();
  EXPECT_EQ(models::model_parameter_count("fmnist_cnn"), 421642);
  EXPECT_EQ(default_generator().offset(), offset);  // counted without drawing initial values
  const models::ModelOptions ref = models::model_reference_options("fmnist_resnet");
  EXPECT_EQ(ref.num_classes, 10);
  EXPECT_EQ(ref.in_channels, 1);
  EXPECT_EQ(models::model_parameter_count("fmnist_resnet"),
            models::create_model("fmnist_resnet", ref)->num_parameters());
  const std::string listing = models::model_listing();
  EXPECT_NE(listing.find("fmnist_cnn"), std::string::npos) << listing;
  EXPECT_NE(listing.find("421,642 parameters (10 classes, 1 channel)"), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("11,689,512 parameters (1000 classes, 3 channels)  ResNet-18"),
            std::string::npos)
      << listing;
  // Pose models have no classes: the listing names only their input channels.
  EXPECT_NE(listing.find("52,311,446 parameters (3 channels)  OpenPose on VGG-19"),
            std::string::npos)
      << listing;
  EXPECT_THROW(models::model_parameter_count("nope"), Error);
}

// Each family registers its own names; the families partition the registry.
TEST(Registry, FamiliesRegisterTheirOwnModels) {
  models::register_builtin_models();
  using Names = std::vector<std::string>;
  EXPECT_EQ(models::model_names("det"), (Names{"ssd300", "ssd300_lite", "ssd512"}));
  EXPECT_EQ(models::model_names("pose"), (Names{"openpose", "openpose_lite"}));
  const Names seg = models::model_names("seg");
  EXPECT_EQ(seg.size(), 10u);
  EXPECT_NE(std::find(seg.begin(), seg.end(), "pspnet_deepbase_resnet101"), seg.end());
  const Names cls = models::model_names("cls");
  EXPECT_NE(std::find(cls.begin(), cls.end(), "resnet50_cifar"), cls.end());
  EXPECT_NE(std::find(cls.begin(), cls.end(), "vgg19_bn"), cls.end());
  size_t sum = 0;
  for (const char* family : {"cls", "det", "seg", "pose"})
    sum += models::model_names(family).size();
  EXPECT_EQ(sum, models::model_names().size());
  EXPECT_TRUE(models::model_names("instance").empty());
}

// A family's builder takes the family's own options; another family's name (or
// another model type) gives null, so a task can say which models it trains.
TEST(Registry, FamilyBuildersTakeTheFamilysOptions) {
  models::register_builtin_models();
  nn::init::SkipInitGuard shapes_only;
  auto ssd = models::create_family_model<models::det::SSD, models::det::SsdOptions>(
      "ssd300_lite", {.num_classes = 3, .in_channels = 1});
  ASSERT_NE(ssd, nullptr);
  EXPECT_EQ(ssd->options.width_divisor, 4);  // the name's own settings
  EXPECT_EQ(ssd->options.num_classes, 3);
  EXPECT_EQ(ssd->options.in_channels, 1);
  auto seg =
      models::create_family_model<models::seg::SegmentationModel, models::seg::SegModelOptions>(
          "pspnet_resnet18", {.num_classes = 5, .aux = models::seg::AuxHead::off});
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(seg->options.depth, 18);  // set by the name
  EXPECT_EQ(seg->aux_classifier, nullptr);
  auto pose = models::create_family_model<models::pose::OpenPose, models::pose::OpenPoseOptions>(
      "openpose_lite", {.init = models::pose::PoseInit::pytorch_default});
  ASSERT_NE(pose, nullptr);
  EXPECT_EQ(pose->options.init, models::pose::PoseInit::pytorch_default);
  EXPECT_EQ(pose->stages.size(), 3u);
  auto cifar = models::create_family_model<models::cls::ResNet, models::cls::ResNetOptions>(
      "resnet18_cifar", {.num_classes = 7});
  ASSERT_NE(cifar, nullptr);
  EXPECT_EQ(cifar->maxpool, nullptr);  // the CIFAR stem, whatever the options said
  // Another family's model, an unknown name, a model without a family builder.
  EXPECT_EQ(
      (models::create_family_model<models::det::SSD, models::det::SsdOptions>("openpose", {})),
      nullptr);
  EXPECT_EQ((models::create_family_model<models::det::SSD, models::det::SsdOptions>("nope", {})),
            nullptr);
  EXPECT_EQ(
      (models::create_family_model<models::det::SSD, models::det::SsdOptions>("fmnist_cnn", {})),
      nullptr);
}

TEST(SkipInit, BuildsShapesWithoutDrawing) {
  manual_seed(7);
  const uint64_t offset = default_generator().offset();
  {
    nn::init::SkipInitGuard skip;
    EXPECT_TRUE(nn::init::SkipInitGuard::active());
    nn::Linear fc(8, 4);
    EXPECT_EQ(fc.weight.shape(), (Shape{4, 8}));
  }
  EXPECT_FALSE(nn::init::SkipInitGuard::active());
  EXPECT_EQ(default_generator().offset(), offset);
  nn::Linear fc(8, 4);  // and draws again once the guard is gone
  EXPECT_GT(default_generator().offset(), offset);
}

TEST(Registry, UnknownNameListsKnownOnes) {
  models::register_builtin_models();
  try {
    models::create_model("resnet9000", {});
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown model \"resnet9000\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("fmnist_cnn"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fmnist_resnet"), std::string::npos) << msg;
  }
  EXPECT_THROW(models::model_description("nope"), Error);
  EXPECT_THROW(models::create_model("fmnist_cnn", {.num_classes = 0}), Error);
}

TEST(Registry, CustomModelsAndDuplicates) {
  models::register_model(
      "test_linear",
      [](const models::ModelOptions& o) {
        return std::make_shared<nn::Linear>(o.in_channels, o.num_classes);
      },
      "a linear layer for tests");
  auto m = models::create_model("test_linear", {.num_classes = 4, .in_channels = 6});
  EXPECT_EQ(m->num_parameters(), 6 * 4 + 4);
  EXPECT_EQ(models::model_description("test_linear"), "a linear layer for tests");
  EXPECT_THROW(models::register_model(
                   "test_linear",
                   [](const models::ModelOptions&) { return std::make_shared<nn::ReLU>(); }, ""),
               Error);
}

TEST(FmnistCnn, ShapesCountsAndNames) {
  models::register_builtin_models();
  auto m = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  EXPECT_EQ(m->num_parameters(), 421642);
  EXPECT_EQ(m->forward(randn({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  auto rgb = models::create_model("fmnist_cnn", {.num_classes = 5, .in_channels = 3});
  const auto sd = rgb->state_dict();
  EXPECT_EQ(sd[0].second.shape(), (Shape{32, 3, 3, 3}));
  EXPECT_EQ(sd[4].first, "7.weight");  // the keys of bench/compare/fmnist_cnn_torch.py
  EXPECT_EQ(sd[4].second.shape(), (Shape{128, 3136}));
  EXPECT_EQ(sd[7].second.shape(), (Shape{5}));
  EXPECT_EQ(rgb->num_parameters(), 421642 + 32 * 2 * 9 - 5 * 129);
  EXPECT_THROW(m->forward(randn({2, 1, 32, 32})), Error);
}

TEST(FmnistResNet, ShapesCountsNamesAndInit) {
  manual_seed(0);
  models::register_builtin_models();
  auto m = models::create_model("fmnist_resnet", {.num_classes = 10, .in_channels = 1});
  // The same count and number of entries as the torch.nn equivalent (PyTorch 1.13).
  EXPECT_EQ(m->num_parameters(), 696042);
  const auto sd = m->state_dict();
  EXPECT_EQ(sd.size(), 92u);
  const auto names = keys(sd);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 8),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                      "bn1.running_var", "bn1.num_batches_tracked",
                                      "layer1.0.conv1.weight", "layer1.0.bn1.weight"}));
  EXPECT_TRUE(has_key(sd, "layer2.0.downsample.0.weight"));
  EXPECT_TRUE(has_key(sd, "layer3.0.downsample.1.running_var"));
  EXPECT_TRUE(has_key(sd, "layer3.1.bn2.num_batches_tracked"));
  EXPECT_FALSE(has_key(sd, "layer1.0.downsample.0.weight"));
  EXPECT_FALSE(has_key(sd, "layer2.1.downsample.0.weight"));
  EXPECT_EQ(sd.back().first, "fc.bias");

  auto* net = dynamic_cast<models::cls::FmnistResNet*>(m.get());
  ASSERT_NE(net, nullptr);
  // torchvision's init: kaiming_normal_(fan_out, relu) convs; BN weight 1, bias 0.
  auto block = net->layer3->at<models::cls::BasicBlock>(1);
  const auto w = block->conv2->weight.to_vector<double>();
  double ss = 0;
  for (double v : w) ss += v * v;
  const double want = std::sqrt(2.0 / (128 * 9));
  EXPECT_NEAR(std::sqrt(ss / static_cast<double>(w.size())), want, 0.02 * want);
  EXPECT_EQ(block->bn2->weight.to_vector<float>(), std::vector<float>(128, 1.0f));
  EXPECT_EQ(block->bn2->bias.to_vector<float>(), std::vector<float>(128, 0.0f));

  Tensor x = randn({2, 1, 28, 28});
  EXPECT_EQ(m->forward(x).shape(), (Shape{2, 10}));
  m->eval();
  testing::expect_close(m->forward(x), m->forward(x), 0, 0, "eval is deterministic");
  EXPECT_NE(m->str().find("(downsample): Sequential("), std::string::npos);
}

TEST(FmnistModels, TrainingStepsLowerTheLoss) {
  manual_seed(3);
  models::register_builtin_models();
  Tensor x = randn({8, 1, 28, 28});
  Tensor y = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7});
  for (const char* name : {"fmnist_cnn", "fmnist_resnet"}) {
    auto m = models::create_model(name, {.num_classes = 10, .in_channels = 1});
    train::SGD opt(m->named_parameters(), {.lr = 0.05, .momentum = 0.9});
    double first = 0, last = 0;
    for (int it = 0; it < 5; ++it) {
      opt.zero_grad();
      Tensor loss = ops::cross_entropy(m->forward(x), y);
      loss.backward();
      opt.step();
      (it == 0 ? first : last) = loss.item();
    }
    EXPECT_NEAR(first, std::log(10.0), 1.0) << name;
    EXPECT_LT(last, 0.85 * first) << name << ": " << first << " -> " << last;
  }
}

}  // namespace
}  // namespace tcv
