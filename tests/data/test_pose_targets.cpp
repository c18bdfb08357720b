// OpenPose targets: equal to scripts/pose_targets_ref.py (TorchCV's formulas)
// on generated scenes, and closed-form cases (a peak on a cell centre, a
// straight limb, the background, the mask).
//
// tests/data/golden/pose_scenes.json holds three scenes of
// `tcv-data pose-scenes --train 3 --val 0 --width 128 --height 112
//  --crowd-p 0.5 --min-people 2 --seed 5` (trained people, people left out,
// crowds) and a hand-made fourth image whose two people's left upper arms
// cross (PAF vectors averaged); pose_targets.safetensors is the script's output.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "data/idx.h"
#include "data/pose/coco.h"
#include "data/pose/targets.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"

using namespace tcv;
using namespace tcv::data;

namespace {

PosePerson person_at(std::initializer_list<std::tuple<int, double, double>> kps) {
  PosePerson p;
  for (const auto& [k, x, y] : kps) p.keypoints[static_cast<size_t>(k)] = {x, y, 2};
  p.box = keypoint_box(p.keypoints);
  return p;
}

}  // namespace

TEST(PoseTargets, EqualTheReferenceScript) {
  const std::string dir = tcv::testing::source_dir() + "/tests/data/golden/";
  const CocoKeypointFile f =
      parse_coco_keypoints(read_maybe_gzip(dir + "pose_scenes.json"), "pose_scenes.json");
  const SafetensorsFile golden = load_safetensors(dir + "pose_targets.safetensors");
  std::map<std::string, Tensor> ref;
  for (const auto& [name, t] : golden.tensors) ref[name] = t;
  ASSERT_EQ(golden.metadata.at("stride"), "8");
  const PoseTargetOptions opts{.stride = 8, .sigma = 7.0, .limb_width = 1.0};
  ASSERT_EQ(f.images.size(), 4u);
  double max_diff = 0;
  int64_t people = 0, ignored = 0, crowds = 0, masked = 0, averaged = 0;
  for (const CocoImage& im : f.images) {
    std::vector<const CocoPersonAnnotation*> anns;
    for (const auto& a : f.annotations)
      if (a.image_id == im.id) anns.push_back(&a);
    const PoseRecord r = pose_record(im, anns, PoseSelection{});
    people += static_cast<int64_t>(r.people.size());
    ignored += static_cast<int64_t>(r.ignored.size());
    crowds += static_cast<int64_t>(r.crowds.size());
    const PoseTargets t = make_pose_targets(r.people, pose_loss_mask(r), im.height, im.width, opts);
    const std::string key = "img" + std::to_string(im.id);
    for (const auto& [what, got] : {std::pair{".heatmaps", t.heatmaps}, std::pair{".pafs", t.pafs},
                                    std::pair{".mask", t.mask}}) {
      const Tensor& want = ref.at(key + what);
      ASSERT_EQ(got.shape(), want.shape()) << key << what;
      const float* g = got.data<float>();
      const float* w = want.data<float>();
      for (int64_t k = 0; k < got.numel(); ++k) {
        const double d = std::fabs(static_cast<double>(g[k]) - static_cast<double>(w[k]));
        max_diff = std::max(max_diff, d);
        if (std::string(what) == ".mask") {
          EXPECT_EQ(g[k], w[k]) << key << " mask cell " << k;
          masked += g[k] == 0;
        } else {
          EXPECT_LE(d, 1e-5) << key << what << " element " << k << ": " << g[k] << " vs " << w[k];
        }
      }
    }
    const float* p = t.pafs.data<float>();
    const int64_t hw = t.pafs.size(1) * t.pafs.size(2);
    for (int64_t l = 0; l < kOpenposeLimbs; ++l)
      for (int64_t c = 0; c < hw; ++c) {
        const double n = std::hypot(p[2 * l * hw + c], p[(2 * l + 1) * hw + c]);
        averaged += n > 0.01 && n < 0.99;
      }
  }
  // The fixture exercises what it is meant to: a test over empty targets could not fail.
  EXPECT_GE(people, 5);
  EXPECT_GE(ignored, 1);
  EXPECT_GE(crowds, 1);
  EXPECT_GT(masked, 0);
  EXPECT_GT(averaged, 0);
  std::printf("[pose targets] max |tcv - reference| = %.3g over heatmaps, PAFs and masks\n",
              max_diff);
}

TEST(PoseTargets, PeakOnACellCentreAndBackground) {
  // Nose at the centre of cell (row 2, column 3) of a 64x48 input: (28, 20).
  const PosePerson p = person_at({{0, 28.0, 20.0}});
  const PoseTargets t = make_pose_targets({p}, Tensor(), 48, 64, {.stride = 8, .sigma = 7.0});
  ASSERT_EQ(t.heatmaps.shape(), (Shape{19, 6, 8}));
  const float* h = t.heatmaps.data<float>();
  EXPECT_FLOAT_EQ(h[2 * 8 + 3], 1.0f);
  EXPECT_NEAR(h[2 * 8 + 4], std::exp(-64.0 / 98.0), 1e-7);  // one cell (8 px) right
  EXPECT_EQ(h[5 * 8 + 3], 0.0f);  // 24 px away: exponent 5.9 > 4.6052, cut
  const float* bg = h + 18 * 48;
  EXPECT_FLOAT_EQ(bg[2 * 8 + 3], 0.0f);
  EXPECT_FLOAT_EQ(bg[0], 1.0f - h[0]);
  for (int64_t c = 1; c < 18; ++c)  // no other keypoint is labelled (the neck needs shoulders)
    for (int64_t k = 0; k < 48; ++k) EXPECT_EQ(h[c * 48 + k], 0.0f);
  const float* m = t.mask.data<float>();
  for (int64_t k = 0; k < 48; ++k) EXPECT_EQ(m[k], 1.0f);
}

TEST(PoseTargets, MaxOverPeopleAndTheNeck) {
  const PosePerson a = person_at({{0, 28.0, 20.0}, {5, 20.0, 36.0}, {6, 36.0, 36.0}});
  const PosePerson b = person_at({{0, 36.0, 20.0}});
  const PoseTargets t = make_pose_targets({a, b}, Tensor(), 48, 64, {});
  const float* h = t.heatmaps.data<float>();
  EXPECT_FLOAT_EQ(h[2 * 8 + 3], 1.0f);  // max, not a sum above 1
  EXPECT_FLOAT_EQ(h[2 * 8 + 4], 1.0f);
  // The neck (channel 1) peaks midway between the shoulders: (28, 36), cell (4, 3).
  EXPECT_FLOAT_EQ(h[48 + 4 * 8 + 3], 1.0f);
  const auto kp = openpose_keypoints(a);
  EXPECT_EQ(kp[1].v, 2);
  EXPECT_EQ(kp[2].x, 36.0);  // r_shoulder is COCO's right_shoulder
  EXPECT_EQ(kp[5].x, 20.0);
}

TEST(PoseTargets, StraightLimbIsAUnitVectorBand) {
  // Right shoulder (COCO 6) to right elbow (COCO 8): limb 0, along +x on row 2.
  const PosePerson p = person_at({{6, 12.0, 20.0}, {8, 52.0, 20.0}});
  const PoseTargets t = make_pose_targets({p}, Tensor(), 48, 64, {.limb_width = 1.0});
  const float* x = t.pafs.data<float>();
  const float* y = x + 48;
  // Cell units: a = (1, 2), b = (6, 2); columns [0, 7), rows with |i - 2| < 1: row 2 only.
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j) {
      const bool on = i == 2 && j < 7;
      EXPECT_EQ(x[i * 8 + j], on ? 1.0f : 0.0f) << i << "," << j;
      EXPECT_EQ(y[i * 8 + j], 0.0f);
    }
  for (int64_t c = 2; c < 38; ++c)
    for (int64_t k = 0; k < 48; ++k) EXPECT_EQ(t.pafs.data<float>()[c * 48 + k], 0.0f);
  // Twice the width covers the rows next to it too.
  const PoseTargets w = make_pose_targets({p}, Tensor(), 48, 64, {.limb_width = 2.0});
  EXPECT_EQ(w.pafs.data<float>()[1 * 8 + 3], 1.0f);
  EXPECT_EQ(w.pafs.data<float>()[3 * 8 + 3], 1.0f);
}

TEST(PoseTargets, MaskAtCellCentresAndBadOptions) {
  Tensor mask = ones({48, 64}, {.dtype = DType::u8});
  mask.data<uint8_t>()[20 * 64 + 28] = 0;  // the centre pixel of cell (2, 3)
  mask.data<uint8_t>()[21 * 64 + 29] = 0;  // not a centre: no effect
  const PoseTargets t = make_pose_targets({}, mask, 48, 64, {});
  for (int64_t k = 0; k < 48; ++k) EXPECT_EQ(t.mask.data<float>()[k], k == 2 * 8 + 3 ? 0.0f : 1.0f);
  for (int64_t k = 0; k < 48; ++k) EXPECT_EQ(t.heatmaps.data<float>()[18 * 48 + k], 1.0f);
  EXPECT_NE(tcv::testing::error_of([&] {
              make_pose_targets({}, Tensor(), 48, 64, {.sigma = 0});
            }).find("sigma"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              make_pose_targets({}, ones({40, 64}, {.dtype = DType::u8}), 48, 64, {});
            }).find("loss mask"),
            std::string::npos);
}
