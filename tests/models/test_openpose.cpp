// OpenPose: parameter counts (computed layer by layer from TorchCV's spec),
// the state_dict names (torchvision's VGG-19 for the backbone, TorchCV's for
// the stages), the output shapes of every stage, the registry, and the masked
// L2 loss on a hand-computed case and its gradient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "models/pose/openpose.h"
#include "models/registry.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using models::pose::OpenPose;
using models::pose::OpenPoseOptions;
using models::pose::PoseOutput;
using testing::error_of;
using testing::lit;

int64_t count(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

// Built once: it holds 52M parameters.
std::shared_ptr<OpenPose>& full_model() {
  static std::shared_ptr<OpenPose> m = models::pose::openpose_vgg19();
  return m;
}

int64_t conv(int64_t in, int64_t out, int64_t k) {
  return in * out * k * k + out;
}

TEST(OpenPose, ParameterCountFollowsTheSpec) {
  auto& model = full_model();
  // VGG-19 conv1_1 .. conv4_2.
  const int64_t vgg = conv(3, 64, 3) + conv(64, 64, 3) + conv(64, 128, 3) + conv(128, 128, 3) +
                      conv(128, 256, 3) + 3 * conv(256, 256, 3) + conv(256, 512, 3) +
                      conv(512, 512, 3);
  EXPECT_EQ(vgg, 5865536);
  const int64_t cpm = conv(512, 256, 3) + conv(256, 128, 3);
  const int64_t stage1 =
      2 * (3 * conv(128, 128, 3) + conv(128, 512, 1)) + conv(512, 38, 1) + conv(512, 19, 1);
  const int64_t refine = 2 * (conv(185, 128, 7) + 4 * conv(128, 128, 7) + conv(128, 128, 1)) +
                         conv(128, 38, 1) + conv(128, 19, 1);
  EXPECT_EQ(count(*model), vgg + cpm + stage1 + 5 * refine);
  EXPECT_EQ(count(*model), 52311446);
}

TEST(OpenPose, NamesAreTorchvisionsAndTorchCVs) {
  auto& model = full_model();
  const nn::StateDict sd = model->state_dict();
  std::vector<std::string> names;
  for (const auto& [n, t] : sd) names.push_back(n);
  // torchvision's vgg19().features indices of the ten convolutions.
  const int conv_idx[] = {0, 2, 5, 7, 10, 12, 14, 16, 19, 21};
  for (int i : conv_idx) {
    const std::string w = "features." + std::to_string(i) + ".weight";
    EXPECT_NE(std::find(names.begin(), names.end(), w), names.end()) << w;
  }
  EXPECT_EQ(names.front(), "features.0.weight");
  EXPECT_EQ(model->features->size(), 23u);  // up to relu4_2 (index 22)
  const Shape want{38, 128, 1, 1};
  bool found = false;
  for (const auto& [n, t] : sd)
    if (n == "model6_1.12.weight") {
      EXPECT_EQ(t.shape(), want);
      found = true;
    }
  EXPECT_TRUE(found) << "model6_1.12.weight missing";
  EXPECT_EQ(names.back(), "model6_2.12.bias");
  // model0 (CPM), 6 stages of two branches, the backbone's 10 convolutions: weight and bias each.
  EXPECT_EQ(sd.size(), 2u * (10 + 2 + 2 * 5 + 5 * 2 * 7));
}

TEST(OpenPose, EveryStageHasBothOutputsAtStride8) {
  auto model = models::pose::openpose_lite();
  EXPECT_EQ(count(*model), 1901179);
  model->eval();
  NoGradGuard ng;
  const Tensor x = randn({2, 3, 48, 40});
  const PoseOutput out = model->forward_stages(x);
  ASSERT_EQ(out.pafs.size(), 3u);
  ASSERT_EQ(out.heatmaps.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(out.pafs[s].shape(), (Shape{2, 38, 6, 5}));
    EXPECT_EQ(out.heatmaps[s].shape(), (Shape{2, 19, 6, 5}));
  }
  const Tensor last = model->forward(x);
  EXPECT_EQ(last.shape(), (Shape{2, 57, 6, 5}));
  testing::expect_close(last.narrow(1, 0, 38), out.pafs[2], 0, 0);
  testing::expect_close(last.narrow(1, 38, 19), out.heatmaps[2], 0, 0);
}

TEST(OpenPose, FullModelShapes) {
  auto& model = full_model();
  model->eval();
  NoGradGuard ng;
  const PoseOutput out = model->forward_stages(randn({1, 3, 64, 48}));
  ASSERT_EQ(out.pafs.size(), 6u);
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_EQ(out.pafs[s].shape(), (Shape{1, 38, 8, 6}));
    EXPECT_EQ(out.heatmaps[s].shape(), (Shape{1, 19, 8, 6}));
  }
}

TEST(OpenPose, Registered) {
  models::register_builtin_models();
  const auto names = models::model_names();
  for (const char* n : {"openpose", "openpose_lite"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_EQ(models::model_parameter_count("openpose"), 52311446);
  EXPECT_EQ(models::model_parameter_count("openpose_lite"), 1901179);
  auto m = models::create_model("openpose_lite", {.num_classes = 10, .in_channels = 1});
  EXPECT_EQ(m->type_name(), "OpenPose");
  EXPECT_EQ(count(*m), 1901179 - 2 * 16 * 9);  // conv1_1 reads one channel, not three
  EXPECT_NE(error_of([] { OpenPose({.width_divisor = 3}); }).find("width_divisor"),
            std::string::npos);
}

// Two stages, batch 2, one channel per branch, 1x2 maps; the mask zeroes one pixel.
TEST(OpenPose, LossIsTorchCVsMaskedSumOverStages) {
  const Tensor mask = lit({1, 0, 1, 1}, {2, 1, 1, 2}, DType::f64);
  const Tensor paf_t = lit({0.5, 9, -1, 2}, {2, 1, 1, 2}, DType::f64);
  const Tensor heat_t = lit({1, 1, 0, 0}, {2, 1, 1, 2}, DType::f64);
  PoseOutput out;
  out.pafs = {lit({1, 5, 0, 2}, {2, 1, 1, 2}), lit({0.5, -3, -2, 1}, {2, 1, 1, 2})};
  out.heatmaps = {lit({0, 7, 1, 0.5}, {2, 1, 1, 2}), lit({1, 0, 0, 0}, {2, 1, 1, 2})};
  // Stage 1: paf (0.5² + 0 + 1² + 0) / 2 = 0.625; heatmap (1 + 0 + 1 + 0.25) / 2 = 1.125.
  // Stage 2: paf (0 + 0 + 1 + 1) / 2 = 1;          heatmap 0.
  const auto t = models::pose::openpose_loss(out, paf_t, heat_t, mask);
  EXPECT_DOUBLE_EQ(t.paf.item(), 1.625);
  EXPECT_DOUBLE_EQ(t.heatmap.item(), 1.125);
  EXPECT_DOUBLE_EQ(t.total.item(), 2.75);
  const auto w = models::pose::openpose_loss(out, paf_t, heat_t, mask,
                                             {.paf_weights = {1, 2}, .heatmap_weights = {0.5, 1}});
  EXPECT_DOUBLE_EQ(w.total.item(), 0.625 + 0.5 * 1.125 + 2 * 1);
  EXPECT_NE(error_of([&] {
              models::pose::openpose_loss(out, paf_t, heat_t, mask, {.paf_weights = {1}});
            }).find("paf_weights"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::pose::openpose_loss(out, heat_t.narrow(0, 0, 1), heat_t, mask);
            }).find("paf_target"),
            std::string::npos);
}

TEST(OpenPose, LossGradient) {
  const Tensor mask = lit({1, 0, 1, 1, 0, 1}, {2, 1, 1, 3}, DType::f64);
  const Tensor pt = testing::rand_f64({2, 2, 1, 3}, 7, -1, 1, false);
  const Tensor ht = testing::rand_f64({2, 1, 1, 3}, 8, 0, 1, false);
  testing::check_gradients(
      "openpose_loss",
      [&](const std::vector<Tensor>& in) {
        PoseOutput o{.pafs = {in[0], in[1]}, .heatmaps = {in[2], in[3]}};
        return models::pose::openpose_loss(o, pt, ht, mask, {.paf_weights = {1, 0.5}}).total;
      },
      {testing::rand_f64({2, 2, 1, 3}, 1), testing::rand_f64({2, 2, 1, 3}, 2),
       testing::rand_f64({2, 1, 1, 3}, 3), testing::rand_f64({2, 1, 1, 3}, 4)});
}

}  // namespace
}  // namespace tcv
