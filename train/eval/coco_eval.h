// COCOeval: pycocotools' evaluate() + accumulate() + summarize(), once, with
// the similarity of a detection to a ground-truth object as a policy, as
// COCOeval's iouType: boxes' IoU (DetectionEvaluator, "bbox") and keypoints'
// OKS (KeypointEvaluator, "keypoints"); instance masks' IoU would be a third
// CocoSimilarity.
//
// Per category and image: the detections sorted by score (stable) and cut to
// the largest max_dets; their similarity to the image's ground truth of that
// category; per area range, the ground truth ignored when the policy says so
// (crowds, people without keypoints) or its area lies outside the range,
// sorted with the ignored last (stable); greedy matching at the thresholds
// 0.50:0.05:0.95 (np.linspace(.5, .95, 10)), each detection taking the best
// ground truth at or above the threshold that is not taken (crowds may be
// taken many times), never leaving the not-ignored ones for an ignored one;
// an unmatched detection whose area lies outside the range is ignored.
// Per category, area range and max detections: the kept detections of all
// images, in image order, sorted by score (stable), running counts of true
// and false positives (ignored ones neither), recall tp / npig and precision
// tp / (tp + fp + eps), precision made non-increasing and read at the 101
// recall thresholds (np.searchsorted, side='left'; past the end 0).
//
// NaN: a NaN similarity (boxes whose areas overflow, keypoints holding NaN)
// matches nothing (pycocotools' `iou < threshold: continue` lets it match as
// a perfect one); otherwise the numbers are pycocotools'.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tcv::train {

/// What COCOeval reads of one ground-truth object of a category.
struct CocoTruthRef {
  int32_t image = 0;    ///< its image's position (images in increasing id order)
  int32_t index = 0;    ///< the object within its image, as the similarity knows it
  double area = 0;      ///< COCO's area: picks the area ranges it counts in
  bool crowd = false;   ///< a crowd region: detections may match it many times
  bool ignore = false;  ///< ignored in every area range (crowds; people without keypoints)
};

/// What COCOeval reads of one detection of a category.
struct CocoDetectionRef {
  int32_t image = 0;  ///< its image's position (images in increasing id order)
  int32_t index = 0;  ///< the detection within its image, as the similarity knows it
  double score = 0;
  double area = 0;  ///< picks the area ranges in which it counts when unmatched
};

/// The similarity of detections to ground truth (COCOeval's iouType).
class CocoSimilarity {
 public:
  virtual ~CocoSimilarity() = default;
  /// out[d * truth.size() + g]: the similarity of dets[d] to truth[g], all of
  /// one image and category (dets by descending score).
  virtual void compute(std::span<const CocoTruthRef> truth, std::span<const CocoDetectionRef> dets,
                       double* out) const = 0;
};

/// COCOeval's params beyond the thresholds (fixed: 10 similarity thresholds
/// .50:.05:.95, 101 recall points).
struct CocoEvalParams {
  /// [lo, hi] of each area range; the first is "all".
  std::vector<std::array<double, 2>> area_ranges;
  /// Increasing; each image keeps its max_dets.back() best detections.
  std::vector<int64_t> max_dets;
  /// iouType "bbox": all, small, medium, large; 1, 10, 100 detections.
  static CocoEvalParams boxes();
  /// iouType "keypoints": all, medium, large; `max_dets` (20) detections.
  static CocoEvalParams keypoints(int64_t max_dets = 20);
};

/// COCOeval.eval after accumulate(): precision [T][R][K][A][M] and recall
/// [T][K][A][M] (K categories, A area ranges, M max_dets), -1 where a
/// category has no ground truth that counts in an area range.
class CocoAccumulation {
 public:
  static constexpr int T = 10, R = 101;
  CocoAccumulation(size_t categories, size_t areas, size_t max_dets);
  size_t categories() const { return K_; }
  double& precision(int t, int r, size_t k, size_t a, size_t m) {
    return precision_[((static_cast<size_t>(t) * R + static_cast<size_t>(r)) * K_ + k) * A_ * M_ +
                      a * M_ + m];
  }
  double precision(int t, int r, size_t k, size_t a, size_t m) const {
    return const_cast<CocoAccumulation&>(*this).precision(t, r, k, a, m);
  }
  double& recall(int t, size_t k, size_t a, size_t m) {
    return recall_[((static_cast<size_t>(t) * K_ + k) * A_ + a) * M_ + m];
  }
  double recall(int t, size_t k, size_t a, size_t m) const {
    return const_cast<CocoAccumulation&>(*this).recall(t, k, a, m);
  }
  /// summarize()'s AP: the mean of the precisions > -1 at threshold t (-1:
  /// all ten), area range a and max_dets m, of category k (-1: all); -1 when
  /// there are none.
  double ap(int t, size_t a, size_t m, int64_t k = -1) const;
  /// summarize()'s AR: the mean of the recalls > -1 at threshold t (-1: all
  /// ten), area range a and max_dets m, over the categories; -1 when none.
  double ar(int t, size_t a, size_t m) const;

 private:
  size_t K_, A_, M_;
  std::vector<double> precision_, recall_;
};

/// COCOeval of `truth[k]` and `dets[k]`, category k's objects in image order
/// (within an image in the order the similarity indexes them).
CocoAccumulation coco_evaluate(const std::vector<std::vector<CocoTruthRef>>& truth,
                               const std::vector<std::vector<CocoDetectionRef>>& dets,
                               const CocoEvalParams& params, const CocoSimilarity& similarity);

/// COCOeval.stats of iouType "bbox" (params boxes()): AP, AP50, AP75, AP
/// small/medium/large, AR1, AR10, AR100, AR small/medium/large.
std::vector<double> coco_box_stats(const CocoAccumulation& acc);
/// COCOeval.stats of iouType "keypoints" (params keypoints()): AP, AP50,
/// AP75, AP medium/large, AR, AR50, AR75, AR medium/large.
std::array<double, 10> coco_keypoint_stats(const CocoAccumulation& acc);

}  // namespace tcv::train
