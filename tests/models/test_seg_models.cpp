// Segmentation models: parameter counts, state_dict keys and shapes equal to
// torchvision 0.14's deeplabv3_resnet50/101 and fcn_resnet50/101 and to the
// PyTorch PSPNet of scripts/make_golden_seg.py (key lists in
// tests/data/golden/seg_state_dicts.json, written by that script), output
// shapes on small inputs, the heads' structure, and the registry entries.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "models/registry.h"
#include "models/seg/heads.h"
#include "models/seg/segmentation.h"
#include "support/gradcheck.h"
#include "support/run_files.h"

namespace tcv {
namespace {

using models::seg::SegmentationModel;
using models::seg::SegModelOptions;

const Json& reference() {
  static const Json j =
      testing::read_json(testing::source_dir() + "/tests/data/golden/seg_state_dicts.json");
  return j;
}

using KeyList = std::vector<std::pair<std::string, Shape>>;

KeyList reference_keys(const std::string& model) {
  KeyList out;
  for (const Json& list : reference().at("models").at(model).at("lists"))
    for (const Json& e : reference().at("lists").at(list.get<std::string>())) {
      Shape s;
      for (const Json& d : e[1]) s.push_back(d.get<int64_t>());
      out.emplace_back(e[0].get<std::string>(), s);
    }
  return out;
}

KeyList keys_of(const nn::Module& m) {
  KeyList out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.shape());
  return out;
}

/// Big models, built once per process (each build initialises tens of millions of weights).
std::shared_ptr<SegmentationModel> model(const std::string& name) {
  static std::map<std::string, std::shared_ptr<SegmentationModel>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  models::register_builtin_models();
  manual_seed(0);
  auto m = std::dynamic_pointer_cast<SegmentationModel>(
      models::create_model(name, {.num_classes = 21, .in_channels = 3}));
  TCV_CHECK(m != nullptr, name, " is not a SegmentationModel");
  return cache.emplace(name, m).first->second;
}

// fcn_resnet101 is not built here (construction dominates this file's time): its
// backbone list is deeplabv3_resnet101's and its head list fcn_resnet50's, and its
// count is checked by arithmetic from the other models.
const char* const kModels[] = {"deeplabv3_resnet50", "deeplabv3_resnet101", "fcn_resnet50",
                               "pspnet_resnet50", "pspnet_resnet101"};

int64_t count_of(const nn::Module& m, const std::string& prefix) {
  int64_t n = 0;
  for (const auto& [name, t] : m.named_parameters())
    if (name.rfind(prefix, 0) == 0) n += t.numel();
  return n;
}

TEST(SegModels, ParameterCountsEqualTorchvision) {
  // torchvision 0.14, 21 classes, aux_loss=True (and the PSPNet of make_golden_seg.py).
  const std::map<std::string, int64_t> want = {
      {"deeplabv3_resnet50", 42004074}, {"deeplabv3_resnet101", 60996202},
      {"fcn_resnet50", 35322218},       {"fcn_resnet101", 54314346},
      {"pspnet_resnet50", 48957802},    {"pspnet_resnet101", 67949930}};
  for (const char* name : kModels) {
    EXPECT_EQ(model(name)->num_parameters(), want.at(name)) << name;
    EXPECT_EQ(model(name)->num_parameters(),
              reference().at("models").at(name).at("parameters").get<int64_t>())
        << name;
  }
  // fcn_resnet101 = ResNet-101 backbone + FCN heads.
  EXPECT_EQ(count_of(*model("deeplabv3_resnet101"), "backbone.") +
                count_of(*model("fcn_resnet50"), "classifier.") +
                count_of(*model("fcn_resnet50"), "aux_classifier."),
            want.at("fcn_resnet101"));
  EXPECT_EQ(reference().at("models").at("fcn_resnet101").at("parameters").get<int64_t>(),
            want.at("fcn_resnet101"));
  const std::vector<std::string> fcn101 = {"backbone_resnet101", "head_fcn"};
  const auto& lists = reference().at("models").at("fcn_resnet101").at("lists");
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].get<std::string>(), fcn101[0]);
  EXPECT_EQ(lists[1].get<std::string>(), fcn101[1]);
}

TEST(SegModels, StateDictKeysAndShapesEqualTorchvision) {
  for (const char* name : kModels) {
    const KeyList want = reference_keys(name), got = keys_of(*model(name));
    ASSERT_EQ(static_cast<int64_t>(want.size()),
              reference().at("models").at(name).at("state_dict_entries").get<int64_t>());
    EXPECT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      EXPECT_EQ(got[i].first, want[i].first) << name << " entry " << i;
      EXPECT_EQ(got[i].second, want[i].second) << name << " " << want[i].first;
      if (got[i] != want[i]) break;  // one message, not hundreds
    }
  }
}

TEST(SegModels, RegisteredWithDescriptions) {
  models::register_builtin_models();
  const auto names = models::model_names();
  for (const char* name : {"deeplabv3_resnet50", "deeplabv3_resnet101", "fcn_resnet50",
                           "fcn_resnet101", "pspnet_resnet50", "pspnet_resnet101"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    EXPECT_NE(models::model_description(name).find("segmentation"), std::string::npos) << name;
    EXPECT_EQ(models::model_reference_options(name).num_classes, 21) << name;
  }
  // The listing's counts are computed from the models (torchvision's, at 21 classes).
  EXPECT_EQ(models::model_parameter_count("deeplabv3_resnet50"), 42004074);
  EXPECT_EQ(models::model_parameter_count("pspnet_resnet101"), 67949930);
}

TEST(SegModels, OutputsAtInputSizeInTrainingAndEval) {
  // Small non-square inputs: layer4 is 3x2 at output stride 8.
  manual_seed(3);
  const Tensor x = randn({2, 3, 24, 16});
  for (const char* name : {"deeplabv3_resnet50", "fcn_resnet50", "pspnet_resnet50"}) {
    auto m = model(name);
    m->train();
    const models::seg::SegOutput o = m->forward_seg(x);
    EXPECT_EQ(o.out.shape(), (Shape{2, 21, 24, 16})) << name;
    EXPECT_EQ(o.aux.shape(), (Shape{2, 21, 24, 16})) << name;
    m->eval();
    {
      NoGradGuard ng;
      const models::seg::SegOutput e = m->forward_seg(x);
      // forward() is the main output alone, the auxiliary head not run.
      testing::expect_close(m->forward(x), e.out, 0, 0, std::string(name) + " forward = out");
    }
    m->train();
  }
}

TEST(SegModels, BackboneIsDilatedResNetWithoutClassifier) {
  auto m = model("deeplabv3_resnet50");
  EXPECT_EQ(m->backbone->fc, nullptr);
  EXPECT_EQ(m->backbone->avgpool, nullptr);
  EXPECT_EQ(m->backbone->feature_strides(), (std::array<int64_t, 5>{2, 4, 8, 8, 8}));
  using models::cls::Bottleneck;
  EXPECT_EQ(m->backbone->layer4->at<Bottleneck>(2)->conv2->options.dilation, nn::Size2(4));
  EXPECT_EQ(m->options.atrous_rates, (std::vector<int64_t>{12, 24, 36}));
  // The backbone's forward ends at layer4 (no pooling).
  EXPECT_EQ(m->backbone->forward(randn({1, 3, 24, 16})).shape(), (Shape{1, 2048, 3, 2}));

  // Output stride 16: only layer4 dilated, and the DeepLabV3 paper's rates.
  auto os16 = models::seg::deeplabv3_resnet50(
      {.num_classes = 5, .output_stride = 16, .aux = models::seg::AuxHead::off});
  EXPECT_EQ(os16->backbone->feature_strides(), (std::array<int64_t, 5>{2, 4, 8, 16, 16}));
  EXPECT_EQ(os16->options.atrous_rates, (std::vector<int64_t>{6, 12, 18}));
  auto aspp = os16->classifier->at<models::seg::ASPP>(0);
  EXPECT_EQ(aspp->convs->at<models::seg::ASPPConv>(3)->at<nn::Conv2d>(0)->options.dilation,
            nn::Size2(18));
  // Without the auxiliary head: no aux_classifier keys, no aux output.
  EXPECT_EQ(os16->aux_classifier, nullptr);
  for (const auto& [name, t] : os16->state_dict())
    EXPECT_EQ(name.rfind("aux_classifier", 0), std::string::npos) << name;
  os16->eval();
  NoGradGuard ng;
  const auto o = os16->forward_seg(randn({1, 3, 48, 33}));
  EXPECT_EQ(o.out.shape(), (Shape{1, 5, 48, 33}));
  EXPECT_FALSE(o.aux.defined());
  EXPECT_NE(testing::error_of([&] {
              os16->forward(randn({3, 16, 16}));
            }).find("[DeepLabV3] expects input (N, 3, H, W), got (3, 16, 16)"),
            std::string::npos);
}

TEST(SegModels, HeadsPrintAsTorchvision) {
  auto m = model("deeplabv3_resnet50");
  const std::string head = m->classifier->str();
  for (const char* line :
       {"DeepLabHead(\n  (0): ASPP(\n    (convs): ModuleList(\n      (0): Sequential(\n",
        "(1): ASPPConv(\n        (0): Conv2d(2048, 256, kernel_size=(3, 3), stride=(1, 1), "
        "padding=(12, 12), dilation=(12, 12), bias=False)",
        "(4): ASPPPooling(\n        (0): AdaptiveAvgPool2d(output_size=(1, 1))",
        "(3): Dropout(p=0.5, inplace=False)",
        "(4): Conv2d(256, 21, kernel_size=(1, 1), stride=(1, 1))"})
    EXPECT_NE(head.find(line), std::string::npos) << line << "\nin\n" << head;
  const std::string aux = m->aux_classifier->str();
  EXPECT_NE(aux.find("FCNHead(\n  (0): Conv2d(1024, 256, kernel_size=(3, 3)"), std::string::npos)
      << aux;
  EXPECT_EQ(m->type_name(), "DeepLabV3");
  EXPECT_EQ(model("fcn_resnet50")->type_name(), "FCN");
  EXPECT_EQ(model("pspnet_resnet50")->type_name(), "PSPNet");
}

TEST(SegModels, PspNetFollowsTheSpec) {
  auto m = model("pspnet_resnet50");
  auto ppm = m->classifier->at<models::seg::PyramidPooling>(0);
  ASSERT_EQ(ppm->stages->size(), 4u);
  const int64_t bins[] = {1, 2, 3, 6};
  for (size_t i = 0; i < 4; ++i) {
    auto stage = ppm->stages->at<nn::Sequential>(i);
    EXPECT_EQ(stage->at<nn::AdaptiveAvgPool2d>(0)->output_size, nn::Size2(bins[i]));
    auto conv = stage->at<nn::Conv2d>(1);
    EXPECT_EQ(conv->weight.shape(), (Shape{512, 2048, 1, 1}));
    EXPECT_FALSE(conv->bias.defined());
    stage->at<nn::BatchNorm2d>(2);
    stage->at<nn::ReLU>(3);
  }
  EXPECT_EQ(ppm->output_channels(), 4096);
  auto c1 = m->classifier->at<nn::Conv2d>(1);
  EXPECT_EQ(c1->weight.shape(), (Shape{512, 4096, 3, 3}));
  EXPECT_FALSE(c1->bias.defined());
  EXPECT_EQ(c1->options.padding, nn::Size2(1));
  EXPECT_DOUBLE_EQ(m->classifier->at<nn::Dropout2d>(4)->p, 0.1);
  EXPECT_TRUE(m->classifier->at<nn::Conv2d>(5)->bias.defined());
  // The auxiliary head: 3x3 conv 1024 -> 256 without bias, BN, ReLU, Dropout2d(0.1), 1x1 conv.
  EXPECT_EQ(m->aux_classifier->at<nn::Conv2d>(0)->weight.shape(), (Shape{256, 1024, 3, 3}));
  EXPECT_FALSE(m->aux_classifier->at<nn::Conv2d>(0)->bias.defined());
  EXPECT_DOUBLE_EQ(m->aux_classifier->at<nn::Dropout2d>(3)->p, 0.1);
  EXPECT_EQ(m->aux_classifier->at<nn::Conv2d>(4)->weight.shape(), (Shape{21, 256, 1, 1}));
  // torchvision's aux head drops elements, not channels.
  EXPECT_DOUBLE_EQ(model("fcn_resnet50")->aux_classifier->at<nn::Dropout>(3)->p, 0.1);
}

TEST(SegModels, PyramidPoolingIsInputThenUpsampledStages) {
  // PyramidPooling = cat(x, upsample(stage_k(x))) on a small input, every stage
  // computed by hand from its layers.
  manual_seed(5);
  models::seg::PyramidPooling ppm(8, {1, 2, 3}, 4);
  ppm.eval();
  const Tensor x = randn({2, 8, 7, 5});
  NoGradGuard ng;
  const Tensor y = ppm.forward(x);
  ASSERT_EQ(y.shape(), (Shape{2, 20, 7, 5}));
  testing::expect_close(y.narrow(1, 0, 8), x, 0, 0, "input first");
  for (int64_t k = 0; k < 3; ++k) {
    auto stage = ppm.stages->at<nn::Sequential>(static_cast<size_t>(k));
    Tensor s = ops::adaptive_avg_pool2d(x, {k + 1, k + 1});
    s = stage->at<nn::BatchNorm2d>(2)->forward(stage->at<nn::Conv2d>(1)->forward(s));
    s = ops::upsample(ops::relu(s), {7, 5}, {.mode = ops::InterpMode::bilinear});
    testing::expect_close(y.narrow(1, 8 + 4 * k, 4), s, 1e-6, 1e-5, "stage " + std::to_string(k));
  }
}

TEST(SegModels, BadOptions) {
  EXPECT_NE(testing::error_of([] {
              models::seg::pspnet_resnet50({.output_stride = 32});
            }).find("output_stride must be 8 or 16, got 32"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              models::seg::SegmentationModel(models::seg::SegHead::fcn, {.depth = 152});
            }).find("depth must be 18, 34, 50 or 101, got 152"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              models::seg::fcn_resnet50({.num_classes = 0});
            }).find("num_classes must be positive, got 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tcv
