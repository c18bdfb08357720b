// COCO results files: the reader's errors, and the ground-truth + results
// files of tests/data/golden/coco_eval/ (scripts/make_golden_coco_eval.py)
// evaluated as pycocotools' loadRes + COCOeval do. The files hold detections
// of exactly 32 x 32 and 96 x 96 pixels at decimal positions, on the edges of
// COCO's area ranges.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "data/idx.h"
#include "support/gradcheck.h"
#include "train/eval/coco_results.h"
#include "train/eval/det_map.h"

namespace {

using namespace tcv;
using train::CocoDetection;

std::string golden(const std::string& name) {
  return tcv::testing::source_dir() + "/tests/data/golden/coco_eval/" + name;
}

std::string error_of(const std::string& json) {
  try {
    train::parse_coco_results(json, "res.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(CocoResults, ParsesEntriesAndIgnoresOtherKeys) {
  const auto r = train::parse_coco_results(
      R"([{"image_id": 4, "category_id": 18, "bbox": [1.5, 2, 30, 40.25], "score": 0.75,
           "id": 9, "area": 1207.5}])",
      "res.json");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].image_id, 4);
  EXPECT_EQ(r[0].category_id, 18);
  EXPECT_EQ(r[0].bbox, (std::array<double, 4>{1.5, 2, 30, 40.25}));
  EXPECT_EQ(r[0].score, 0.75);
  EXPECT_TRUE(train::parse_coco_results("[]", "res.json").empty());
}

TEST(CocoResults, BadEntriesNameTheFileAndTheEntry) {
  EXPECT_TRUE(
      contains(error_of("{\"image_id\": 1}"), "res.json: a COCO results file is a JSON list"));
  EXPECT_TRUE(contains(error_of("[1, 2"), "res.json: [json]"));
  const std::string ok = R"({"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1})";
  EXPECT_TRUE(
      contains(error_of("[" + ok + R"(, {"image_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])"),
               "res.json: detection 1: [json] missing key \"category_id\""))
      << error_of("[" + ok + R"(, {"image_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])");
  EXPECT_TRUE(contains(
      error_of(R"([{"image_id": "a", "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])"),
      "res.json: detection 0: [json] \"image_id\": expected an integer"));
  EXPECT_TRUE(
      contains(error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1], "score": 1}])"),
               "res.json: detection 0: \"bbox\" must be [x, y, w, h]"));
  EXPECT_TRUE(contains(
      error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0, 0, -1, 1], "score": 1}])"),
      "res.json: detection 0: \"bbox\" has a negative size"));
  EXPECT_TRUE(contains(
      error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1e999, 1], "score": 1}])"),
      "res.json: [json]"))
      << error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1e999, 1], "score": 1}])");
}

data::CocoTruth truth_of_golden() {
  const std::string file = golden("instances.json");
  return data::coco_truth(data::parse_coco(data::read_maybe_gzip(file), file), file);
}

TEST(CocoResults, UnknownImagesAndCategoriesAreNamed) {
  const data::CocoTruth truth = truth_of_golden();
  const int64_t image = truth.image_ids[0];
  std::vector<CocoDetection> r = {{image, 7, {0, 0, 5, 5}, 0.5}};
  EXPECT_EQ(train::coco_detections(r, truth, "res.json")[0].labels,
            std::vector<int64_t>{3});  // ids 1, 3, 7: label 3
  r.push_back({123456, 7, {0, 0, 5, 5}, 0.5});
  try {
    train::coco_detections(r, truth, "res.json");
    ADD_FAILURE() << "an unknown image was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "res.json: detection 1: image id 123456 is not among the "
                         "ground truth's 60 images"))
        << e.what();
  }
  r.back() = {image, 2, {0, 0, 5, 5}, 0.5};
  try {
    train::coco_detections(r, truth, "res.json");
    ADD_FAILURE() << "an unknown category was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "res.json: detection 1: category id 2 is not among the 6 "
                         "categories of the ground truth"))
        << e.what();
  }
}

// The twelve numbers equal pycocotools' (to rounding), and the printed summary
// equals its text. With areas recomputed from the corners instead, small and
// medium AP move: the detections at decimal positions fall out of their range.
TEST(CocoResults, GoldenEqualsPycocotools) {
  const data::CocoTruth truth = truth_of_golden();
  const std::string res_file = golden("results.json");
  auto dets = train::coco_detections(
      train::parse_coco_results(data::read_maybe_gzip(res_file), res_file), truth, res_file);
  const auto want = nlohmann::json::parse(data::read_maybe_gzip(golden("stats.json")))["stats"]
                        .get<std::vector<double>>();
  auto evaluate = [&](const std::vector<train::ImageDetections>& d) {
    train::DetectionEvaluator ev(
        {.metric = train::DetMetric::coco, .class_names = truth.labels.names});
    for (size_t i = 0; i < d.size(); ++i) ev.add(truth.image_ids[i], truth.targets[i], d[i]);
    return ev.coco().stats;
  };
  const std::vector<double> got = evaluate(dets);
  ASSERT_EQ(got.size(), 12u);
  // Sums of at most 101 * 10 * 6 precisions in [0, 1], in another order: 1e-12 bounds them.
  for (size_t k = 0; k < 12; ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << "stat " << k;
  EXPECT_EQ(train::format_coco_summary(got), data::read_maybe_gzip(golden("summary.txt")));

  for (auto& d : dets) d.areas.clear();
  const std::vector<double> corners = evaluate(dets);
  EXPECT_GT(std::abs(corners[3] - want[3]) + std::abs(corners[4] - want[4]), 1e-3)
      << "small " << corners[3] << " medium " << corners[4];
}

TEST(CocoResults, SummaryFormatsAsPycocotools) {
  std::vector<double> s(12, -1.0);
  s[0] = 0.515625;
  const std::string text = train::format_coco_summary(s);
  EXPECT_TRUE(contains(text,
                       " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | "
                       "maxDets=100 ] = 0.516\n"))
      << text;
  EXPECT_TRUE(contains(text,
                       " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | "
                       "maxDets=  1 ] = -1.000\n"))
      << text;
  EXPECT_THROW(train::format_coco_summary({0.5}), Error);
}

}  // namespace
