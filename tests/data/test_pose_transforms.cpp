// Pose transforms: the flip mirrors and swaps left and right; the warp, the
// resize and the whole training pipeline keep keypoints on the image content
// they were on and the loss mask on its region.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/pose/targets.h"
#include "data/pose/transforms.h"
#include "support/gradcheck.h"

using namespace tcv;
using namespace tcv::data;

namespace {

// A black W x H image with a white 7x7 square around each labelled keypoint of
// one person, a red 10x10 block at (2, 2) where the mask is 0.
PoseSample marked_sample(int64_t W, int64_t H, const std::vector<std::array<double, 2>>& at) {
  PoseSample s;
  s.image = zeros({3, H, W}, {.dtype = DType::u8});
  s.mask = ones({H, W}, {.dtype = DType::u8});
  uint8_t* p = s.image.data<uint8_t>();
  uint8_t* m = s.mask.data<uint8_t>();
  PosePerson person;
  for (size_t k = 0; k < at.size(); ++k) {
    person.keypoints[k] = {at[k][0], at[k][1], 2};
    const auto cx = static_cast<int64_t>(at[k][0]), cy = static_cast<int64_t>(at[k][1]);
    for (int64_t y = cy - 3; y <= cy + 3; ++y)
      for (int64_t x = cx - 3; x <= cx + 3; ++x)
        for (int64_t c = 0; c < 3; ++c) p[(c * H + y) * W + x] = 255;
  }
  for (int64_t y = 2; y < 12; ++y)
    for (int64_t x = 2; x < 12; ++x) {
      p[y * W + x] = 255;
      m[y * W + x] = 0;
    }
  person.box = keypoint_box(person.keypoints);
  s.people.push_back(person);
  return s;
}

uint8_t pixel(const Tensor& img, int64_t c, double x, double y) {
  const int64_t H = img.size(1), W = img.size(2);
  return img.data<uint8_t>()[(c * H + static_cast<int64_t>(y)) * W + static_cast<int64_t>(x)];
}

// Every labelled keypoint sits on white; every masked pixel on red.
void expect_consistent(const PoseSample& s, const std::string& what) {
  for (const PosePerson& p : s.people)
    for (size_t k = 0; k < p.keypoints.size(); ++k) {
      const Keypoint& q = p.keypoints[k];
      if (!q.labelled()) continue;
      ASSERT_GE(q.x, 0) << what;
      ASSERT_LT(q.x, static_cast<double>(s.image.size(2))) << what;
      EXPECT_GE(pixel(s.image, 1, q.x, q.y), 200)
          << what << ": keypoint " << k << " at (" << q.x << ", " << q.y << ") is off its square";
    }
  const int64_t H = s.image.size(1), W = s.image.size(2);
  const uint8_t* m = s.mask.data<uint8_t>();
  const uint8_t* r = s.image.data<uint8_t>();
  for (int64_t k = 0; k < H * W; ++k) {
    if (m[k]) continue;
    // A pixel centre inside the block keeps at least a quarter of its red (a corner).
    EXPECT_GE(r[k], 60) << what << ": masked pixel " << k << " is not on the red block";
    EXPECT_LE(r[H * W + k], 60) << what;
  }
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::equal(x.data<uint8_t>(), x.data<uint8_t>() + x.numel(), y.data<uint8_t>());
}

const std::vector<std::array<double, 2>> kSpots{{20.5, 20.5}, {40.5, 22.5}, {30.5, 40.5},
                                                {50.5, 50.5}, {22.5, 55.5}, {44.5, 36.5}};

}  // namespace

TEST(PoseTransforms, FlipMirrorsAndSwapsLeftAndRight) {
  PoseSample s = marked_sample(64, 64, kSpots);
  PosePerson& p = s.people[0];
  p.keypoints[6] = {10.25, 8.0, 1};  // right_shoulder
  p.keypoints[16] = {};              // right_ankle unlabelled
  const PoseSample before = s;
  pose_hflip(s);
  const auto& k = s.people[0].keypoints;
  EXPECT_EQ(k[5].x, 64 - 10.25);  // the old right shoulder is the new left one
  EXPECT_EQ(k[5].v, 1);
  EXPECT_EQ(k[6].x, 64 - before.people[0].keypoints[5].x);
  EXPECT_EQ(k[0].x, 64 - 20.5);  // the nose has no partner
  EXPECT_EQ(k[2].x, 64 - 40.5);  // right_eye <- left_eye
  EXPECT_EQ(k[1].x, 64 - 30.5);
  EXPECT_FALSE(k[15].labelled());  // left_ankle <- the unlabelled right_ankle
  EXPECT_EQ(k[15].x, 0.0);
  EXPECT_EQ(pixel(s.image, 0, 63 - 5, 5), 255);  // the red block moved right
  EXPECT_EQ(s.mask.data<uint8_t>()[5 * 64 + 63 - 5], 0);
  EXPECT_EQ(s.people[0].box[0], 64 - before.people[0].box[2]);
  pose_hflip(s);
  for (size_t q = 0; q < 17; ++q) {
    EXPECT_EQ(s.people[0].keypoints[q].x, before.people[0].keypoints[q].x) << q;
    EXPECT_EQ(s.people[0].keypoints[q].v, before.people[0].keypoints[q].v) << q;
  }
  EXPECT_TRUE(same(s.image, before.image));
}

TEST(PoseTransforms, WarpMovesKeypointsAndDropsThoseOutside) {
  PoseSample s = marked_sample(64, 64, kSpots);
  // Shift by (-15, +4): the keypoint at x 20.5 stays, none leaves on the left yet...
  pose_warp(s, {1, 0, -15, 0, 1, 4}, 64, 64, {0, 0, 0});
  EXPECT_EQ(s.people[0].keypoints[0].x, 5.5);
  EXPECT_EQ(s.people[0].keypoints[0].y, 24.5);
  expect_consistent(s, "shift");
  // ... a further shift pushes it (and the one at 22.5) out: they become unlabelled.
  pose_warp(s, {1, 0, -10, 0, 1, 0}, 64, 64, {0, 0, 0});
  EXPECT_FALSE(s.people[0].keypoints[0].labelled());
  EXPECT_FALSE(s.people[0].keypoints[4].labelled());
  EXPECT_TRUE(s.people[0].keypoints[1].labelled());
  EXPECT_EQ(s.people[0].keypoints[0].x, 0.0);
  // Outside the input the image is the fill and the mask 1.
  PoseSample t = marked_sample(64, 64, kSpots);
  pose_warp(t, {1, 0, 30, 0, 1, 30}, 64, 64, {7, 8, 9});
  EXPECT_EQ(pixel(t.image, 2, 5, 5), 9);
  EXPECT_EQ(t.mask.data<uint8_t>()[5 * 64 + 5], 1);
  EXPECT_NE(tcv::testing::error_of([&] {
              pose_warp(t, {0, 0, 0, 0, 0, 0}, 8, 8, {});
            }).find("singular"),
            std::string::npos);
}

TEST(PoseTransforms, RotationAndScaleKeepKeypointsOnTheirContent) {
  for (const double deg : {-40.0, -13.0, 25.0, 90.0}) {
    PoseSample s = marked_sample(64, 64, kSpots);
    const double a = deg * 3.14159265358979 / 180, sc = 1.3;
    const double c = std::cos(a) * sc, n = std::sin(a) * sc;
    // Rotate about the image centre (32, 32) and scale onto a 96 x 80 canvas.
    pose_warp(s, {c, n, 48 - c * 32 - n * 32, -n, c, 40 + n * 32 - c * 32}, 80, 96, {0, 0, 0});
    expect_consistent(s, "rotation " + std::to_string(deg));
  }
}

TEST(PoseTransforms, TrainPipelineKeepsKeypointsConsistent) {
  PoseAugmentOptions o;
  o.size = 64;
  o.rotate_p = 1.0;
  const PoseTransform t = pose_train_transform(o);
  int64_t flipped_or_kept = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    PoseSample s = marked_sample(96, 80, kSpots);
    Rng rng(seed, 0);
    t(s, rng);
    ASSERT_EQ(s.image.shape(), (Shape{3, 64, 64}));
    ASSERT_EQ(s.mask.shape(), (Shape{64, 64}));
    expect_consistent(s, "seed " + std::to_string(seed));
    flipped_or_kept += s.people[0].num_labelled();
  }
  EXPECT_GT(flipped_or_kept, 24 * 3);  // the crop centres on the person: most stay
  // The same stream gives the same sample.
  PoseSample a = marked_sample(96, 80, kSpots), b = marked_sample(96, 80, kSpots);
  Rng ra(5, 1), rb(5, 1);
  t(a, ra);
  t(b, rb);
  EXPECT_TRUE(same(a.image, b.image));
  EXPECT_EQ(a.people[0].keypoints[3].x, b.people[0].keypoints[3].x);
}

TEST(PoseTransforms, FocusScaleAndCentre) {
  // One 40-pixel-tall person; focus 0.6 of a 100 crop: scale 1.5 (scale_range [1, 1]).
  PoseAugmentOptions o{.size = 100,
                       .focus = 0.6,
                       .scale_range = {1, 1},
                       .aspect_range = {1, 1},
                       .rotate_p = 0,
                       .centre_jitter = 0};
  PosePerson p;
  p.box = {10, 20, 30, 60};
  Rng rng(0, 0);
  const Affine m = pose_train_affine({p}, 80, 80, o, rng);
  EXPECT_NEAR(m[0], 1.5, 1e-12);
  EXPECT_NEAR(m[4], 1.5, 1e-12);
  EXPECT_NEAR(m[0] * 20 + m[2], 50, 1e-9);  // the box centre (20, 40) lands on the crop centre
  EXPECT_NEAR(m[4] * 40 + m[5], 50, 1e-9);
}

TEST(PoseTransforms, EvalResizeScalesKeypointsAndMask) {
  PoseSample s = marked_sample(96, 80, kSpots);
  pose_eval_transform(48)(s, *std::make_unique<Rng>(0, 0));
  ASSERT_EQ(s.image.shape(), (Shape{3, 48, 48}));
  EXPECT_DOUBLE_EQ(s.people[0].keypoints[0].x, 20.5 * 0.5);
  EXPECT_DOUBLE_EQ(s.people[0].keypoints[0].y, 20.5 * 0.6);
  EXPECT_EQ(s.mask.data<uint8_t>()[3 * 48 + 3], 0);
  EXPECT_EQ(s.mask.data<uint8_t>()[20 * 48 + 20], 1);
}

// The neck is set from the shoulders when a sample is loaded and moves with
// the sample (TorchCV derives it before the augmentations): a crop that drops
// one shoulder keeps the neck that stays inside. Derived after the crop (a
// person whose neck was never set), it would be lost with the shoulder.
TEST(PoseTransforms, NeckSetBeforeTheAugmentationsSurvivesACropOfOneShoulder) {
  PoseSample s = marked_sample(64, 64, {});
  PosePerson& p = s.people[0];
  p.keypoints[5] = {10.5, 30.5, 2};  // left shoulder
  p.keypoints[6] = {50.5, 30.5, 1};  // right shoulder, labelled but not visible
  p.neck = shoulder_midpoint(p.keypoints);
  EXPECT_EQ(p.neck.x, 30.5);
  EXPECT_EQ(p.neck.v, 1);  // visible only when both shoulders are
  PoseSample legacy = s;
  legacy.people[0].neck = {};
  for (PoseSample* t : {&s, &legacy}) pose_warp(*t, {1, 0, -15, 0, 1, 0}, 64, 64, {0, 0, 0});
  EXPECT_FALSE(s.people[0].keypoints[5].labelled());  // x = -4.5: outside
  const auto kps = openpose_keypoints(s.people[0]);
  EXPECT_TRUE(kps[kOpenposeNeck].labelled());
  EXPECT_EQ(kps[kOpenposeNeck].x, 15.5);
  EXPECT_EQ(kps[kOpenposeNeck].y, 30.5);
  EXPECT_FALSE(openpose_keypoints(legacy.people[0])[kOpenposeNeck].labelled());
  // A flip mirrors the neck in place; a resize scales it.
  pose_hflip(s);
  EXPECT_EQ(s.people[0].neck.x, 64 - 15.5);
  pose_resize(s, 32, 32);
  EXPECT_EQ(s.people[0].neck.x, (64 - 15.5) / 2);
  EXPECT_EQ(s.people[0].neck.y, 30.5 / 2);
}
