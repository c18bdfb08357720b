// Box kernels for detection: pairwise IoU, greedy non-maximum suppression,
// SSD's anchor matching, and the L2 normalisation over channels that SSD
// applies to conv4_3. Boxes are (N, 4) rows [x1, y1, x2, y2], f32 or f64.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// out (N, M) = IoU of every pair of a (N, 4) and b (M, 4), as
/// torchvision.ops.box_iou computes it in the boxes' dtype: areas
/// (x2 − x1)(y2 − y1), intersection sides clamped at 0, inter / (area_a + area_b
/// − inter). Contiguous operands.
void box_iou(const KTensor& out, const KTensor& a, const KTensor& b);

/// Greedy NMS, the keep list of torchvision.ops.nms: boxes are visited in
/// decreasing score order and a box is dropped when its IoU with a box kept
/// before it exceeds `iou_threshold`. Writes the kept indices (i64) to the
/// front of `keep` (n entries) and their number to *kept. Scores are sorted as
/// torchvision sorts them (stable, descending, NaN first: tied boxes in index
/// order), so the keep list equals torchvision's element for element. The suppression
/// pass compares a kept box only with the boxes of spatial leaves (64 boxes,
/// sorted by x then y) its box can overlap, in vectorized rows.
void nms(const KTensor& keep, const KTensor& boxes, const KTensor& scores, double iou_threshold,
         int64_t* kept);

/// torchvision's SSDMatcher on iou (M ground truths, A anchors): matches (A) i64
/// is the best ground truth of each anchor (first of equal maxima) when its IoU
/// is >= threshold, else -1; then each ground truth g, in order, takes its own
/// best anchor (first of equal maxima): matches[best(g)] = g.
void ssd_match(const KTensor& matches, const KTensor& iou, double threshold);

/// y = x / max(‖x‖₂, eps) over c of a contiguous (outer, c, inner) x; norm
/// (outer, inner) receives ‖x‖₂ for the backward.
void l2_normalize(const KTensor& y, const KTensor& norm, const KTensor& x, int64_t outer, int64_t c,
                  int64_t inner, double eps);

/// dx from dy, y and norm of l2_normalize: (dy − y·Σ_c dy·y) / ‖x‖ where
/// ‖x‖ > eps, dy / eps where the norm was clamped.
void l2_normalize_backward(const KTensor& dx, const KTensor& dy, const KTensor& y,
                           const KTensor& norm, int64_t outer, int64_t c, int64_t inner,
                           double eps);

}  // namespace tcv::kernels::cpu
