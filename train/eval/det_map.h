// Detection evaluation: Pascal VOC mAP (the devkit's VOCevaldet: the 2007
// 11-point metric and the 2010+ area metric) and COCO mAP (pycocotools'
// COCOeval for bounding boxes), computed the way those references do, with
// the accumulate / combine / finish life of every evaluator.
//
// Boxes are [x1, y1, x2, y2] in continuous pixel coordinates of the original
// image (data/det/dataset.h), ground truth and detections alike.
//
// VOC, per class: detections of all images sorted by score (a stable sort:
// ties keep image order, then the order given), each matched to the
// ground-truth box it overlaps most (IoU = intersection / union of the boxes'
// areas (x2 - x1)(y2 - y1), which equals the devkit's "+1" formula on VOC's
// 1-based inclusive corners); with IoU >= the threshold (0.5) it is a true
// positive when that box is not yet taken, a false positive when it is, and
// ignored when the box is difficult; below, a false positive. Precision =
// tp / max(tp + fp, eps); VOC07 AP averages the best precision at recall >= t
// for t = 0, 0.1, ..., 1 (t = k * 0.1 in double, as np.arange(0, 1.1, 0.1));
// the area metric integrates the precision envelope over recall. A class
// without non-difficult boxes has no AP (reported as -1, left out of the mean).
//
// COCO: COCOeval (train/eval/coco_eval.h) with pycocotools' bbIou as the
// similarity (crowd boxes: intersection / detection area), area ranges all,
// small < 32^2, medium, large > 96^2 (by the ground truth's `area`, the
// detection's box area) and 1, 10, 100 detections per image. AP averages
// precision over thresholds, recall points and categories that have ground
// truth; AR averages final recall.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/det/dataset.h"
#include "train/eval/coco_eval.h"
#include "train/eval/evaluator.h"

namespace tcv::train {

enum class DetMetric {
  voc07,  ///< VOC 2007 11-point AP at IoU 0.5
  voc,    ///< VOC 2010+ area (all points) AP at IoU 0.5
  coco,   ///< COCO AP@[.5:.95] (and AP50, AP75, sizes, AR)
};

/// Parses "voc07" | "voc" | "coco"; errors list the choices.
DetMetric parse_det_metric(const std::string& name);

struct DetEvalOptions {
  DetMetric metric = DetMetric::voc07;
  /// Label k + 1 is class_names[k]; names the per-class metrics.
  std::vector<std::string> class_names{};
  /// The VOC metrics' IoU threshold.
  double iou_threshold = 0.5;
};

/// The detections of one image, in its original pixel coordinates.
struct ImageDetections {
  std::vector<data::Box> boxes;
  std::vector<double> scores;
  std::vector<int64_t> labels;  ///< in [1, K]
  /// Each box's area as COCO ranks it into small / medium / large: a results
  /// file's w x h (pycocotools' loadRes), which (x + w - x) x h may miss by a
  /// rounding at fractional positions, moving a 32 x 32 box out of "small".
  /// Empty: (x2 - x1)(y2 - y1) of each box.
  std::vector<double> areas{};
};

/// Every COCOeval number for one evaluation.
struct CocoSummary {
  /// COCOeval.stats: AP, AP50, AP75, AP small/medium/large, AR1, AR10, AR100,
  /// AR small/medium/large (-1 where nothing has ground truth).
  std::vector<double> stats;
  /// AP@[.5:.95] per category (label k + 1 at k; -1 without ground truth).
  std::vector<double> per_class;
};

/// VOC AP per class (label k + 1 at k; -1 without non-difficult ground truth).
struct VocSummary {
  std::vector<double> per_class;
  double map = 0;  ///< mean over the classes with ground truth
};

class DetectionEvaluator : public Evaluator {
 public:
  explicit DetectionEvaluator(DetEvalOptions opts);

  /// Adds one image: its ground truth (all of it: difficult and crowd objects
  /// too) and detections. Labels must lie in [1, K]. An image id seen before
  /// is ignored (a distributed sampler repeats images to even out the ranks).
  void add(int64_t image_id, const data::DetTarget& truth, const ImageDetections& dets);
  /// The same from a model's output for one image: boxes f32 (n, 4) as
  /// fractions of the image (as in DetBatch), multiplied by (width, height);
  /// scores f32 (n); labels i64 (n). A detection whose box or score holds inf
  /// or NaN (a diverged model) is left out: it finds nothing, never a match.
  void add(int64_t image_id, const data::DetTarget& truth, const Tensor& boxes,
           const Tensor& scores, const Tensor& labels, double width, double height);

  /// Images added or merged (each id once).
  int64_t images() const { return static_cast<int64_t>(images_.size()); }
  /// The detections added, per image in increasing id order.
  std::vector<std::pair<int64_t, ImageDetections>> detections() const;

  void reset() override;
  std::string serialize() const override;
  void merge(const std::string& bytes) override;
  /// VOC: map (the configured metric), ap50, map_voc07, map_voc, ap/<class>.
  /// COCO: map (AP@[.5:.95]), ap50, ap75, ap_small, ap_medium, ap_large, ar1,
  /// ar10, ar100, ar_small, ar_medium, ar_large, ap/<class>.
  Metrics finish() const override;

  /// VOC AP of everything added, 11-point (voc07) or area, at `iou` (the
  /// configured threshold when <= 0).
  VocSummary voc(bool use_07_metric, double iou = 0) const;
  /// COCOeval of everything added.
  CocoSummary coco() const;

  const DetEvalOptions& options() const { return opts_; }

 private:
  /// One image's ground truth and detections (their areas filled in), as added.
  struct Image {
    int64_t id = 0;
    data::DetTarget truth;
    ImageDetections dets;
  };
  void insert(Image im);
  // Images in increasing id order.
  std::vector<const Image*> sorted() const;

  DetEvalOptions opts_;
  std::vector<Image> images_;
  std::vector<int64_t> ids_;  // sorted, for duplicate checks
};

}  // namespace tcv::train
