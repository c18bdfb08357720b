// Segmentation metrics from a confusion matrix: per-class IoU, mIoU, pixel
// accuracy, per-class and mean class accuracy, as mmsegmentation computes them
// (mmseg/core/evaluation/metrics.py):
//
//   counts[t][p]     pixels of ground-truth class t predicted as p (ignored pixels left out)
//   IoU_c            = counts[c][c] / (Σ_p counts[c][p] + Σ_t counts[t][c] − counts[c][c])
//   Acc_c            = counts[c][c] / Σ_p counts[c][p]
//   mIoU, mAcc       = the mean over classes whose value is a number
//   aAcc (pixel acc) = Σ_c counts[c][c] / Σ counts
//
// A class absent from both ground truth and prediction has IoU 0/0 = NaN and
// is left out of mIoU (mmsegmentation's nanmean); a class predicted but absent
// from the ground truth has IoU 0 and counts; Acc_c is NaN whenever the class
// is absent from the ground truth. With no class defined at all, mIoU and
// mAcc are NaN; with no pixel, pixel accuracy is NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace tcv::train {

struct SegMetrics {
  double miou = 0;          ///< mean IoU over the classes with a defined IoU
  double pixel_acc = 0;     ///< correctly labelled pixels / counted pixels (aAcc)
  double mean_acc = 0;      ///< mean class accuracy over the classes present in the ground truth
  std::vector<double> iou;  ///< per class, NaN when absent from ground truth and prediction
  std::vector<double> acc;  ///< per class, NaN when absent from the ground truth
  int64_t pixels = 0;       ///< counted (not ignored) pixels
};

/// The metrics of a row-major (C, C) matrix of counts (row = ground truth).
SegMetrics seg_metrics(const std::vector<int64_t>& counts, int64_t num_classes);

/// Accumulates a confusion matrix over batches on the device of the logits
/// (ops::confusion_matrix_add_: no copy to the host per batch beyond the
/// kernel's check), and finishes into SegMetrics. The counts of other ranks
/// come in through add_counts (they are plain i64, summed).
class ConfusionMeter {
 public:
  explicit ConfusionMeter(int64_t num_classes, int64_t ignore_index = 255);

  /// Adds a batch: logits (N, C, H, W) (argmax taken on the device) or i64
  /// labels (N, H, W), and i64 targets (N, H, W) on the same device.
  void update(const Tensor& pred, const Tensor& target);
  /// The (C, C) counts so far, row-major, on the host.
  std::vector<int64_t> counts() const;
  /// Adds counts made elsewhere (another rank's), C·C values row-major.
  void add_counts(const std::vector<int64_t>& counts);
  void reset();
  SegMetrics compute() const;

  int64_t num_classes() const { return num_classes_; }
  int64_t ignore_index() const { return ignore_index_; }

 private:
  int64_t num_classes_, ignore_index_;
  Tensor device_counts_;              ///< (C, C) i64 on the device of the first update
  std::vector<int64_t> host_counts_;  ///< what add_counts brought in
};

}  // namespace tcv::train
