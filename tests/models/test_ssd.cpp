// SSD300/SSD512 on VGG-16: parameter counts and state_dict keys against
// torchvision's ssd300_vgg16, feature map sizes, default boxes against
// torchvision's DefaultBoxGenerator, initialisation, the registry, the
// MultiBox loss's checks and the post-processing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/json.h"
#include "engine/ops.h"
#include "engine/serialize.h"
#include "layers/l2norm.h"
#include "models/det/multibox_loss.h"
#include "models/det/postprocess.h"
#include "models/det/ssd.h"
#include "models/registry.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using models::det::DetTarget;
using testing::error_of;

const SafetensorsFile& golden() {
  static const SafetensorsFile f =
      load_safetensors(testing::source_dir() + "/tests/data/golden/det_ssd.safetensors");
  return f;
}

Tensor golden_tensor(const std::string& name) {
  for (const auto& [n, t] : golden().tensors)
    if (n == name) return t;
  TCV_THROW("golden tensor \"", name, "\" missing");
}

// Built once: each holds 26M parameters.
std::shared_ptr<models::det::SSD>& ssd300() {
  static std::shared_ptr<models::det::SSD> m = models::det::ssd300_vgg16({.num_classes = 21});
  return m;
}
std::shared_ptr<models::det::SSD>& ssd512() {
  static std::shared_ptr<models::det::SSD> m = models::det::ssd512_vgg16({.num_classes = 21});
  return m;
}

int64_t count(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

TEST(Ssd, Ssd300MatchesTorchvisionStateDict) {
  auto& model = ssd300();
  EXPECT_EQ(count(*model), 26285486);
  EXPECT_EQ(std::to_string(count(*model)), golden().metadata.at("ssd300.parameters"));
  const Json keys = json_parse(golden().metadata.at("ssd300.state_dict"));
  const nn::StateDict sd = model->state_dict();
  ASSERT_EQ(sd.size(), keys.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(sd[i].first, keys[i][0].get<std::string>()) << "key " << i;
    Shape shape;
    for (const Json& d : keys[i][1]) shape.push_back(d.get<int64_t>());
    EXPECT_EQ(sd[i].second.shape(), shape) << sd[i].first;
  }
}

TEST(Ssd, Ssd512Structure) {
  auto& model = ssd512();
  // SSD300 plus conv12_2 (256·128 + 128 + 128·256·2·2 + 256), the seventh head pair
  // (4 boxes per location: 256·3·3·4·(4 + 21) + 4·(4 + 21)) and two more boxes per
  // location on the fifth map (ratios [2, 3]: 256·3·3·2·25 + 2·25); conv10_2 and
  // conv11_2 have SSD300's sizes.
  EXPECT_EQ(count(*model), 26285486 + (256 * 128 + 128 + 128 * 256 * 4 + 256) +
                               (256 * 9 * 4 * 25 + 4 * 25) + (256 * 9 * 2 * 25 + 2 * 25));
  EXPECT_EQ(count(*model), 26795460);
  const auto sizes = model->backbone->feature_sizes(512, 512);
  const std::vector<int64_t> want{64, 32, 16, 8, 4, 2, 1};
  ASSERT_EQ(sizes.size(), want.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_EQ(sizes[k][0], want[k]);
    EXPECT_EQ(sizes[k][1], want[k]);
  }
  EXPECT_EQ(model->default_boxes(512, 512).size(0), 24564);
}

TEST(Ssd, FeatureSizesOf300) {
  auto& model = ssd300();
  const auto sizes = model->backbone->feature_sizes(300, 300);
  const std::vector<int64_t> want{38, 19, 10, 5, 3, 1};
  ASSERT_EQ(sizes.size(), want.size());
  for (size_t k = 0; k < sizes.size(); ++k) EXPECT_EQ(sizes[k][0], want[k]);
}

// The default boxes equal torchvision's: both compute in f32 with the same operations.
void expect_boxes(const Tensor& ours, const std::string& key, int64_t stride, int64_t count) {
  EXPECT_EQ(ours.size(0), count);
  EXPECT_EQ(static_cast<int64_t>(golden_tensor(key.substr(0, 6) + ".num_anchors").item()), count);
  const Tensor want = golden_tensor(key);
  const Tensor got = ours.slice(0, 0, ours.size(0), stride).contiguous();
  ASSERT_EQ(got.shape(), want.shape());
  const auto g = got.to_vector<float>(), w = want.to_vector<float>();
  int64_t equal = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    // One f32 rounding of a value up to 512 pixels at most: 2^-24 · 512 · 2.
    EXPECT_NEAR(g[i], w[i], 6.2e-5) << key << " element " << i;
    equal += g[i] == w[i];
  }
  EXPECT_EQ(equal, static_cast<int64_t>(g.size())) << key << ": not bit-equal everywhere";
}

TEST(Ssd, DefaultBoxesEqualTorchvision) {
  expect_boxes(ssd300()->default_boxes(300, 300), "ssd300.anchors_every7", 7, 8732);
  expect_boxes(ssd512()->default_boxes(512, 512), "ssd512.anchors_every13", 13, 24564);
}

// TorchCV's SSD300 VOC prior boxes (AnchorLayout::torchcv with TorchCV's
// cur_anchor_sizes and ratios) equal, bit for bit, a numpy transcription of
// TorchCV's SSDPriorBoxLayer (scripts/make_golden_torchcv_priors.py), corners
// made as its target generator makes them. Beside torchvision's layout (steps
// 8, 16, 32, 64, 100, 300; sides clipped) the centres move by up to 19 px
// (the 5 x 5 map: stride 60 against 64).
TEST(Ssd, TorchcvPriorBoxesEqualTorchcvsLayer) {
  const SafetensorsFile golden = load_safetensors(
      testing::source_dir() + "/tests/data/golden/ssd300_torchcv_priors.safetensors");
  const Tensor* want = nullptr;
  for (const auto& [name, t] : golden.tensors)
    if (name == "corners") want = &t;
  ASSERT_NE(want, nullptr);
  models::det::AnchorOptions o = models::det::ssd300_anchor_options();
  o.layout = models::det::AnchorLayout::torchcv;
  o.sizes_px = {30, 60, 111, 162, 213, 264, 315};
  o.clip = models::det::AnchorClip::none;
  auto net = models::det::ssd300_vgg16({.anchors = o, .init_weights = false});
  const Tensor got = net->default_boxes(300, 300);
  ASSERT_EQ(got.shape(), want->shape());
  const auto g = got.to_vector<float>(), w = want->to_vector<float>();
  int64_t differ = 0;
  for (size_t i = 0; i < g.size(); ++i) differ += std::memcmp(&g[i], &w[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0) << "of " << g.size() << " coordinates";

  const auto tv = models::det::ssd300_vgg16({.init_weights = false})->default_boxes(300, 300);
  const auto t = tv.to_vector<float>();
  double centre = 0;
  for (size_t i = 0; i < g.size(); i += 4)
    centre = std::max(centre, std::abs((double(g[i]) + g[i + 2]) - (double(t[i]) + t[i + 2])) / 2);
  EXPECT_GT(centre, 1.0);
  std::printf(
      "[ torchcv priors ] 8732 boxes bit-equal to TorchCV's layer; centres up to %.2f px "
      "from torchvision's\n",
      centre);
}

// A model in f64 makes its default boxes in f64: centres and sides rounded to
// f32 as torchvision holds them, the corners computed in f64 (torchvision's
// generator does that arithmetic in the feature maps' dtype), so they differ
// from the f32 boxes by the f32 rounding of the corners only.
TEST(Ssd, DefaultBoxesFollowTheModelsDtype) {
  auto net = models::det::ssd300_vgg16({.init_weights = false});
  const Tensor b32 = net->default_boxes(300, 300);
  net->to(DType::f64);
  const Tensor b64 = net->default_boxes(300, 300);
  ASSERT_EQ(b64.dtype(), DType::f64);
  const auto x = b32.to_vector<double>(), y = b64.to_vector<double>();
  double most = 0;
  int64_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    most = std::max(most, std::abs(x[i] - y[i]));
    differ += x[i] != y[i];
  }
  // Two f32 roundings (the difference, the product by 300) of values below
  // 2^9 px: at most 2 * 2^9 * 2^-24.
  EXPECT_LE(most, 0x1p-14);
  EXPECT_GT(differ, 0);
  // (cx - w / 2) * 300 in f64 from the f32 centre and side, for box 0.
  const double cx = static_cast<float>(0.5f / static_cast<float>(300.0 / 8.0));
  const double w = static_cast<float>(0.07);
  EXPECT_EQ(y[0], (cx - 0.5 * w) * 300.0);
}

TEST(Ssd, AnchorOptionsAreConfigurable) {
  models::det::AnchorOptions o = models::det::ssd300_anchor_options();
  o.scales.clear();  // torchvision's min_ratio/max_ratio spacing
  const auto s = models::det::anchor_scales(o);
  ASSERT_EQ(s.size(), 7u);
  EXPECT_DOUBLE_EQ(s[0], 0.15);
  EXPECT_DOUBLE_EQ(s[5], 0.9);
  EXPECT_DOUBLE_EQ(s[6], 1.0);
  o.steps.clear();
  o.clip = models::det::AnchorClip::none;
  EXPECT_NE(error_of([&] {
              models::det::default_boxes(o, {{2, 2}, {1, 1}}, {100, 100});
            }).find("aspect_ratio_list"),
            std::string::npos);
  o.aspect_ratios = {{2}};
  const Tensor one = models::det::default_boxes(o, {{2, 2}}, {100, 100});
  ASSERT_EQ(one.shape(), (Shape{16, 4}));
  // Centre of cell (0, 0) at 25 px; first box square of side 0.15 · 100.
  const auto v = one.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 25.0f - 7.5f);
  EXPECT_FLOAT_EQ(v[2], 25.0f + 7.5f);
  // Ratio 2: width 0.15·√2, height 0.15/√2.
  EXPECT_NEAR(v[10] - v[8], 15.0 * std::sqrt(2.0), 1e-4);
  EXPECT_NEAR(v[11] - v[9], 15.0 / std::sqrt(2.0), 1e-4);
}

TEST(Ssd, InitialisedAsTorchvision) {
  manual_seed(3);
  auto model = models::det::ssd300_vgg16();
  std::map<std::string, Tensor> p;
  for (auto& [n, t] : model->named_parameters()) p[n] = t;
  EXPECT_EQ(p["backbone.scale_weight"].to_vector<float>(), std::vector<float>(512, 20.0f));
  auto std_of = [](const Tensor& t) {
    const auto v = t.to_vector<double>();
    double ss = 0;
    for (double e : v) ss += e * e;
    return std::sqrt(ss / static_cast<double>(v.size()));
  };
  auto max_abs = [](const Tensor& t) { return ops::max(ops::abs(t)).item(); };
  // VGG convolutions: kaiming_normal_(fan_out, relu): std √(2 / (out · 9)).
  EXPECT_NEAR(std_of(p["backbone.features.21.weight"]), std::sqrt(2.0 / (512 * 9)), 2e-4);
  EXPECT_NEAR(std_of(p["backbone.extra.0.5.weight"]), std::sqrt(2.0 / (512 * 9)), 2e-4);
  // conv6, extras and heads: xavier_uniform_, bound √(6 / (fan_in + fan_out)).
  const double b6 = std::sqrt(6.0 / (512 * 9 + 1024 * 9));
  EXPECT_LE(max_abs(p["backbone.extra.0.7.1.weight"]), b6 * (1 + 1e-6));
  EXPECT_NEAR(std_of(p["backbone.extra.0.7.1.weight"]), b6 / std::sqrt(3.0), 2e-4);
  const double bh = std::sqrt(6.0 / (512 * 9 + 84 * 9));
  EXPECT_LE(max_abs(p["head.classification_head.module_list.0.weight"]), bh * (1 + 1e-6));
  EXPECT_GT(max_abs(p["head.classification_head.module_list.0.weight"]), 0.9 * bh);
  for (const auto& [n, t] : p)
    if (n.size() > 5 && n.substr(n.size() - 5) == ".bias") {
      EXPECT_EQ(ops::max(ops::abs(t)).item(), 0.0) << n;
    }
}

TEST(Ssd, RegistryListsBoth) {
  models::register_builtin_models();
  const auto names = models::model_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "ssd300"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "ssd512"), names.end());
  auto m = models::create_model("ssd300", {.num_classes = 2, .in_channels = 3});
  EXPECT_EQ(count(*m),
            26285486 - 19 * 3 * 3 * (512 * 4 + 1024 * 6 + 512 * 6 + 256 * 6 + 256 * 4 + 256 * 4) -
                19 * (4 + 6 + 6 + 6 + 4 + 4));
  EXPECT_NE(dynamic_cast<models::det::SSD*>(m.get()), nullptr);
  EXPECT_EQ(models::model_parameter_count("ssd512"), 26795460);
}

TEST(Ssd, ForwardShapes) {
  auto model = models::det::ssd300_vgg16({.num_classes = 5});
  model->eval();
  NoGradGuard ng;
  const Tensor x = randn({1, 3, 300, 300});
  const auto out = model->forward_heads(x);
  EXPECT_EQ(out.loc.shape(), (Shape{1, 8732, 4}));
  EXPECT_EQ(out.conf.shape(), (Shape{1, 8732, 5}));
  EXPECT_EQ(model->forward(x).shape(), (Shape{1, 8732, 9}));
  EXPECT_NE(error_of([&] {
              model->forward_heads(randn({1, 3, 64, 64}));
            }).find("too small"),
            std::string::npos);
}

TEST(L2NormLayer, ScaledNormalisation) {
  nn::L2Norm layer(3, 20.0);
  EXPECT_EQ(layer.named_parameters()[0].first, "weight");
  const Tensor x = from_vector<float>({3, 0, 4, 0, 0, 0}, {1, 3, 2, 1});
  const auto y = layer.forward(x).to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 20.0f * 0.6f);  // position 0: (3, 4, 0) / 5
  EXPECT_FLOAT_EQ(y[2], 20.0f * 0.8f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);  // position 1, the zero vector, stays zero
  testing::check_gradients(
      "l2_norm", [](const std::vector<Tensor>& v) { return nn::l2_norm(v[0], v[1]); },
      {testing::rand_f64({2, 3, 2, 2}, 4, 0.2, 1.0), testing::rand_f64({3}, 5, 1.0, 2.0)});
}

// ------------------------------------------------------------------ loss checks

TEST(MultiBoxLoss, RejectsBadTargets) {
  const Tensor anchors = from_vector<float>({0, 0, 10, 10, 5, 5, 20, 20}, {2, 4});
  const Tensor loc = zeros({1, 2, 4}), conf = zeros({1, 2, 3});
  auto target = [](std::vector<float> b, std::vector<int64_t> l) {
    return DetTarget{from_vector<float>(b, {static_cast<int64_t>(l.size()), 4}),
                     from_vector<int64_t>(l)};
  };
  EXPECT_NE(error_of([&] {
              models::det::multibox_loss(loc, conf, anchors, {target({0, 0, 5, 5}, {3})});
            }).find("label 3 is outside the object classes 1..2"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::det::multibox_loss(loc, conf, anchors, {target({4, 0, 4, 5}, {1})});
            }).find("image 0, box 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::det::multibox_loss(loc, conf, anchors, {});
            }).find("0 targets for a batch of 1"),
            std::string::npos);
}

TEST(MultiBoxLoss, SmallCaseByHand) {
  // One image, two anchors, one box equal to anchor 0: anchor 0 is positive with zero
  // codes, anchor 1 (IoU 25/300) negative; with 3 negatives per positive it is mined,
  // and so is the positive itself, ranked after it (torchvision's compute_loss counts
  // a positive again when the ratio exceeds the negatives an image has).
  const Tensor anchors = from_vector<double>({0, 0, 10, 10, 5, 5, 20, 20}, {2, 4});
  const Tensor loc = from_vector<double>({0.5, 0, 0, -2, 0, 0, 0, 0}, {1, 2, 4});
  const Tensor conf = from_vector<double>({0, 1, 0, 2, 0, 0}, {1, 2, 3});
  const DetTarget t{from_vector<double>({0, 0, 10, 10}, {1, 4}), from_vector<int64_t>({1})};
  const auto l = models::det::multibox_loss(loc, conf, anchors, {t});
  EXPECT_EQ(l.num_matched, 1);
  // smooth-L1: 0.5·0.5² + (2 − 0.5) = 1.625.
  EXPECT_NEAR(l.bbox_regression.item(), 1.625, 1e-12);
  const double lse0 = std::log(1 + std::exp(1.0) + 1), lse1 = std::log(std::exp(2.0) + 2);
  EXPECT_NEAR(l.classification.item(), 2.0 * (lse0 - 1.0) + (lse1 - 2.0), 1e-12);
  // No boxes at all: nothing positive, no negatives mined, both losses 0.
  const DetTarget none{zeros({0, 4}, {.dtype = DType::f64}), zeros({0}, {.dtype = DType::i64})};
  const auto z = models::det::multibox_loss(loc, conf, anchors, {none});
  EXPECT_EQ(z.num_matched, 0);
  EXPECT_EQ(z.total().item(), 0.0);
}

// ------------------------------------------------------------------ post-processing

TEST(Postprocess, ThresholdTopKNmsAndClipping) {
  // Four anchors; zero codes decode to the anchors themselves.
  const Tensor anchors =
      from_vector<float>({0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60, -5, 90, 8, 110}, {4, 4});
  const Tensor loc = zeros({1, 4, 4});
  // Logits over (background, a, b): anchors 0 and 1 say class a, 2 and 3 class b.
  // Scores above 0.01: a for anchors 0 (0.987), 1 (0.965) and 3 (0.045); b for 1
  // (0.018), 2 (0.995) and 3 (0.909).
  const Tensor conf = from_vector<float>({0, 5, 0, 0, 4, 0, 0, 0, 6, 0, 0, 3}, {1, 4, 3});
  const auto d = models::det::postprocess_detections(loc, conf, anchors, {100, 100});
  ASSERT_EQ(d.size(), 1u);
  // Class a: anchor 1 overlaps anchor 0 (IoU 0.68) and goes.
  const auto labels = d[0].labels.to_vector<int64_t>();
  const auto scores = d[0].scores.to_vector<float>();
  EXPECT_EQ(labels, (std::vector<int64_t>{2, 1, 2, 1, 2}));
  for (size_t i = 1; i < scores.size(); ++i) EXPECT_GE(scores[i - 1], scores[i]);
  const auto boxes = d[0].boxes.to_vector<float>();
  EXPECT_EQ(std::vector<float>(boxes.begin(), boxes.begin() + 4),
            (std::vector<float>{50, 50, 60, 60}));
  // Anchor 3 is clipped to the image.
  bool clipped = false;
  for (size_t i = 0; i < labels.size(); ++i)
    if (boxes[4 * i] == 0.0f && boxes[4 * i + 1] == 90.0f && boxes[4 * i + 3] == 100.0f)
      clipped = true;
  EXPECT_TRUE(clipped);
  // A high threshold keeps the confident ones; max_detections cuts the list.
  const auto hi =
      models::det::postprocess_detections(loc, conf, anchors, {100, 100}, {.score_threshold = 0.9});
  EXPECT_EQ(hi[0].labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2}));
  const auto one =
      models::det::postprocess_detections(loc, conf, anchors, {100, 100}, {.max_detections = 1});
  EXPECT_EQ(one[0].labels.numel(), 1);
  const auto loose = models::det::postprocess_detections(
      loc, conf, anchors, {100, 100}, {.score_threshold = 0.9, .nms_threshold = 0.7});
  EXPECT_EQ(loose[0].labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 1, 2}));
}

// TorchCV's selection: pre_nms counts (box, class) pairs over the image, not
// per class; cls_keep_num caps each class after NMS.
TEST(Postprocess, TopKPerImageAndKeepPerClass) {
  const Tensor anchors =
      from_vector<float>({0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60, -5, 90, 8, 110}, {4, 4});
  const Tensor loc = zeros({1, 4, 4});
  const Tensor conf = from_vector<float>({0, 5, 0, 0, 4, 0, 0, 0, 6, 0, 0, 3}, {1, 4, 3});
  using models::det::TopKScope;
  // The 3 best pairs: b@2 (0.995), a@0 (0.987), a@1 (0.965); a@1 goes in NMS.
  const auto img = models::det::postprocess_detections(
      loc, conf, anchors, {100, 100}, {.top_k = 3, .top_k_scope = TopKScope::per_image});
  EXPECT_EQ(img[0].labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  // Per class, 3 each: all five survivors of NMS, as without a cap.
  const auto cls =
      models::det::postprocess_detections(loc, conf, anchors, {100, 100}, {.top_k = 3});
  EXPECT_EQ(cls[0].labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 1, 2}));
  // At most one per class after NMS: the best of each.
  const auto capped =
      models::det::postprocess_detections(loc, conf, anchors, {100, 100}, {.keep_per_class = 1});
  EXPECT_EQ(capped[0].labels.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  const auto cb = capped[0].boxes.to_vector<float>();
  EXPECT_EQ(std::vector<float>(cb.begin(), cb.begin() + 4), (std::vector<float>{50, 50, 60, 60}));
}

}  // namespace
}  // namespace tcv
