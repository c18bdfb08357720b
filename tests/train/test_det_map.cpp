// Detection mAP: hand-computed cases, the golden comparison with the VOC
// devkit's formula and pycocotools (tests/data/golden/det_map.json, written by
// scripts/make_golden_det_map.py on data this file rebuilds bit for bit), and
// the combination of shards across ranks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "dist/fake_group.h"
#include "support/gradcheck.h"
#include "train/eval/det_map.h"

using namespace tcv;
using namespace tcv::train;
using data::Box;
using data::DetTarget;

namespace {

std::vector<std::string> names(int k) {
  std::vector<std::string> v;
  for (int i = 1; i <= k; ++i) v.push_back("class" + std::to_string(i));
  return v;
}

DetTarget truth(const std::vector<Box>& boxes, const std::vector<int64_t>& labels,
                const std::vector<int>& difficult = {}, const std::vector<int>& crowd = {}) {
  DetTarget t;
  for (size_t k = 0; k < boxes.size(); ++k)
    t.add(boxes[k], labels[k], !difficult.empty() && difficult[k], !crowd.empty() && crowd[k]);
  return t;
}

ImageDetections dets(const std::vector<Box>& boxes, const std::vector<double>& scores,
                     const std::vector<int64_t>& labels) {
  return {boxes, scores, labels};
}

// ---- the synthetic set of scripts/det_map_synth.py, rebuilt -------------------------

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t randint(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo));
  }
};

struct SynthImage {
  int64_t id, width, height;
  DetTarget gt;
  ImageDetections dets;
};

std::vector<SynthImage> make_set(uint64_t seed, int64_t images, int64_t classes,
                                 int64_t crowded_every = 50, int64_t max_gt = 8) {
  SplitMix64 r{seed};
  std::vector<SynthImage> out;
  for (int64_t i = 0; i < images; ++i) {
    SynthImage im;
    const int64_t W = r.randint(200, 641), H = r.randint(200, 641);
    im.id = (i * 7919) % 10007 + 1;
    im.width = W;
    im.height = H;
    const int64_t n_gt = r.randint(0, max_gt + 1);
    for (int64_t g = 0; g < n_gt; ++g) {
      const int64_t w = r.randint(4, W / 2), h = r.randint(4, H / 2);
      const int64_t x1 = r.randint(0, W - w), y1 = r.randint(0, H - h);
      const int64_t label = r.randint(1, classes);
      const bool difficult = r.randint(0, 100) < 12;
      const bool crowd = r.randint(0, 100) < 6;
      const double area = static_cast<double>(w * h * r.randint(50, 101)) / 100.0;
      im.gt.add({static_cast<double>(x1), static_cast<double>(y1), static_cast<double>(x1 + w),
                 static_cast<double>(y1 + h)},
                label, difficult, crowd, area);
      if (r.randint(0, 100) < 80) {
        const int64_t n = r.randint(1, 4);
        for (int64_t d = 0; d < n; ++d) {
          const double dx1 =
              static_cast<double>(x1) + static_cast<double>(r.randint(-w, w + 1)) / 8;
          const double dy1 =
              static_cast<double>(y1) + static_cast<double>(r.randint(-h, h + 1)) / 8;
          const double dw =
              std::max(1.0, static_cast<double>(w) + static_cast<double>(r.randint(-w, w + 1)) / 8);
          const double dh =
              std::max(1.0, static_cast<double>(h) + static_cast<double>(r.randint(-h, h + 1)) / 8);
          const int64_t dl = r.randint(0, 100) < 90 ? label : r.randint(1, classes + 1);
          const double score = static_cast<double>(r.randint(0, 1024)) / 1024;
          im.dets.boxes.push_back({dx1, dy1, dx1 + dw, dy1 + dh});
          im.dets.labels.push_back(dl);
          im.dets.scores.push_back(score);
        }
      }
      if (r.randint(0, 100) < 10) {  // IoU exactly 0.5 or 0.75
        const double f = r.randint(0, 2) == 0 ? 0.5 : 0.75;
        const double score = static_cast<double>(r.randint(0, 1024)) / 1024;
        im.dets.boxes.push_back({static_cast<double>(x1), static_cast<double>(y1),
                                 static_cast<double>(x1) + static_cast<double>(w) * f,
                                 static_cast<double>(y1 + h)});
        im.dets.labels.push_back(label);
        im.dets.scores.push_back(score);
      }
    }
    const int64_t n_fp = r.randint(0, 5);
    const bool crowded = crowded_every && i % crowded_every == 7;
    for (int64_t k = 0; k < n_fp + (crowded ? 120 : 0); ++k) {
      const double w =
          static_cast<double>(r.randint(8, W / 2)) + static_cast<double>(r.randint(0, 8)) / 8;
      const double h =
          static_cast<double>(r.randint(8, H / 2)) + static_cast<double>(r.randint(0, 8)) / 8;
      const double x1 =
          static_cast<double>(r.randint(0, W - W / 2)) + static_cast<double>(r.randint(0, 8)) / 8;
      const double y1 =
          static_cast<double>(r.randint(0, H - H / 2)) + static_cast<double>(r.randint(0, 8)) / 8;
      const int64_t label = k >= n_fp ? 1 : r.randint(1, classes + 1);
      const double score = static_cast<double>(r.randint(0, 1024)) / 1024;
      im.dets.boxes.push_back({x1, y1, x1 + w, y1 + h});
      im.dets.labels.push_back(label);
      im.dets.scores.push_back(score);
    }
    out.push_back(std::move(im));
  }
  return out;
}

nlohmann::json golden() {
  const std::string path = tcv::testing::source_dir() + "/tests/data/golden/det_map.json";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

}  // namespace

// ---- hand-computed cases ---------------------------------------------------------------

// Two images, one class. Image 1: A (0,0,10,10) and a difficult B (20,20,30,30);
// image 2: C (0,0,10,10). Detections by score: A (tp), A again (fp: taken),
// B (ignored: difficult), one overlapping C at IoU 25/175 (fp), C at IoU 0.9 (tp).
// rec = .5 .5 .5 .5 1, prec = 1 .5 .5 1/3 .5:
//   VOC07: six thresholds t <= .5 see precision 1, five see .5: (6 + 2.5) / 11.
//   area: .5 x 1 + .5 x .5 = .75.
TEST(DetMapVoc, HandComputedClass) {
  DetectionEvaluator ev({.metric = DetMetric::voc07, .class_names = names(1)});
  ev.add(1, truth({{0, 0, 10, 10}, {20, 20, 30, 30}}, {1, 1}, {0, 1}),
         dets({{0, 0, 10, 10}, {0, 0, 10, 10}, {20, 20, 30, 30}}, {0.9, 0.8, 0.7}, {1, 1, 1}));
  ev.add(2, truth({{0, 0, 10, 10}}, {1}),
         dets({{5, 5, 15, 15}, {0, 0, 10, 9}}, {0.6, 0.5}, {1, 1}));
  EXPECT_NEAR(ev.voc(true).per_class[0], 8.5 / 11.0, 1e-15);
  EXPECT_NEAR(ev.voc(false).per_class[0], 0.75, 1e-15);
  const Metrics m = ev.finish();
  EXPECT_NEAR(metric(m, "map"), 8.5 / 11.0, 1e-15);
  EXPECT_NEAR(metric(m, "ap50"), 8.5 / 11.0, 1e-15);
  EXPECT_NEAR(metric(m, "map_voc"), 0.75, 1e-15);
  EXPECT_NEAR(metric(m, "ap/class1"), 8.5 / 11.0, 1e-15);
  // IoU 0.9 fails a 0.95 threshold: the last detection becomes a false positive.
  DetectionEvaluator strict(
      {.metric = DetMetric::voc, .class_names = names(1), .iou_threshold = 0.95});
  strict.add(1, truth({{0, 0, 10, 10}}, {1}), dets({{0, 0, 10, 9}}, {0.5}, {1}));
  EXPECT_EQ(strict.voc(false).per_class[0], 0.0);
  EXPECT_EQ(metric(strict.finish(), "ap50"), 1.0);
}

TEST(DetMapVoc, ClassesWithoutTruthAreLeftOut) {
  DetectionEvaluator ev({.metric = DetMetric::voc, .class_names = names(3)});
  // Class 1 found perfectly; class 2 has only a difficult box; class 3 nothing at all.
  ev.add(7, truth({{0, 0, 10, 10}, {50, 50, 60, 60}}, {1, 2}, {0, 1}),
         dets({{0, 0, 10, 10}, {50, 50, 60, 60}, {1, 1, 5, 5}}, {0.5, 0.5, 0.5}, {1, 2, 3}));
  const VocSummary v = ev.voc(false);
  EXPECT_EQ(v.per_class, (std::vector<double>{1.0, -1.0, -1.0}));
  EXPECT_EQ(v.map, 1.0);
  DetectionEvaluator empty({.metric = DetMetric::voc07, .class_names = names(2)});
  EXPECT_EQ(metric(empty.finish(), "map"), -1.0);
}

TEST(DetMapCoco, HandComputedMatches) {
  const DetEvalOptions o{.metric = DetMetric::coco, .class_names = names(2)};
  {
    // IoU 100 / 128 = 0.78125: matched at thresholds .50 ... .75 (6 of 10).
    DetectionEvaluator ev(o);
    ev.add(1, truth({{0, 0, 10, 10}}, {1}), dets({{0, 0, 10, 12.8}}, {0.9}, {1}));
    const CocoSummary c = ev.coco();
    EXPECT_NEAR(c.stats[0], 0.6, 1e-12);  // AP
    EXPECT_NEAR(c.stats[1], 1.0, 1e-12);  // AP50
    EXPECT_NEAR(c.stats[2], 1.0, 1e-12);  // AP75
    EXPECT_NEAR(c.stats[3], 0.6, 1e-12);  // small (area 100)
    EXPECT_EQ(c.stats[4], -1.0);          // no medium ground truth
    EXPECT_EQ(c.stats[5], -1.0);
    EXPECT_NEAR(c.stats[6], 0.6, 1e-12);  // AR1
    EXPECT_NEAR(c.stats[8], 0.6, 1e-12);  // AR100
    EXPECT_NEAR(c.per_class[0], 0.6, 1e-12);
    EXPECT_EQ(c.per_class[1], -1.0);
  }
  {
    // A detection inside a crowd region (IoU = intersection / detection area = 1)
    // is ignored, not a false positive: AP stays 1 although it outscores the hit.
    DetectionEvaluator ev(o);
    ev.add(1, truth({{0, 0, 100, 100}, {200, 200, 210, 210}}, {1, 1}, {}, {1, 0}),
           dets({{10, 10, 20, 20}, {200, 200, 210, 210}}, {0.9, 0.5}, {1, 1}));
    EXPECT_NEAR(ev.coco().stats[0], 1.0, 1e-12);
    // Without the crowd flag the same detection is a false positive ranked first:
    // precision 1/2 at recall 1/2 ... and the crowd box a miss.
    DetectionEvaluator plain(o);
    plain.add(1, truth({{0, 0, 100, 100}, {200, 200, 210, 210}}, {1, 1}),
              dets({{10, 10, 20, 20}, {200, 200, 210, 210}}, {0.9, 0.5}, {1, 1}));
    EXPECT_LT(plain.coco().stats[0], 0.5);
  }
  {
    // Two true positives in different images with the lower score first:
    // max detections 1 per image still sees both; AR1 = 1.
    DetectionEvaluator ev(o);
    ev.add(5, truth({{0, 0, 50, 50}}, {2}),
           dets({{0, 0, 50, 50}, {60, 60, 90, 90}}, {0.3, 0.2}, {2, 2}));
    ev.add(6, truth({{0, 0, 50, 50}}, {2}), dets({{0, 0, 50, 50}}, {0.8}, {2}));
    const CocoSummary c = ev.coco();
    EXPECT_NEAR(c.stats[0], 1.0, 1e-12);
    EXPECT_EQ(c.stats[6], 1.0);           // AR1
    EXPECT_NEAR(c.stats[4], 1.0, 1e-12);  // medium (area 2500)
    EXPECT_EQ(c.per_class[0], -1.0);
    EXPECT_NEAR(c.per_class[1], 1.0, 1e-12);
  }
}

TEST(DetMap, RejectsBadInputAndIgnoresRepeatedImages) {
  DetectionEvaluator ev({.metric = DetMetric::voc07, .class_names = names(2)});
  EXPECT_NE(tcv::testing::error_of([&] {
              ev.add(1, truth({{0, 0, 1, 1}}, {3}), {});
            }).find("ground-truth label 3 outside [1, 2]"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              ev.add(1, truth({}, {}), dets({{0, 0, 1, 1}}, {std::nan("")}, {1}));
            }).find("non-finite"),
            std::string::npos);
  ev.add(4, truth({{0, 0, 10, 10}}, {1}), dets({{0, 0, 10, 10}}, {0.5}, {1}));
  ev.add(4, truth({{0, 0, 10, 10}}, {1}), dets({{50, 50, 60, 60}}, {0.9}, {1}));  // ignored
  EXPECT_EQ(ev.images(), 1);
  EXPECT_NEAR(metric(ev.finish(), "map"), 1.0, 1e-12);
  EXPECT_NE(tcv::testing::error_of([&] { metric(ev.finish(), "top1"); }).find("known: map, ap50"),
            std::string::npos);
  EXPECT_EQ(parse_det_metric("coco"), DetMetric::coco);
  EXPECT_NE(tcv::testing::error_of([] { parse_det_metric("map"); }).find("voc07, voc, coco"),
            std::string::npos);
}

TEST(DetMap, TensorInputScalesFractionsToPixels) {
  DetectionEvaluator a({.metric = DetMetric::coco, .class_names = names(1)});
  DetectionEvaluator b({.metric = DetMetric::coco, .class_names = names(1)});
  const DetTarget t = truth({{10, 20, 110, 70}}, {1});
  a.add(1, t, dets({{10, 20, 100, 60}}, {0.5}, {1}));
  b.add(1, t, from_vector<float>({0.05f, 0.1f, 0.5f, 0.3f}, {1, 4}),
        from_vector<float>({0.5f}, {1}), from_vector<int64_t>({1}, {1}), 200.0, 200.0);
  EXPECT_NEAR(a.coco().stats[0], b.coco().stats[0], 1e-6);
}

// Issue 25, item 2 (the audit): a model's detection with a NaN box or score
// finds nothing (it is left out, its object missed; the evaluator refused it,
// ending the evaluation), and an IoU that is NaN because the areas overflow
// never matches (pycocotools' `iou < threshold: skip` matched it).
TEST(DetMap, NaNDetectionsAndNaNIousMatchNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const DetMetric m : {DetMetric::voc07, DetMetric::coco}) {
    DetectionEvaluator ev({.metric = m, .class_names = names(1)});
    const DetTarget t = truth({{10, 20, 110, 70}}, {1});
    ev.add(1, t, from_vector<float>({nan, 0.1f, 0.5f, 0.3f, 0.05f, 0.1f, 0.55f, 0.35f}, {2, 4}),
           from_vector<float>({0.9f, nan}, {2}), from_vector<int64_t>({1, 1}, {2}), 200.0, 200.0);
    EXPECT_EQ(metric(ev.finish(), "map"), 0.0);
  }
  DetectionEvaluator ev({.metric = DetMetric::coco, .class_names = names(1)});
  DetTarget huge = truth({{0, 0, 1e200, 1e200}}, {1});
  huge.area[0] = 100;  // an area in COCO's ranges; the boxes' own areas overflow
  ev.add(1, huge, dets({{0, 0, 1e200, 1e200}}, {0.9}, {1}));
  EXPECT_EQ(ev.coco().stats[0], 0.0);
}

// ---- golden comparison -------------------------------------------------------------------

TEST(DetMapGolden, EqualsDevkitAndPycocotools) {
  const nlohmann::json g = golden();
  const auto& gen = g["generator"];
  const auto images = make_set(gen["seed"].get<uint64_t>(), gen["images"].get<int64_t>(),
                               gen["classes"].get<int64_t>());
  const int K = gen["classes"].get<int>();
  int64_t n_gt = 0, n_det = 0;
  for (const auto& im : images) {
    n_gt += im.gt.size();
    n_det += static_cast<int64_t>(im.dets.boxes.size());
  }
  ASSERT_EQ(n_gt, gen["gt_boxes"].get<int64_t>()) << "the generator no longer matches the script";
  ASSERT_EQ(n_det, gen["detections"].get<int64_t>());

  DetectionEvaluator ev({.metric = DetMetric::voc07, .class_names = names(K)});
  for (const auto& im : images) ev.add(im.id, im.gt, im.dets);
  double worst = 0;
  auto near = [&](double got, double want, const std::string& what) {
    worst = std::max(worst, std::abs(got - want));
    EXPECT_NEAR(got, want, 1e-4) << what;
  };
  for (const auto& [key, use07] : {std::pair{"voc07", true}, std::pair{"voc", false}}) {
    const VocSummary v = ev.voc(use07);
    near(v.map, g[key]["map"].get<double>(), std::string(key) + " map");
    for (int k = 0; k < K; ++k)
      near(v.per_class[k], g[key]["per_class"][k].get<double>(),
           std::string(key) + " class " + std::to_string(k + 1));
  }
  const CocoSummary c = ev.coco();
  for (int i = 0; i < 12; ++i)
    near(c.stats[i], g["coco"]["stats"][i].get<double>(), "coco stats[" + std::to_string(i) + "]");
  for (int k = 0; k < K; ++k)
    near(c.per_class[k], g["coco"]["per_class"][k].get<double>(),
         "coco class " + std::to_string(k + 1));
  std::cout << "max |tcv - reference| over " << 2 * (K + 1) + 12 + K << " values: " << worst
            << "\n";
}

// ---- combining ranks ------------------------------------------------------------------------

TEST(DetMapCombine, TwoShardsEqualOneProcess) {
  const auto images = make_set(99, 120, 5, 40);
  for (DetMetric metric_kind : {DetMetric::voc07, DetMetric::coco}) {
    const DetEvalOptions o{.metric = metric_kind, .class_names = names(5)};
    DetectionEvaluator single(o);
    for (const auto& im : images) single.add(im.id, im.gt, im.dets);
    const Metrics want = single.finish();

    auto world = std::make_shared<dist::testing::FakeWorld>(2);
    std::vector<Metrics> got(2);
    std::vector<int64_t> counts(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        dist::testing::FakeGroup pg(world, r);
        DetectionEvaluator ev(o);
        // Rank r takes every other image, and both
        // see image 0 (a distributed sampler's padding repeats images).
        for (size_t i = 0; i < images.size(); ++i)
          if (static_cast<int>(i % 2) == r || i == 0)
            ev.add(images[i].id, images[i].gt, images[i].dets);
        combine(ev, pg);
        counts[r] = ev.images();
        got[r] = ev.finish();
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(counts[r], static_cast<int64_t>(images.size()));
      ASSERT_EQ(got[r].size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[r][k].first, want[k].first);
        EXPECT_EQ(got[r][k].second, want[k].second) << want[k].first << " on rank " << r;
      }
    }
  }
}

TEST(DetMapCombine, MergeChecksItsInput) {
  DetectionEvaluator a({.metric = DetMetric::voc07, .class_names = names(2)});
  a.add(1, truth({{0, 0, 10, 10}}, {1}), dets({{0, 0, 10, 10}}, {0.5}, {2}));
  const std::string s = a.serialize();
  DetectionEvaluator b({.metric = DetMetric::voc07, .class_names = names(2)});
  b.merge(s);
  EXPECT_EQ(b.serialize(), s);
  EXPECT_NE(tcv::testing::error_of([&] { b.merge(s.substr(0, s.size() - 3)); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] { b.merge("not a state"); }).find("not the state"),
            std::string::npos);
  DetectionEvaluator c({.metric = DetMetric::voc07, .class_names = names(3)});
  EXPECT_NE(tcv::testing::error_of([&] { c.merge(s); }).find("state of 2 classes"),
            std::string::npos);
}
