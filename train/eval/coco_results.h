// COCO detection results files (a JSON list of {"image_id", "category_id",
// "bbox": [x, y, w, h], "score"}, what pycocotools' COCO.loadRes reads and
// what detectors submit), read into the detection evaluator's form, and
// COCOeval.summarize()'s twelve lines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/det/coco.h"
#include "train/eval/det_map.h"
#include "train/eval/keypoint_ap.h"

namespace tcv::train {

/// One entry of a results file.
struct CocoDetection {
  int64_t image_id = 0, category_id = 0;
  std::array<double, 4> bbox{};  ///< [x, y, w, h] in pixels
  double score = 0;
};

/// Parses a results file's JSON; `name` (the file) appears in errors: JSON
/// that does not parse, a document that is no list, an entry without one of
/// the four keys or with a value of the wrong type, a bbox that is not four
/// finite numbers with w, h >= 0, a score that is not finite (each naming the
/// entry's position). Other keys (pycocotools writes "id", "area") are ignored.
std::vector<CocoDetection> parse_coco_results(const std::string& json, const std::string& name);

/// The results per image of `truth` (same order as truth.image_ids), as
/// pycocotools' loadRes makes them: boxes [x, y, x + w, y + h], areas w x h,
/// labels from the ground truth's categories. A result naming an image or a
/// category the ground truth does not have is an error naming `name`, the
/// entry and the id (loadRes refuses unknown images; an unknown category
/// would be dropped silently by COCOeval).
std::vector<ImageDetections> coco_detections(const std::vector<CocoDetection>& results,
                                             const data::CocoTruth& truth, const std::string& name);

/// One entry of a keypoint results file (COCO's person keypoints format).
struct CocoKeypointResult {
  int64_t image_id = 0, category_id = 0;
  std::vector<double> keypoints;  ///< (x, y, v) per keypoint, COCO's pixel coordinates
  double score = 0;
};

/// Parses a keypoint results file: a JSON list of {"image_id", "category_id",
/// "keypoints": [x1, y1, v1, ...], "score"}; `num_keypoints` (x, y, v)
/// triples each, finite. Errors as parse_coco_results's.
std::vector<CocoKeypointResult> parse_coco_keypoint_results(const std::string& json,
                                                            const std::string& name,
                                                            int64_t num_keypoints = 17);

/// Detections as a COCO results file (a JSON list, one entry per box:
/// image_id, category_id = category_ids[label - 1], bbox [x1, y1, x2 - x1,
/// y2 - y1], score), images in the given order.
std::string format_coco_results(const std::vector<std::pair<int64_t, ImageDetections>>& detections,
                                const std::vector<int64_t>& category_ids);

/// People as a COCO keypoint results file (category_id 1).
std::string format_coco_keypoint_results(
    const std::vector<std::pair<int64_t, std::vector<KeypointDetection>>>& people);

/// COCOeval.summarize()'s output for `stats` (CocoSummary::stats, 12 values),
/// line for line as pycocotools prints it:
///  Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.512
std::string format_coco_summary(const std::vector<double>& stats);

}  // namespace tcv::train
