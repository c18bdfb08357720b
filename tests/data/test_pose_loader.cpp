// PoseDataLoader over generated scenes: shapes, targets that match the batch's
// keypoints, the same batches on any number of workers, sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/pose/loader.h"
#include "data/pose/scenes.h"
#include "data/pose/transforms.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;

namespace {

std::shared_ptr<const PoseDataset> scene_set(const tcv::testing::TempDir& tmp, int64_t n) {
  PoseSceneSetOptions o;
  o.scene.width = 96;
  o.scene.height = 80;
  o.train = n;
  o.val = 0;
  o.seed = 3;
  write_pose_scene_set(o, tmp.path("scenes"));
  PoseCocoOptions c{.annotation_file = tmp.path("scenes/annotations/person_keypoints_train.json"),
                    .image_dir = tmp.path("scenes/images")};
  c.selection.min_area = 200;
  return std::make_shared<const PoseDataset>(read_coco_keypoints(c));
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::equal(x.data<float>(), x.data<float>() + x.numel(), y.data<float>());
}

}  // namespace

TEST(PoseLoader, BatchesWithTargetsThatMatchTheKeypoints) {
  tcv::testing::TempDir tmp("pose_loader");
  const auto ds = scene_set(tmp, 8);
  ASSERT_EQ(ds->size(), 8);
  PoseAugmentOptions aug;
  aug.size = 64;
  PoseDataLoader loader(ds, pose_train_transform(aug), {.sigma = 4.0},
                        {.batch_size = 3, .shuffle = true, .workers = 2, .seed = 11});
  EXPECT_EQ(loader.num_batches(), 3);
  loader.start_epoch(0);
  PoseBatch b;
  int64_t images = 0, checked = 0;
  while (loader.next(b)) {
    const int64_t B = b.size();
    images += B;
    ASSERT_EQ(b.images.shape(), (Shape{B, 3, 64, 64}));
    ASSERT_EQ(b.heatmaps.shape(), (Shape{B, 19, 8, 8}));
    ASSERT_EQ(b.pafs.shape(), (Shape{B, 38, 8, 8}));
    ASSERT_EQ(b.masks.shape(), (Shape{B, 1, 8, 8}));
    for (int64_t i = 0; i < B; ++i) {
      const Tensor& kp = b.keypoints[static_cast<size_t>(i)];
      const float* h = b.heatmaps.data<float>() + i * 19 * 64;
      for (int64_t p = 0; p < kp.size(0); ++p)
        for (int64_t k = 0; k < 17; ++k) {
          const float* e = kp.data<float>() + (p * 17 + k) * 3;
          if (e[2] == 0) continue;
          // The keypoint's cell: at most 4 sqrt(2) pixels from its centre.
          const auto j = static_cast<int64_t>(e[0] / 8), r = static_cast<int64_t>(e[1] / 8);
          const int64_t c = coco_to_openpose()[static_cast<size_t>(k)];
          EXPECT_GE(h[c * 64 + r * 8 + j], std::exp(-32.0 / 32.0) - 1e-6);
          EXPECT_LE(h[18 * 64 + r * 8 + j], 1 - std::exp(-32.0 / 32.0) + 1e-6);
          ++checked;
        }
      for (int64_t c = 0; c < 64; ++c) {
        const float m = b.masks.data<float>()[i * 64 + c];
        EXPECT_TRUE(m == 0.0f || m == 1.0f);
      }
    }
  }
  EXPECT_EQ(images, 8);
  EXPECT_GT(checked, 20);
}

TEST(PoseLoader, SameBatchesOnAnyNumberOfWorkersAndShards) {
  tcv::testing::TempDir tmp("pose_loader");
  const auto ds = scene_set(tmp, 6);
  PoseAugmentOptions aug;
  aug.size = 48;
  auto batches = [&](int workers, int64_t world, int64_t rank) {
    PoseDataLoader l(
        ds, pose_train_transform(aug), {},
        {.batch_size = 2, .workers = workers, .seed = 5, .world_size = world, .rank = rank});
    l.start_epoch(1);
    std::vector<PoseBatch> out;
    PoseBatch b;
    while (l.next(b)) out.push_back(b);
    return out;
  };
  const auto a = batches(0, 1, 0), c = batches(2, 1, 0);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(c.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].indices, c[k].indices);
    EXPECT_TRUE(same(a[k].images, c[k].images));
    EXPECT_TRUE(same(a[k].heatmaps, c[k].heatmaps));
    EXPECT_TRUE(same(a[k].pafs, c[k].pafs));
    EXPECT_TRUE(same(a[k].masks, c[k].masks));
  }
  // Two ranks see disjoint halves.
  std::vector<int64_t> seen;
  for (int64_t r = 0; r < 2; ++r)
    for (const PoseBatch& b : batches(1, 2, r))
      seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

// A transform's error ("[pose_warp] the map is singular" in issue 25) names the
// image and annotation file it was working on.
TEST(PoseLoader, TransformErrorsNameTheSample) {
  tcv::testing::TempDir tmp("pose_loader_err");
  const auto ds = scene_set(tmp, 2);
  const Affine singular{0, 0, 0, 0, 0, 0};
  PoseDataLoader loader(ds,
                        [&](PoseSample& s, Rng&) {
                          pose_warp(s, singular, 64, 64, {0, 0, 0});
                        },
                        {.sigma = 4.0}, {.batch_size = 1, .shuffle = false});
  loader.start_epoch(0);
  PoseBatch b;
  std::string msg;
  try {
    loader.next(b);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(ds->record(0).source + ": [pose_warp] the map is singular"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("person_keypoints_train.json (image id"), std::string::npos) << msg;
}
