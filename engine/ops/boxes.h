// Detection ops on boxes [x1, y1, x2, y2]: pairwise IoU, non-maximum
// suppression, SSD's anchor matching, box encoding/decoding relative to
// anchors, and L2 normalisation over a dim (SSD's conv4_3).
#pragma once

#include <cmath>

#include "engine/tensor.h"

namespace tcv::ops {

/// IoU of every pair of a (N, 4) and b (M, 4) boxes: (N, M), in their dtype (f32
/// or f64), as torchvision.ops.box_iou. Not differentiable.
Tensor box_iou(const Tensor& a, const Tensor& b);

/// Greedy non-maximum suppression, as torchvision.ops.nms: the i64 indices of
/// the kept boxes in decreasing score order. A box is dropped when its IoU with
/// a kept box of higher score exceeds `iou_threshold`. boxes (N, 4), scores
/// (N), same dtype and device. Tied scores are visited in index order (a
/// stable sort, as torchvision's); the keep list equals torchvision's exactly,
/// on the CPU and on CUDA.
Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold);

/// NMS within each category of `idxs` (N, integer), kept indices in
/// decreasing score order, as torchvision's batched_nms on the CPU (on every
/// device here, so that CUDA and the CPU agree): up to 1,000 boxes by its
/// coordinate trick (boxes shifted by
/// idx · (max coordinate + 1), so boxes of different categories never
/// overlap; one NMS), above that one NMS per category (the shifted
/// coordinates grow with the categories and round IoUs near the threshold in
/// f32), the kept indices sorted by score (stable: ties by index).
Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs,
                   double iou_threshold);

/// torchvision's SSDMatcher on iou (M ground truths, A anchors): (A) i64, the
/// ground truth each anchor is matched to or -1. An anchor takes its best ground
/// truth when that IoU is >= threshold; then every ground truth, in order,
/// takes its own best anchor whatever the IoU.
Tensor ssd_match(const Tensor& iou, double threshold);

/// The weights torchvision's BoxCoder scales the (dx, dy, dw, dh) codes by;
/// SSD uses (10, 10, 5, 5).
struct BoxCoderWeights {
  double x = 10.0;
  double y = 10.0;
  double w = 5.0;
  double h = 5.0;
};

/// Codes of `boxes` relative to `anchors` (both (K, 4)), as torchvision's
/// encode_boxes: (wx·(cx − acx)/aw, wy·(cy − acy)/ah, ww·log(w/aw), wh·log(h/ah)).
/// Differentiable (composed of elementwise ops).
Tensor encode_boxes(const Tensor& boxes, const Tensor& anchors,
                    const BoxCoderWeights& weights = {});

/// The boxes that `codes` (K, 4) describe relative to `anchors` (K, 4), as
/// torchvision's BoxCoder.decode_single: dw and dh are clamped at `clip` (log
/// 1000/16 by default) before exp. Differentiable in codes and anchors.
Tensor decode_boxes(const Tensor& codes, const Tensor& anchors, const BoxCoderWeights& weights = {},
                    double clip = std::log(1000.0 / 16.0));

/// x / max(‖x‖₂, eps) along `dim`, as torch.nn.functional.normalize(x, 2, dim,
/// eps), with its gradient (the norm gets none where it was clamped to eps).
Tensor l2_normalize(const Tensor& x, int64_t dim = 1, double eps = 1e-12);

}  // namespace tcv::ops
