// The segmentation loss: cross-entropy (or TorchCV's OHEM cross-entropy) on the
// main output plus a weighted cross-entropy on the auxiliary one, as TorchCV's
// FSAuxCELoss and FSAuxOhemCELoss, with ignore_index 255 and optional class
// weights. Both outputs are at the target's size (SegmentationModel upsamples
// them), so no target is resized.
#pragma once

#include "engine/ops/loss.h"
#include "models/seg/segmentation.h"

namespace tcv::models::seg {

/// What the main output's loss is (TorchCV's loss_type).
enum class SegLossKind : uint8_t {
  /// Cross-entropy: TorchCV's fs_auxce_loss.
  ce,
  /// OHEM cross-entropy on the main output, plain on the auxiliary one:
  /// TorchCV's fs_auxohemce_loss.
  ohem_ce,
};

/// TorchCV's loss keys in brackets.
struct SegLossOptions {
  SegLossKind kind = SegLossKind::ce;
  /// Pixels with this label count nowhere (ce_ignore_index).
  int64_t ignore_index = 255;
  /// Weight of the main output's loss (loss_weights.seg_loss).
  double seg_weight = 1.0;
  /// Weight of the auxiliary output's loss (loss_weights.aux_loss).
  double aux_weight = 0.4;
  /// Class weights (C), or undefined for none (ce_weight). A mean over pixels
  /// then divides by the sum of their weights, as torch's weighted
  /// cross-entropy; OHEM's mean divides by the kept pixels' count, as TorchCV.
  Tensor class_weight = {};
  /// OHEM: probability threshold (ohem_thresh) and minimum kept pixels (ohem_minkeep).
  double ohem_thresh = 0.7;
  int64_t ohem_min_kept = 100000;
};

/// The total and its parts (each a 0-d tensor; aux undefined without an aux output).
struct SegLossTerms {
  Tensor total;  ///< seg_weight·main + aux_weight·aux, what backward starts from
  Tensor main;
  Tensor aux;
};

/// The loss of a SegmentationModel's outputs against class-index targets
/// (N, H, W) i64 (values in [0, C) or ignore_index) on the outputs' device.
SegLossTerms seg_loss(const SegOutput& out, const Tensor& target, const SegLossOptions& opts = {});

}  // namespace tcv::models::seg
