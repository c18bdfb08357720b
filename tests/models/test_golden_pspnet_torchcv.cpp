// pspnet_deepbase_resnet50/101 against the PyTorch transcription of TorchCV's
// PSPNet (model/seg/nets/pspnet.py and lib/model/base/deepbase_resnet.py at
// 5cb5203) in scripts/make_golden_pspnet_torchcv.py:
//  - state_dict keys, shapes and order, and parameter counts of both models at 19
//    classes (tests/data/golden/seg_pspnet_torchcv_keys.json, --keys);
//  - pspnet_deepbase_resnet50 in f64 on the closed-form weights and input of
//    scripts/make_golden_cls.py: eval and training outputs (out and dsn), the
//    three losses (TorchCV's dsnce_loss with its Cityscapes class weights, through
//    tcv's seg_loss), running statistics after the step's forward and sampled
//    gradients, all within 1e-9 relative (tests/data/golden/seg_pspnet_torchcv.safetensors,
//    stored in f64).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "models/registry.h"
#include "models/seg/heads.h"
#include "models/seg/loss.h"
#include "models/seg/segmentation.h"
#include "support/golden_model.h"
#include "support/golden_seg.h"
#include "support/gradcheck.h"
#include "support/run_files.h"

namespace tcv {
namespace {

using models::seg::SegmentationModel;
using testing::golden_sample;

const std::string kFile = "/tests/data/golden/seg_pspnet_torchcv.safetensors";
const std::string kKeys = "/tests/data/golden/seg_pspnet_torchcv_keys.json";
const std::string kPrefix = "pspnet_deepbase_resnet50.";

// Both sides compute in f64 on the same f32 closed-form values and the file holds
// f64: the runs differ only by f64 rounding (summation orders) amplified by the
// network's conditioning.
constexpr double kTol = 1e-9;

// base_fcn_cityscapes_seg.conf: loss.params.ce_loss.weight, loss_weights.dsnce_loss.
const std::vector<double> kClassWeights = {0.8373, 0.9180, 0.8660, 1.0345, 1.0166, 0.9969, 0.9754,
                                           1.0489, 0.8786, 1.0023, 0.9539, 0.9843, 1.1116, 0.9037,
                                           1.0865, 1.0955, 1.0865, 1.1529, 1.0507};

const Json& key_reference() {
  static const Json j = testing::read_json(testing::source_dir() + kKeys);
  return j;
}

std::shared_ptr<SegmentationModel> make(const std::string& name) {
  models::register_builtin_models();
  manual_seed(0);
  auto m = std::dynamic_pointer_cast<SegmentationModel>(
      models::create_model(name, {.num_classes = 19, .in_channels = 3}));
  TCV_CHECK(m != nullptr, name, " is not a SegmentationModel");
  return m;
}

void expect_keys_and_count(const std::string& name) {
  auto m = make(name);
  const Json& ref = key_reference().at("models").at(name);
  EXPECT_EQ(m->num_parameters(), ref.at("parameters").get<int64_t>()) << name;
  std::vector<std::pair<std::string, Shape>> want, got;
  for (const Json& e : ref.at("state_dict")) {
    Shape s;
    for (const Json& d : e[1]) s.push_back(d.get<int64_t>());
    want.emplace_back(e[0].get<std::string>(), s);
  }
  for (const auto& [k, t] : m->state_dict()) got.emplace_back(k, t.shape());
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << name << " entry " << i << " (" << want[i].first << ")";
    if (got[i] != want[i]) break;
  }
  std::printf("%s: %lld parameters (transcription %lld), %zu state_dict entries\n", name.c_str(),
              static_cast<long long>(m->num_parameters()),
              static_cast<long long>(ref.at("parameters").get<int64_t>()), got.size());
}

TEST(GoldenPSPNetTorchCV, ResNet50KeysShapesAndCountEqualTranscription) {
  expect_keys_and_count("pspnet_deepbase_resnet50");
}

TEST(GoldenPSPNetTorchCV, ResNet101KeysShapesAndCountEqualTranscription) {
  expect_keys_and_count("pspnet_deepbase_resnet101");
  EXPECT_EQ(models::model_parameter_count("pspnet_deepbase_resnet101"),
            models::model_parameter_count("pspnet_deepbase_resnet50") +
                (70436838 - 51444710));  // 17 more layer3 blocks, counted at 21 classes
}

TEST(GoldenPSPNetTorchCV, StructureAsTorchCV) {
  auto m = make("pspnet_deepbase_resnet50");
  EXPECT_EQ(m->backbone, nullptr);
  EXPECT_EQ(m->classifier, nullptr);
  EXPECT_EQ(m->type_name(), "PSPNet");
  // The deep stem: three 3x3 convolutions, the first with stride 2.
  EXPECT_EQ(m->stage1->at<nn::Conv2d>(0)->options.stride, nn::Size2(2));
  EXPECT_EQ(m->stage1->at<nn::Conv2d>(6)->weight.shape(), (Shape{128, 64, 3, 3}));
  // Dilation as torchvision's replace_stride_with_dilation [False, True, True].
  auto l3 = m->stage1->at<nn::Sequential>(12);
  EXPECT_EQ(l3->at<models::cls::Bottleneck>(0)->conv2->options.dilation, nn::Size2(1));
  EXPECT_EQ(l3->at<models::cls::Bottleneck>(0)->conv2->options.stride, nn::Size2(1));
  EXPECT_EQ(l3->at<models::cls::Bottleneck>(1)->conv2->options.dilation, nn::Size2(2));
  EXPECT_EQ(m->stage2->at<models::cls::Bottleneck>(0)->conv2->options.dilation, nn::Size2(2));
  EXPECT_EQ(m->stage2->at<models::cls::Bottleneck>(2)->conv2->options.dilation, nn::Size2(4));
  NoGradGuard no_grad;
  m->eval();
  const auto o = m->forward_seg(randn({1, 3, 33, 41}));
  EXPECT_EQ(o.out.shape(), (Shape{1, 19, 33, 41}));
  EXPECT_EQ(o.aux.shape(), (Shape{1, 19, 33, 41}));
}

TEST(GoldenPSPNetTorchCV, ResNet50InF64MatchesTranscription) {
  auto model = models::seg::pspnet_deepbase_resnet50({.num_classes = 19});
  // TorchCV's two Dropout2d at p = 0 in the script: deterministic outputs.
  for (auto& [name, m] : model->named_modules())
    if (auto* d = dynamic_cast<nn::Dropout2d*>(m)) d->p = 0.0;
  testing::set_golden_weights(*model);
  Tensor x = testing::golden_input({2, 3, 63, 54});
  const Tensor target = testing::golden_seg_target(2, 63, 54, 19);
  testing::SegGolden c(kFile, kPrefix, kTol);
  c.expect_inputs(x, target);
  model->to(DType::f64);
  x = x.to(DType::f64);
  c.expect_eval(*model, x);

  model->train();
  const models::seg::SegOutput o = model->forward_seg(x);
  const models::seg::SegLossTerms loss =
      models::seg::seg_loss(o, target,
                            {.seg_weight = 1.0,
                             .aux_weight = 0.4,
                             .class_weight = from_vector<double>(kClassWeights, {19})});
  c.expect_train(o, loss.main, loss.aux, loss.total);
  EXPECT_EQ(c.expect_stats(*model), 8);
  loss.total.backward();
  EXPECT_EQ(c.expect_grads(*model), 25);
  std::printf(
      "pspnet_deepbase_resnet50 in f64 vs the TorchCV transcription: largest relative error "
      "%.3g in outputs, losses and statistics, %.3g in gradients (tolerance %.3g)\n",
      c.worst_output(), c.worst_grad(), kTol);
}

TEST(GoldenPSPNetTorchCV, FileIsSmallAndF64) {
  EXPECT_LT(std::filesystem::file_size(testing::source_dir() + kFile), 256u * 1024u);
  const testing::SegGolden g(kFile, kPrefix, kTol);
  EXPECT_EQ(g.tensors().size(), 67u);
  EXPECT_EQ(g.tensors().at(kPrefix + "train.loss").dtype(), DType::f64);
}

}  // namespace
}  // namespace tcv
