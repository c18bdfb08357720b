// Keypoint evaluation: COCO keypoint AP/AR by object keypoint similarity, as
// pycocotools' COCOeval in 'keypoints' mode, with the accumulate / combine /
// finish life of every evaluator.
//
// One category (person). OKS of detection d and ground truth g with K
// keypoints: e_k = (dx_k² + dy_k²) / (2σ_k)² / (area_g + eps) / 2 and
// OKS = mean over the keypoints labelled in g (v > 0) of exp(-e_k); a ground
// truth without labelled keypoints measures dx, dy to the box twice its bbox
// around it ([x - w, x + 2w] × [y - h, y + 2h]) over all K keypoints. σ are
// COCO's per-keypoint sigmas. COCOeval (train/eval/coco_eval.h) with OKS as
// the similarity: 20 detections per image; ground truth with num_keypoints = 0
// or crowd ignored; area ranges all, medium 32²..96², large > 96² (by the
// ground truth's area, a detection's by the box of its keypoints). AP averages
// precision over thresholds and recall points, AR final recall over thresholds.
//
// NaN: a detection whose keypoints hold NaN has a NaN OKS and matches nothing
// (a false positive). pycocotools' matching skips a pair only when its OKS is
// below the threshold, so there a NaN OKS matches as well as a perfect one;
// otherwise the numbers are pycocotools'.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "train/eval/coco_eval.h"
#include "train/eval/evaluator.h"

namespace tcv::train {

/// COCO's per-keypoint OKS sigmas for its 17 keypoints (nose, eyes, ears,
/// shoulders, elbows, wrists, hips, knees, ankles; left before right):
/// pycocotools' kpt_oks_sigmas.
const std::vector<double>& coco_keypoint_sigmas();

/// One annotated person, as a COCO person_keypoints annotation.
struct KeypointTruth {
  /// K (x, y, v) triples; v = 0 unlabelled, 1 labelled but hidden, 2 visible.
  std::vector<double> keypoints;
  /// Labelled keypoints (COCO's num_keypoints); 0 makes the person ignored.
  int64_t num_keypoints = 0;
  /// [x, y, w, h] of the person (COCO's bbox).
  std::array<double, 4> bbox{};
  /// The segment area (COCO's area): the OKS scale and the area ranges.
  double area = 0;
  bool crowd = false;
};

/// One detected person: K (x, y, score) triples and the person's score.
struct KeypointDetection {
  std::vector<double> keypoints;
  double score = 0;
};

struct KeypointEvalOptions {
  /// One sigma per keypoint; COCO's 17 by default.
  std::vector<double> sigmas = coco_keypoint_sigmas();
  /// Detections kept per image, highest scores first (COCOeval maxDets).
  int64_t max_dets = 20;
};

/// COCOeval.stats of 'keypoints' mode: AP, AP50, AP75, AP medium, AP large,
/// AR, AR50, AR75, AR medium, AR large (-1 where nothing has ground truth).
struct KeypointSummary {
  std::array<double, 10> stats{};
};

class KeypointEvaluator : public Evaluator {
 public:
  explicit KeypointEvaluator(KeypointEvalOptions opts = {});

  /// Adds one image: all its annotated people (crowds included) and its
  /// detections. An image id seen before is ignored (a distributed sampler
  /// repeats images to even out the ranks). Keypoint vectors must hold 3·K
  /// values.
  void add(int64_t image_id, const std::vector<KeypointTruth>& truth,
           const std::vector<KeypointDetection>& dets);

  /// Images added or merged (each id once).
  int64_t images() const { return static_cast<int64_t>(images_.size()); }
  /// The detections added, per image in increasing id order.
  std::vector<std::pair<int64_t, std::vector<KeypointDetection>>> detections() const;

  void reset() override;
  std::string serialize() const override;
  void merge(const std::string& bytes) override;
  /// ap (AP@[.5:.95]), ap50, ap75, ap_medium, ap_large, ar, ar50, ar75,
  /// ar_medium, ar_large: COCOeval.stats in its order.
  Metrics finish() const override;

  /// COCOeval of everything added.
  KeypointSummary coco() const;

  /// OKS of every detection (rows) against every ground truth (columns), as
  /// pycocotools' computeOks for one image (detections in the order given).
  std::vector<double> oks(const std::vector<KeypointTruth>& truth,
                          const std::vector<KeypointDetection>& dets) const;

  const KeypointEvalOptions& options() const { return opts_; }

 private:
  struct Image {
    int64_t id = 0;
    std::vector<KeypointTruth> truth;
    std::vector<KeypointDetection> dets;
  };
  void insert(Image im);

  KeypointEvalOptions opts_;
  std::vector<Image> images_;
  std::vector<int64_t> ids_;  // sorted, for duplicate checks
};

}  // namespace tcv::train
