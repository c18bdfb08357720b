// SSD's MultiBox loss as torchvision's SSD.compute_loss: anchors matched to
// ground-truth boxes by torchvision's SSDMatcher, smooth-L1 on the box codes of
// the matched anchors, cross-entropy on every positive and on the hardest
// negatives (3 per positive), both normalised by the number of matched anchors.
#pragma once

#include <vector>

#include "engine/ops/boxes.h"
#include "engine/tensor.h"

namespace tcv::models::det {

/// One image's ground truth, in pixels of the network input (after resizing to
/// 300x300 or 512x512).
struct DetTarget {
  Tensor boxes;   ///< (n, 4) f32 [x1, y1, x2, y2], x1 < x2 and y1 < y2
  Tensor labels;  ///< (n) i64 object classes 1 .. num_classes − 1 (0 is background)
};

struct MultiBoxLossOptions {
  /// An anchor is positive when its best IoU with a ground truth reaches this
  /// (TorchCV's anchor.iou_threshold); each ground truth also takes its best anchor.
  double iou_threshold = 0.5;
  /// Hard negatives per positive: (1 − positive_fraction) / positive_fraction
  /// in torchvision (positive_fraction 0.25).
  double neg_pos_ratio = 3.0;
  /// Box-code weights (x, y, w, h).
  ops::BoxCoderWeights weights = {};
};

struct MultiBoxLosses {
  Tensor bbox_regression;   ///< 0-d: Σ smooth-L1 over matched anchors / max(1, matched)
  Tensor classification;    ///< 0-d: Σ cross-entropy over positives and hard negatives / same
  int64_t num_matched = 0;  ///< anchors matched to a ground truth, over the batch
  /// bbox_regression + classification: what training minimises.
  Tensor total() const;
};

/// The loss of head outputs loc (N, A, 4) and conf (N, A, C) against one
/// target per image, for default boxes `anchors` (A, 4) in pixels. Matching
/// and the hard-negative ranking run on loc's device; targets on the CPU are
/// checked first (finite boxes with positive width and height, labels in [1,
/// C)), and an invalid one is an error naming the image and the box.
MultiBoxLosses multibox_loss(const Tensor& loc, const Tensor& conf, const Tensor& anchors,
                             const std::vector<DetTarget>& targets,
                             const MultiBoxLossOptions& options = {});

}  // namespace tcv::models::det
