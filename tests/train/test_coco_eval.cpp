// COCOeval with the similarity as a policy (train/eval/coco_eval.h): a
// similarity given as a table stands for a third iouType (as instance masks
// would be), and the numbers are worked out by hand. The box and keypoint
// policies are compared with pycocotools in test_det_map.cpp,
// test_coco_results.cpp and test_keypoint_ap.cpp.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "engine/error.h"
#include "train/eval/coco_eval.h"

namespace {

using namespace tcv::train;

// The similarity of (image, truth index, detection index) from a table; 0 when absent.
class TableSimilarity final : public CocoSimilarity {
 public:
  std::map<std::tuple<int32_t, int32_t, int32_t>, double> table;
  void compute(std::span<const CocoTruthRef> truth, std::span<const CocoDetectionRef> dets,
               double* out) const override {
    for (size_t d = 0; d < dets.size(); ++d)
      for (size_t g = 0; g < truth.size(); ++g) {
        const auto it = table.find({truth[g].image, truth[g].index, dets[d].index});
        out[d * truth.size() + g] = it == table.end() ? 0.0 : it->second;
      }
  }
};

CocoEvalParams one_range(std::vector<int64_t> max_dets) {
  return {.area_ranges = {{0, 1e10}}, .max_dets = std::move(max_dets)};
}

TEST(CocoEval, ATableSimilarityByHand) {
  // Image 0: one object, detections 0.9 (similarity 0.83) and 0.8 (0.62);
  // image 1: one object, a detection 0.7 (0.97). The detections are given out
  // of score order within image 0.
  TableSimilarity sim;
  sim.table = {{{0, 0, 0}, 0.62}, {{0, 0, 1}, 0.83}, {{1, 0, 0}, 0.97}};
  const std::vector<std::vector<CocoTruthRef>> truth = {{{0, 0, 100}, {1, 0, 100}}};
  const std::vector<std::vector<CocoDetectionRef>> dets = {
      {{0, 0, 0.8, 100}, {0, 1, 0.9, 100}, {1, 0, 0.7, 100}}};
  const CocoAccumulation acc = coco_evaluate(truth, dets, one_range({1, 100}), sim);
  ASSERT_EQ(acc.categories(), 1u);
  // 100 detections, thresholds .50-.80 (7): TP, FP, TP: precision 1 up to
  // recall .5 (51 points), then 2/3 (50 points); .85-.95 (3): FP, FP, TP:
  // 1/3 up to recall .5, then 0.
  EXPECT_DOUBLE_EQ(acc.precision(0, 50, 0, 0, 1), 1.0);
  EXPECT_DOUBLE_EQ(acc.precision(0, 51, 0, 0, 1), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(acc.precision(7, 50, 0, 0, 1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(acc.precision(7, 51, 0, 0, 1), 0.0);
  EXPECT_DOUBLE_EQ(acc.recall(6, 0, 0, 1), 1.0);
  EXPECT_DOUBLE_EQ(acc.recall(7, 0, 0, 1), 0.5);
  EXPECT_NEAR(acc.ap(-1, 0, 1), (7 * (51 + 50 * 2.0 / 3.0) + 3 * 51 / 3.0) / 1010.0, 1e-13);
  EXPECT_NEAR(acc.ap(0, 0, 1), (51 + 50 * 2.0 / 3.0) / 101.0, 1e-15);
  EXPECT_NEAR(acc.ar(-1, 0, 1), (7 * 1.0 + 3 * 0.5) / 10.0, 1e-15);
  // One detection per image keeps the 0.9 and the 0.7: TP, TP below .85;
  // FP, TP above (precision .5 up to recall .5).
  EXPECT_NEAR(acc.ap(-1, 0, 0), (7 * 1.0 + 3 * 51 * 0.5 / 101.0) / 10.0, 1e-15);
  EXPECT_NEAR(acc.ar(5, 0, 0), 1.0, 1e-15);
}

TEST(CocoEval, IgnoredTruthAndAreaRanges) {
  // An ignored object (a crowd, a person without keypoints) that detections
  // match makes them neither true nor false positives; a crowd may be matched
  // many times. Were it an object like the other, the second detection on it
  // would be a false positive ahead of the true one (AP < 1).
  TableSimilarity sim;
  sim.table = {{{0, 0, 0}, 0.99}, {{0, 1, 1}, 0.99}, {{0, 1, 2}, 0.99}};
  const std::vector<std::vector<CocoTruthRef>> truth = {
      {{0, 0, 100, false, false}, {0, 1, 100, true, true}}};
  const std::vector<std::vector<CocoDetectionRef>> dets = {
      {{0, 0, 0.5, 100}, {0, 1, 0.9, 100}, {0, 2, 0.7, 100}}};
  CocoEvalParams p = one_range({100});
  p.area_ranges.push_back({0, 50});  // the object's area 100 lies outside: no truth counts
  const CocoAccumulation acc = coco_evaluate(truth, dets, p, sim);
  EXPECT_DOUBLE_EQ(acc.ap(-1, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(acc.ar(-1, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(acc.ap(-1, 1, 0), -1.0);
  EXPECT_DOUBLE_EQ(acc.ar(-1, 1, 0), -1.0);
  // A category without ground truth has no AP either, and is left out of the means.
  const CocoAccumulation two =
      coco_evaluate({truth[0], {}}, {dets[0], {{0, 2, 0.99, 100}}}, one_range({100}), sim);
  EXPECT_DOUBLE_EQ(two.ap(-1, 0, 0, 1), -1.0);
  EXPECT_DOUBLE_EQ(two.ap(-1, 0, 0), 1.0);
}

TEST(CocoEval, ChecksItsInput) {
  TableSimilarity sim;
  const std::vector<std::vector<CocoTruthRef>> truth = {{{1, 0, 100}, {0, 0, 100}}};
  EXPECT_THROW(coco_evaluate(truth, {{}}, one_range({100}), sim), tcv::Error);  // image order
  EXPECT_THROW(coco_evaluate(truth, {}, one_range({100}), sim), tcv::Error);    // categories
  EXPECT_THROW(coco_evaluate({{}}, {{}}, one_range({10, 10}), sim), tcv::Error);
  EXPECT_THROW(coco_evaluate({{}}, {{}}, one_range({}), sim), tcv::Error);
}

TEST(CocoEval, Params) {
  const CocoEvalParams b = CocoEvalParams::boxes(), k = CocoEvalParams::keypoints();
  EXPECT_EQ(b.max_dets, (std::vector<int64_t>{1, 10, 100}));
  ASSERT_EQ(b.area_ranges.size(), 4u);
  EXPECT_EQ(b.area_ranges[1][1], 32.0 * 32.0);
  EXPECT_EQ(k.max_dets, (std::vector<int64_t>{20}));
  ASSERT_EQ(k.area_ranges.size(), 3u);
  EXPECT_EQ(k.area_ranges[1][0], 32.0 * 32.0);
  EXPECT_EQ(k.area_ranges[2][0], 96.0 * 96.0);
}

}  // namespace
