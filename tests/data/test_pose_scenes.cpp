// Generated pose scenes: deterministic per (seed, index), keypoints that lie on
// their figures, visibility and faces as documented, files that read back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/idx.h"
#include "data/image.h"
#include "data/pose/scenes.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST(PoseScenes, DeterministicAndConsistent) {
  PoseSceneOptions o;
  o.width = 160;
  o.height = 128;
  o.crowd_p = 0.5;
  int64_t people = 0, visible = 0, hidden = 0, backs = 0, crowds = 0;
  for (uint64_t i = 0; i < 12; ++i) {
    Rng r1(9, i), r2(9, i);
    const PoseScene a = render_pose_scene(o, r1), b = render_pose_scene(o, r2);
    ASSERT_EQ(a.image.shape(), (Shape{3, 128, 160}));
    ASSERT_EQ(a.people.size(), b.people.size());
    EXPECT_TRUE(std::equal(a.image.data<uint8_t>(), a.image.data<uint8_t>() + a.image.numel(),
                           b.image.data<uint8_t>()));
    for (size_t k = 0; k < a.people.size(); ++k) {
      const CocoPersonAnnotation& p = a.people[k];
      EXPECT_EQ(p.keypoints[3].x, b.people[k].keypoints[3].x);
      if (p.iscrowd) {
        ++crowds;
        EXPECT_EQ(p.num_keypoints, 0);
        continue;
      }
      ++people;
      EXPECT_EQ(p.num_keypoints,
                p.keypoints.size() - static_cast<size_t>(std::count_if(
                                         p.keypoints.begin(), p.keypoints.end(),
                                         [](const Keypoint& q) { return !q.labelled(); })));
      // Its segmentation is its visible pixels: every visible keypoint lies on one.
      std::vector<uint8_t> seg(128 * 160, 0);
      paint_segmentation(p.segmentation, seg.data(), 128, 160, 1, "figure");
      int64_t count = 0;
      for (uint8_t v : seg) count += v;
      EXPECT_EQ(static_cast<double>(count), p.area);
      for (const Keypoint& q : p.keypoints) {
        if (!q.labelled()) continue;
        EXPECT_TRUE(q.x >= 0 && q.x < 160 && q.y >= 0 && q.y < 128);
        const uint8_t on =
            seg[static_cast<size_t>(static_cast<int64_t>(q.y) * 160 + static_cast<int64_t>(q.x))];
        EXPECT_EQ(on, q.v == 2 ? 1 : 0);
        (q.v == 2 ? visible : hidden) += 1;
      }
      // Seen from behind: no nose or eyes, ears labelled unless outside or hidden.
      backs += !p.keypoints[0].labelled() && !p.keypoints[1].labelled() &&
               !p.keypoints[2].labelled() &&
               (p.keypoints[3].labelled() || p.keypoints[4].labelled());
    }
  }
  EXPECT_GT(people, 12);
  EXPECT_GT(visible, 10 * hidden);
  EXPECT_GT(hidden, 0);
  EXPECT_GT(backs, 0);
  EXPECT_GT(crowds, 0);
}

TEST(PoseScenes, WritesKeypointFilesThatReadBack) {
  tcv::testing::TempDir tmp("pose_scenes");
  PoseSceneSetOptions o;
  o.scene.width = o.scene.height = 96;
  o.train = 5;
  o.val = 3;
  const PoseSceneSetSummary s = write_pose_scene_set(o, tmp.path("a"));
  EXPECT_EQ(s.images, 8);
  write_pose_scene_set(o, tmp.path("b"));
  for (const char* f : {"annotations/person_keypoints_train.json",
                        "annotations/person_keypoints_val.json", "images/000007.jpg"})
    EXPECT_EQ(slurp(tmp.path("a/") + f), slurp(tmp.path("b/") + f)) << f;
  const CocoKeypointFile train = parse_coco_keypoints(
      read_maybe_gzip(tmp.path("a/annotations/person_keypoints_train.json")), "train");
  const CocoKeypointFile val = parse_coco_keypoints(
      read_maybe_gzip(tmp.path("a/annotations/person_keypoints_val.json")), "val");
  EXPECT_EQ(train.images.size(), 5u);
  ASSERT_EQ(val.images.size(), 3u);
  EXPECT_EQ(val.images[0].id, 6);
  EXPECT_EQ(val.images[0].file_name, "000006.jpg");
  int64_t people = 0;
  for (const auto* f : {&train, &val})
    for (const auto& a : f->annotations) people += !a.iscrowd;
  EXPECT_EQ(people, s.people);
  const PoseDataset ds =
      read_coco_keypoints({.annotation_file = tmp.path("a/annotations/person_keypoints_val.json"),
                           .image_dir = tmp.path("a/images")});
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.load(2).image.shape(), (Shape{3, 96, 96}));
  EXPECT_NE(tcv::testing::error_of([&] {
              PoseSceneSetOptions bad = o;
              bad.scene.min_people = 5;
              bad.scene.max_people = 2;
              write_pose_scene_set(bad, tmp.path("c"));
            }).find("min_people"),
            std::string::npos);
}
