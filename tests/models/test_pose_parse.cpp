// Multi-person parsing on maps built from known people: Gaussian heatmaps at
// the keypoints and unit-vector PAFs along the limbs (as the training targets
// are drawn); the parser must recover every person, keypoint for keypoint,
// and their COCO keypoint AP must be 1. Also: missing limbs, the COCO layout,
// the limb-score rules, multi-scale averaging with a real model, and the
// people a numpy port of TorchCV's parser finds on a noisy scene with merges
// and spurious peaks (tests/data/golden/pose_parse.json, written by
// scripts/make_golden_pose_parse.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "data/pose/skeleton.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "models/pose/parse.h"
#include "support/gradcheck.h"
#include "train/eval/keypoint_ap.h"

namespace tcv::models::pose {
namespace {

constexpr int64_t H = 120, W = 160;

// The parser follows the data pipeline's skeleton table.
const PoseSkeleton kSkeleton{data::kOpenposeKeypoints, data::openpose_limbs(),
                             data::openpose_limb_order(), data::coco_to_openpose()};
using data::coco_to_openpose;
using data::openpose_limbs;
using Person = std::vector<std::array<double, 2>>;  // 18 (x, y); x < 0 where absent

// A stick figure (OpenPose's keypoint order) centred at (cx, cy), scaled.
Person figure(double cx, double cy, double s) {
  const double t[18][2] = {{0, -30}, {0, -20}, {-8, -20}, {-12, -8}, {-14, 4},  {8, -20},
                           {12, -8}, {14, 4},  {-5, 5},   {-6, 20},  {-6, 35},  {5, 5},
                           {6, 20},  {6, 35},  {-3, -33}, {3, -33},  {-6, -31}, {6, -31}};
  Person p;
  for (const auto& k : t) p.push_back({std::round(cx + s * k[0]), std::round(cy + s * k[1])});
  return p;
}

// Heatmaps (19, H, W): a Gaussian (σ 3 px) per keypoint, the maximum over people,
// background last. PAFs (38, H, W): the limb's unit vector within 2 px of it,
// averaged over the people there.
PoseMaps draw(const std::vector<Person>& people) {
  std::vector<float> hm(19 * H * W, 0.f), paf(38 * H * W, 0.f), cnt(19 * H * W, 0.f);
  for (const Person& p : people) {
    for (int64_t k = 0; k < 18; ++k) {
      if (p[static_cast<size_t>(k)][0] < 0) continue;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const double dx = x - p[static_cast<size_t>(k)][0], dy = y - p[static_cast<size_t>(k)][1];
          float& v = hm[static_cast<size_t>((k * H + y) * W + x)];
          v = std::max(v, static_cast<float>(std::exp(-(dx * dx + dy * dy) / (2 * 9.0))));
        }
    }
    for (size_t l = 0; l < openpose_limbs().size(); ++l) {
      const auto& a = p[static_cast<size_t>(openpose_limbs()[l][0])];
      const auto& b = p[static_cast<size_t>(openpose_limbs()[l][1])];
      if (a[0] < 0 || b[0] < 0) continue;
      const double vx = b[0] - a[0], vy = b[1] - a[1], len = std::hypot(vx, vy);
      const double ux = vx / len, uy = vy / len;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const double px = x - a[0], py = y - a[1];
          const double along = px * ux + py * uy, across = std::abs(px * uy - py * ux);
          if (along < -1 || along > len + 1 || across > 2) continue;
          const size_t i = static_cast<size_t>(y * W + x);
          paf[2 * l * H * W + i] += static_cast<float>(ux);
          paf[(2 * l + 1) * H * W + i] += static_cast<float>(uy);
          cnt[l * H * W + i] += 1;
        }
    }
  }
  for (size_t l = 0; l < 19; ++l)
    for (size_t i = 0; i < static_cast<size_t>(H * W); ++i)
      if (cnt[l * H * W + i] > 1) {
        paf[2 * l * H * W + i] /= cnt[l * H * W + i];
        paf[(2 * l + 1) * H * W + i] /= cnt[l * H * W + i];
      }
  for (size_t i = 0; i < static_cast<size_t>(H * W); ++i) {
    float m = 0;
    for (size_t k = 0; k < 18; ++k) m = std::max(m, hm[k * H * W + i]);
    hm[18 * H * W + i] = 1 - m;
  }
  return {from_vector(hm, {19, H, W}), from_vector(paf, {38, H, W})};
}

// The parsed person nearest (by neck) to `want`; its keypoints must equal want's.
void expect_recovered(const std::vector<PersonPose>& got, const Person& want) {
  const PersonPose* best = nullptr;
  double dist = 1e9;
  for (const PersonPose& p : got)
    if (p.keypoints[1].found) {
      const double d = std::hypot(p.keypoints[1].x - want[1][0], p.keypoints[1].y - want[1][1]);
      if (d < dist) dist = d, best = &p;
    }
  ASSERT_NE(best, nullptr);
  int64_t present = 0;
  for (size_t k = 0; k < 18; ++k) {
    if (want[k][0] < 0) {
      EXPECT_FALSE(best->keypoints[k].found) << "keypoint " << k;
      continue;
    }
    ++present;
    ASSERT_TRUE(best->keypoints[k].found) << "keypoint " << k << " of the person at " << want[1][0];
    EXPECT_EQ(best->keypoints[k].x, want[k][0]) << "keypoint " << k;
    EXPECT_EQ(best->keypoints[k].y, want[k][1]) << "keypoint " << k;
    EXPECT_NEAR(best->keypoints[k].score, 1.0, 1e-6);
  }
  EXPECT_EQ(best->parts, present);
}

TEST(PoseParse, RecoversKnownPeople) {
  const std::vector<Person> people = {figure(30, 60, 1.0), figure(82, 58, 0.8),
                                      figure(130, 62, 1.2)};
  const PoseMaps maps = draw(people);
  const auto got = parse_poses(maps.heatmaps, maps.pafs, kSkeleton);
  ASSERT_EQ(got.size(), 3u);
  for (const Person& p : people) expect_recovered(got, p);
  // Score: the 18 peaks (1 each) and 17 limbs of the tree that joined them, each
  // below 1 (the PAF is the unit vector on the samples) and above 0.8.
  for (const PersonPose& p : got) {
    EXPECT_GT(p.score, 18 + 17 * 0.8);
    EXPECT_LE(p.score, 18 + 19 + 1e-9);
  }
}

TEST(PoseParse, PeopleWithMissingParts) {
  Person a = figure(40, 60, 1.0), b = figure(115, 60, 1.0);
  a[6] = a[7] = {-1, -1};    // no left elbow and wrist
  b[10] = b[13] = {-1, -1};  // no ankles
  const PoseMaps maps = draw({a, b});
  const auto got = parse_poses(maps.heatmaps, maps.pafs, kSkeleton);
  ASSERT_EQ(got.size(), 2u);
  expect_recovered(got, a);
  expect_recovered(got, b);
  // A person of two keypoints is dropped (min_parts 3) unless allowed.
  Person c(18, {-1, -1});
  c[0] = {50, 40};
  c[1] = {50, 50};
  const PoseMaps small = draw({c});
  EXPECT_TRUE(parse_poses(small.heatmaps, small.pafs, kSkeleton).empty());
  const auto two = parse_poses(small.heatmaps, small.pafs, kSkeleton, {.min_parts = 2});
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].parts, 2);
}

TEST(PoseParse, NoPafMeansNoLimb) {
  const PoseMaps maps = draw({figure(80, 60, 1.0)});
  // Without PAFs every keypoint is a peak but no limb joins two: nobody.
  EXPECT_TRUE(parse_poses(maps.heatmaps, zeros({38, H, W}), kSkeleton).empty());
  const auto peaks = find_peaks(maps.heatmaps.narrow(0, 0, 18), 3.0, 0.1);
  ASSERT_EQ(peaks.size(), 18u);
  int64_t id = 0;
  for (const auto& k : peaks) {
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0].id, id++);
  }
  // The PAF pointing the wrong way along every limb: the integral is negative.
  EXPECT_TRUE(parse_poses(maps.heatmaps, ops::neg(maps.pafs), kSkeleton).empty());
}

TEST(PoseParse, CocoLayoutAndKeypointApOfOne) {
  const std::vector<Person> people = {figure(30, 60, 1.0), figure(82, 58, 0.8),
                                      figure(130, 62, 1.2)};
  const PoseMaps maps = draw(people);
  const auto got = parse_poses(maps.heatmaps, maps.pafs, kSkeleton);
  train::KeypointEvaluator ev;
  std::vector<train::KeypointTruth> truth;
  for (const Person& p : people) {
    train::KeypointTruth t;
    for (const int64_t o : coco_to_openpose())
      t.keypoints.insert(t.keypoints.end(),
                         {p[static_cast<size_t>(o)][0] * 2, p[static_cast<size_t>(o)][1] * 2, 2});
    t.num_keypoints = 17;
    t.bbox = {p[4][0] * 2, p[14][1] * 2, (p[7][0] - p[4][0]) * 2, (p[13][1] - p[14][1]) * 2};
    t.area = t.bbox[2] * t.bbox[3];
    truth.push_back(t);
  }
  std::vector<train::KeypointDetection> dets;
  for (const PersonPose& p : got) {
    const auto kp = to_coco_keypoints(p, kSkeleton, 2.0);  // the maps at half the image's size
    ASSERT_EQ(kp.size(), 51u);
    EXPECT_EQ(kp[3], p.keypoints[15].x * 2);  // COCO's left eye is OpenPose's 15
    dets.push_back({.keypoints = kp, .score = p.score});
  }
  ev.add(1, truth, dets);
  const auto s = ev.coco().stats;
  EXPECT_DOUBLE_EQ(s[0], 1.0);
  EXPECT_DOUBLE_EQ(s[5], 1.0);
  PersonPose missing = got[0];
  missing.keypoints[15].found = false;
  EXPECT_EQ(to_coco_keypoints(missing, kSkeleton)[5], 0.0);
}

TEST(PoseParse, MultiScaleAveraging) {
  auto model = openpose_lite();
  Generator g(1);
  const Tensor image = uniform({1, 3, 44, 60}, -1.0, 1.0, {}, &g);
  const PoseMaps one = infer_maps(*model, image);
  EXPECT_EQ(one.heatmaps.shape(), (Shape{19, 44, 60}));
  EXPECT_EQ(one.pafs.shape(), (Shape{38, 44, 60}));
  EXPECT_TRUE(model->is_training());  // restored
  // Two passes at the image's own size average to one pass.
  const PoseMaps twice = infer_maps(*model, image, {.scales = {1.0, 1.0}, .base_height = 44});
  testing::expect_close(twice.heatmaps, one.heatmaps, 0, 0);
  testing::expect_close(twice.pafs, one.pafs, 0, 0);
  // Other scales still give image-sized maps, their mean.
  const PoseMaps half = infer_maps(*model, image, {.scales = {0.5}, .base_height = 44});
  const PoseMaps mixed = infer_maps(*model, image, {.scales = {0.5, 1.0}, .base_height = 44});
  EXPECT_EQ(mixed.heatmaps.shape(), (Shape{19, 44, 60}));
  testing::expect_close(mixed.heatmaps, ops::mul(ops::add(half.heatmaps, one.heatmaps), 0.5), 1e-6,
                        1e-5);
}

// The parser reads the maps in the layout the data pipeline draws its targets in.
TEST(PoseParse, LayoutIsTheTargets) {
  EXPECT_EQ(OpenPoseOptions{}.paf_channels, 2 * static_cast<int64_t>(kSkeleton.limbs.size()));
  EXPECT_EQ(OpenPoseOptions{}.heatmap_channels, kSkeleton.keypoints + 1);
  EXPECT_EQ(OpenPoseOptions{}.paf_channels, data::kOpenposePafs);
  EXPECT_EQ(OpenPoseOptions{}.heatmap_channels, data::kOpenposeHeatmaps);
}

// The limb order joins every limb once; a skeleton that names keypoints or limbs
// it lacks is refused.
TEST(PoseParse, SkeletonIsChecked) {
  std::vector<int> order(kSkeleton.limb_order.begin(), kSkeleton.limb_order.end());
  std::sort(order.begin(), order.end());
  for (size_t l = 0; l < order.size(); ++l) EXPECT_EQ(order[l], static_cast<int>(l));
  EXPECT_EQ(order.size(), kSkeleton.limbs.size());
  const PoseMaps maps = draw({figure(30, 60, 1.0)});
  EXPECT_NE(tcv::testing::error_of([&] {
              parse_poses(maps.heatmaps, maps.pafs, PoseSkeleton{});
            }).find("[parse_poses] the skeleton has 0 keypoints and 0 limbs"),
            std::string::npos);
  PoseSkeleton bad = kSkeleton;
  const std::array<int, 1> beyond{19};
  bad.limb_order = beyond;
  EXPECT_NE(tcv::testing::error_of([&] {
              parse_poses(maps.heatmaps, maps.pafs, bad);
            }).find("[parse_poses] skeleton limb_order names limb 19 of 19"),
            std::string::npos);
}

// ---- golden comparison with TorchCV's parser ----------------------------------------------

nlohmann::json golden() {
  const std::string path = testing::source_dir() + "/tests/data/golden/pose_parse.json";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// The maps of scripts/make_golden_pose_parse.py, operation for operation: f64
// values, the same 64-bit LCG noise, rounded to f32.
PoseMaps draw_golden(const nlohmann::json& g) {
  const int64_t h = g["size"][0], w = g["size"][1];
  const double sigma = g["sigma"], width = g["paf_width"], noise = g["noise"];
  std::vector<double> hm(static_cast<size_t>(19 * h * w), 0.0),
      paf(static_cast<size_t>(38 * h * w), 0.0), cnt(static_cast<size_t>(19 * h * w), 0.0);
  auto blob = [&](int64_t k, double bx, double by) {
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const double dx = static_cast<double>(x) - bx, dy = static_cast<double>(y) - by;
        const double v = std::exp(-(dx * dx + dy * dy) / (2 * sigma * sigma));
        double& m = hm[static_cast<size_t>((k * h + y) * w + x)];
        m = std::max(m, v);
      }
  };
  auto segment = [&](int64_t l, double ax, double ay, double bx, double by) {
    const double vx = bx - ax, vy = by - ay, n = std::sqrt(vx * vx + vy * vy);
    const double ux = vx / n, uy = vy / n;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const double px = static_cast<double>(x) - ax, py = static_cast<double>(y) - ay;
        const double along = px * ux + py * uy, across = std::abs(px * uy - py * ux);
        if (!(along >= -1 && along <= n + 1 && across <= width)) continue;
        const auto i = static_cast<size_t>(y * w + x);
        paf[static_cast<size_t>(2 * l * h * w) + i] += ux;
        paf[static_cast<size_t>((2 * l + 1) * h * w) + i] += uy;
        cnt[static_cast<size_t>(l * h * w) + i] += 1;
      }
  };
  for (const auto& p : g["people"]) {
    for (int64_t k = 0; k < 18; ++k)
      if (!p[static_cast<size_t>(k)].is_null())
        blob(k, p[static_cast<size_t>(k)][0], p[static_cast<size_t>(k)][1]);
    for (size_t l = 0; l < openpose_limbs().size(); ++l) {
      const auto& a = p[static_cast<size_t>(openpose_limbs()[l][0])];
      const auto& b = p[static_cast<size_t>(openpose_limbs()[l][1])];
      if (!a.is_null() && !b.is_null()) segment(static_cast<int64_t>(l), a[0], a[1], b[0], b[1]);
    }
  }
  for (const auto& b : g["blobs"]) blob(b[2], b[0], b[1]);
  for (const auto& s : g["stray"]) segment(s[4], s[0], s[1], s[2], s[3]);
  const auto hw = static_cast<size_t>(h * w);
  for (size_t l = 0; l < 19; ++l)
    for (size_t i = 0; i < hw; ++i)
      if (cnt[l * hw + i] > 1) {
        paf[2 * l * hw + i] /= cnt[l * hw + i];
        paf[(2 * l + 1) * hw + i] /= cnt[l * hw + i];
      }
  for (size_t i = 0; i < hw; ++i) {
    double m = hm[i];
    for (size_t k = 1; k < 18; ++k) m = std::max(m, hm[k * hw + i]);
    hm[18 * hw + i] = 1 - m;
  }
  uint64_t state = g["seed"].get<uint64_t>();
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1p-53 * 2 - 1;
  };
  std::vector<float> hm32(hm.size()), paf32(paf.size());
  for (size_t i = 0; i < hm.size(); ++i) hm32[i] = static_cast<float>(hm[i] + noise * uniform());
  for (size_t i = 0; i < paf.size(); ++i) paf32[i] = static_cast<float>(paf[i] + noise * uniform());
  return {from_vector(hm32, {19, h, w}), from_vector(paf32, {38, h, w})};
}

TEST(PoseParse, EqualsTorchCVsParser) {
  const nlohmann::json g = golden();
  const PoseMaps maps = draw_golden(g);
  const auto peaks = find_peaks(maps.heatmaps.narrow(0, 0, 18), 3.0, 0.1);
  for (size_t k = 0; k < 18; ++k)
    EXPECT_EQ(static_cast<int64_t>(peaks[k].size()), g["peaks"][k].get<int64_t>())
        << "keypoint " << k;
  const auto got = parse_poses(maps.heatmaps, maps.pafs, kSkeleton);
  const auto& want = g["parsed"];
  ASSERT_EQ(got.size(), want.size());
  int64_t merged = 0;
  for (size_t n = 0; n < got.size(); ++n) {
    EXPECT_EQ(got[n].parts, want[n]["parts"].get<int64_t>()) << "person " << n;
    // Sums of a few dozen values of order 1 in f64, in the reference's order up to
    // contraction into fused multiply-adds.
    EXPECT_NEAR(got[n].score, want[n]["score"].get<double>(), 1e-12) << "person " << n;
    for (size_t k = 0; k < 18; ++k) {
      const auto& wk = want[n]["keypoints"][k];
      ASSERT_EQ(got[n].keypoints[k].found, !wk.is_null()) << "person " << n << " keypoint " << k;
      if (wk.is_null()) continue;
      EXPECT_EQ(got[n].keypoints[k].x, wk[0].get<double>()) << "person " << n << " keypoint " << k;
      EXPECT_EQ(got[n].keypoints[k].y, wk[1].get<double>()) << "person " << n << " keypoint " << k;
      EXPECT_EQ(got[n].keypoints[k].score, wk[2].get<double>())
          << "person " << n << " keypoint " << k;
    }
    merged += got[n].parts == 17 && !got[n].keypoints[0].found;
  }
  EXPECT_EQ(merged, 1);  // the person without a nose: head and body joined by a merge
}

}  // namespace
}  // namespace tcv::models::pose
