// Keypoint AP: OKS and AP on hand-computed cases, the golden comparison with
// pycocotools' COCOeval in 'keypoints' mode (tests/data/golden/keypoint_ap.json,
// data and numbers written by scripts/make_golden_keypoint_ap.py), and the
// combine across ranks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "dist/fake_group.h"
#include "support/gradcheck.h"
#include "train/eval/keypoint_ap.h"

namespace tcv::train {
namespace {

constexpr int K = 17;

// A person whose keypoint k sits at (x + k, y + 2k), all labelled and visible.
KeypointTruth person(double x, double y, double area) {
  KeypointTruth t;
  for (int k = 0; k < K; ++k) t.keypoints.insert(t.keypoints.end(), {x + k, y + 2 * k, 2});
  t.num_keypoints = K;
  t.bbox = {x, y, K, 2 * K};
  t.area = area;
  return t;
}

KeypointDetection detection(const KeypointTruth& t, double score, double dx = 0) {
  KeypointDetection d{.keypoints = t.keypoints, .score = score};
  for (int k = 0; k < K; ++k) {
    d.keypoints[3 * k] += dx;
    d.keypoints[3 * k + 2] = 1;
  }
  return d;
}

TEST(KeypointAp, CocoSigmas) {
  const auto& s = coco_keypoint_sigmas();
  ASSERT_EQ(s.size(), 17u);
  EXPECT_DOUBLE_EQ(s[0], 0.026);   // nose
  EXPECT_DOUBLE_EQ(s[11], 0.107);  // left hip
  EXPECT_DOUBLE_EQ(s[16], 0.089);  // right ankle
}

TEST(KeypointAp, OksByHand) {
  KeypointEvaluator ev;
  // Only the nose (σ = 0.026) and the left hip (σ = 0.107) labelled; area 100.
  KeypointTruth g;
  g.keypoints.assign(3 * K, 0);
  g.keypoints[0] = 10, g.keypoints[1] = 10, g.keypoints[2] = 2;
  g.keypoints[33] = 20, g.keypoints[34] = 30, g.keypoints[35] = 1;
  g.num_keypoints = 2, g.bbox = {10, 10, 10, 20}, g.area = 100;
  KeypointDetection d{.keypoints = std::vector<double>(3 * K, 0), .score = 1};
  d.keypoints[0] = 11, d.keypoints[1] = 10;    // 1 pixel off
  d.keypoints[33] = 20, d.keypoints[34] = 28;  // 2 pixels off
  const double eps = std::numeric_limits<double>::epsilon();
  const double e0 = 1.0 / (4 * 0.026 * 0.026) / (100 + eps) / 2;
  const double e11 = 4.0 / (4 * 0.107 * 0.107) / (100 + eps) / 2;
  const auto o = ev.oks({g}, {d});
  ASSERT_EQ(o.size(), 1u);
  EXPECT_NEAR(o[0], (std::exp(-e0) + std::exp(-e11)) / 2, 1e-15);
  EXPECT_NEAR(o[0], (0.157377 + 0.646153) / 2, 1e-6);  // e^-1.8491, e^-0.43672

  // No labelled keypoint: distance to twice the box [0, 30] x [-10, 50], over all 17.
  KeypointTruth z = g;
  for (int k = 0; k < K; ++k) z.keypoints[3 * k + 2] = 0;
  z.bbox = {10, 10, 10, 20};
  KeypointDetection inside{.keypoints = std::vector<double>(3 * K, 5), .score = 1};
  EXPECT_DOUBLE_EQ(ev.oks({z}, {inside})[0], 1.0);
  KeypointDetection out = inside;
  out.keypoints[0] = 33;  // 3 pixels right of the box, the nose
  EXPECT_NEAR(ev.oks({z}, {out})[0],
              (16 + std::exp(-9.0 / (4 * 0.026 * 0.026) / (100 + eps) / 2)) / 17, 1e-15);
}

// Image 1: one person found exactly (score 0.9); image 2: one person missed and a
// false positive (0.8). At every OKS threshold the ranked list is TP, FP: recall
// 0.5, precision 1 up to recall 0.5 (51 of the 101 recall points), then 0.
TEST(KeypointAp, ApByHand) {
  KeypointEvaluator ev;
  const KeypointTruth a = person(100, 100, 5000), b = person(300, 100, 5000);
  ev.add(1, {a}, {detection(a, 0.9)});
  ev.add(2, {b}, {detection(b, 0.8, 200)});
  ev.add(1, {}, {});  // a repeated image id is ignored
  EXPECT_EQ(ev.images(), 2);
  const auto s = ev.coco().stats;
  EXPECT_DOUBLE_EQ(s[0], 51.0 / 101.0);  // AP
  EXPECT_DOUBLE_EQ(s[1], 51.0 / 101.0);  // AP50
  EXPECT_DOUBLE_EQ(s[2], 51.0 / 101.0);  // AP75
  EXPECT_DOUBLE_EQ(s[3], 51.0 / 101.0);  // medium: area 5000 in [32², 96²]
  EXPECT_DOUBLE_EQ(s[4], -1.0);          // large: no ground truth
  EXPECT_DOUBLE_EQ(s[5], 0.5);
  EXPECT_DOUBLE_EQ(s[8], 0.5);
  EXPECT_DOUBLE_EQ(s[9], -1.0);
  const Metrics m = ev.finish();
  EXPECT_EQ(m.front().first, "ap");
  EXPECT_DOUBLE_EQ(metric(m, "ar"), 0.5);

  // A crowd or a person without keypoints is ignored: matching it costs nothing.
  KeypointEvaluator ign;
  KeypointTruth crowd = b;
  crowd.crowd = true;
  ign.add(1, {a, crowd}, {detection(a, 0.9), detection(crowd, 0.95)});
  EXPECT_DOUBLE_EQ(ign.coco().stats[0], 1.0);
}

// Issue 25, item 2 (the audit): a detection whose keypoints hold NaN has a NaN
// OKS, which pycocotools' `oks < threshold: skip` let match as a perfect one
// (AP 1 for a NaN model). It matches nothing now.
TEST(KeypointAp, NaNKeypointsMatchNothing) {
  const KeypointTruth a = person(100, 100, 5000);
  KeypointDetection nan_det = detection(a, 0.9);
  for (int k = 0; k < K; ++k) nan_det.keypoints[3 * k] = std::numeric_limits<double>::quiet_NaN();
  KeypointEvaluator ev;
  ev.add(1, {a}, {nan_det});
  EXPECT_DOUBLE_EQ(ev.coco().stats[0], 0.0);  // AP
  EXPECT_DOUBLE_EQ(ev.coco().stats[5], 0.0);  // AR
  // Beside a good detection with a lower score, it is the false positive ranked first.
  KeypointEvaluator two;
  two.add(1, {a}, {nan_det, detection(a, 0.5)});
  EXPECT_DOUBLE_EQ(two.coco().stats[5], 1.0);
  EXPECT_LT(two.coco().stats[0], 1.0);
}

TEST(KeypointAp, ChecksItsInput) {
  KeypointEvaluator ev;
  KeypointTruth t = person(0, 0, 100);
  t.keypoints.pop_back();
  EXPECT_NE(testing::error_of([&] { ev.add(5, {t}, {}); }).find("50 keypoint values"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { KeypointEvaluator({.sigmas = {}}); }).find("sigmas"),
            std::string::npos);
  const KeypointTruth p = person(0, 0, 100);
  ev.add(1, {p}, {detection(p, 0.5)});
  const std::string s = ev.serialize();
  KeypointEvaluator other;
  other.merge(s);
  EXPECT_EQ(other.serialize(), s);
  EXPECT_NE(testing::error_of([&] { other.merge(s.substr(0, s.size() - 3)); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { other.merge("not a state at all"); }).find("not the state"),
            std::string::npos);
}

// ---- golden comparison with pycocotools ------------------------------------------------

nlohmann::json golden() {
  const std::string path = testing::source_dir() + "/tests/data/golden/keypoint_ap.json";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct GoldenSet {
  std::string name;
  std::vector<int64_t> ids;
  std::vector<std::vector<KeypointTruth>> truth;
  std::vector<std::vector<KeypointDetection>> dets;
  std::vector<double> stats;
};

std::vector<GoldenSet> golden_sets() {
  std::vector<GoldenSet> out;
  const nlohmann::json all = golden();
  for (const auto& s : all["sets"]) {
    GoldenSet g;
    g.name = s["name"];
    std::map<int64_t, size_t> at;
    for (const auto& im : s["images"]) {
      at[im["id"]] = g.ids.size();
      g.ids.push_back(im["id"]);
    }
    g.truth.resize(g.ids.size());
    g.dets.resize(g.ids.size());
    for (const auto& a : s["annotations"]) {
      KeypointTruth t;
      t.keypoints = a["keypoints"].get<std::vector<double>>();
      t.num_keypoints = a["num_keypoints"];
      const auto bb = a["bbox"].get<std::vector<double>>();
      t.bbox = {bb[0], bb[1], bb[2], bb[3]};
      t.area = a["area"];
      t.crowd = a["iscrowd"].get<int>() != 0;
      g.truth[at.at(a["image_id"])].push_back(std::move(t));
    }
    for (const auto& d : s["detections"])
      g.dets[at.at(d["image_id"])].push_back(
          {.keypoints = d["keypoints"].get<std::vector<double>>(), .score = d["score"]});
    g.stats = s["stats"].get<std::vector<double>>();
    out.push_back(std::move(g));
  }
  return out;
}

TEST(KeypointAp, EqualsPycocotools) {
  const auto sets = golden_sets();
  ASSERT_EQ(sets.size(), 3u);
  double max_diff = 0;
  for (const auto& g : sets) {
    KeypointEvaluator ev;
    // Added in a shuffled order: the result depends on image ids, not on arrival.
    for (size_t j = 0; j < g.ids.size(); ++j) {
      const size_t i = (j * 7) % g.ids.size();
      ev.add(g.ids[i], g.truth[i], g.dets[i]);
    }
    ASSERT_EQ(ev.images(), static_cast<int64_t>(g.ids.size()));
    const auto s = ev.coco().stats;
    ASSERT_EQ(g.stats.size(), s.size());
    for (size_t k = 0; k < s.size(); ++k) {
      // The same operations on the same doubles; only numpy's pairwise sums in
      // the final means differ, by a few ulps.
      EXPECT_NEAR(s[k], g.stats[k], 1e-12) << g.name << " stat " << k;
      max_diff = std::max(max_diff, std::abs(s[k] - g.stats[k]));
    }
  }
  std::cout << "max |tcv - pycocotools| over 3 sets x 10 stats: " << max_diff << "\n";
}

TEST(KeypointAp, TwoRanksEqualOneProcess) {
  const auto g = golden_sets().front();
  KeypointEvaluator single;
  for (size_t i = 0; i < g.ids.size(); ++i) single.add(g.ids[i], g.truth[i], g.dets[i]);
  const Metrics want = single.finish();
  auto world = std::make_shared<dist::testing::FakeWorld>(2);
  std::vector<Metrics> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      dist::testing::FakeGroup pg(world, r);
      KeypointEvaluator ev;
      // Rank r takes every other image; both see image 0 (sampler padding).
      for (size_t i = 0; i < g.ids.size(); ++i)
        if (static_cast<int>(i % 2) == r || i == 0) ev.add(g.ids[i], g.truth[i], g.dets[i]);
      combine(ev, pg);
      got[r] = ev.finish();
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[r][k].first, want[k].first);
      EXPECT_EQ(got[r][k].second, want[k].second) << want[k].first << " on rank " << r;
    }
  }
}

}  // namespace
}  // namespace tcv::train
