// OpenPose's training targets at the network's output stride, made on the
// loader threads: keypoint heatmaps, part-affinity fields (PAFs) and the loss
// mask. Formulas follow TorchCV (data/pose/utils/heatmap_generator.py,
// paf_generator.py), with two choices made explicit:
//
//   Output cell (i, j) (row i, column j) of an H x W input at stride s stands
//   for the point ((j + 0.5) s, (i + 0.5) s) in continuous coordinates; the
//   output is (H / s) x (W / s) (integer division). TorchCV's heatmaps use
//   these points; its PAFs use (j s, i s) in pixel-index coordinates, a shift
//   of (s - 1) / (2 s) cells against its own heatmaps; here both use the
//   cell centres.
//
//   Heatmap k (an OpenPose keypoint, data/pose/skeleton.h) is the maximum over
//   the people with keypoint k labelled of exp(-d^2 / (2 sigma^2)), set to 0
//   where the exponent exceeds 4.6052 (values below 0.01), as CMU's OpenPose
//   (TorchCV adds the people's peaks and clips at 1). The last channel is the
//   background: 1 - the maximum of the keypoint channels.
//
//   PAF l (limb from keypoint a to b, both labelled, at distinct points) is
//   the unit vector u = (b - a) / |b - a| on the cells c whose distance from
//   the line through a and b, |u x (c - a)|, is below limb_width, within the
//   box [round(min(a, b) - limb_width), round(max(a, b) + limb_width)) (cell
//   units, rounding half to even, clipped to the output); where several
//   people's limbs cover a cell, the mean of their vectors.
//
//   The neck (OpenPose's keypoint 1) is the person's PosePerson::neck: the
//   midpoint of the shoulders when the sample was loaded, before the
//   augmentations (TorchCV's order), moved with the sample; for a person
//   without one, the midpoint of the shoulders, labelled when both are
//   (visible when both are).
//
//   The loss mask at cell (i, j) is the full-resolution mask's value at pixel
//   (j s + s / 2, i s + s / 2), the nearest-neighbour resize TorchCV makes.
//   Targets are not multiplied by the mask: a loss weighs (prediction -
//   target)^2 by it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "data/pose/dataset.h"

namespace tcv::data {

struct PoseTargetOptions {
  int64_t stride = 8;
  /// Heatmap Gaussian's standard deviation in input pixels (TorchCV's target.heatmap.sigma).
  double sigma = 7.0;
  /// A limb's half-width in output cells (TorchCV's target.paf.theta).
  double limb_width = 1.0;
};

/// A person's keypoints in OpenPose's 18-point order, neck included.
std::array<Keypoint, kOpenposeKeypoints> openpose_keypoints(const PosePerson& p);

/// The targets of one image, written to caller memory (contiguous, row-major):
/// heatmaps (19, h, w), pafs (38, h, w), mask (h, w) in {0, 1}, with
/// h = height / stride, w = width / stride. `mask` is the u8 (height, width)
/// loss mask (data/pose/dataset.h) or undefined (everything counts).
void make_pose_targets(const std::vector<PosePerson>& people, const Tensor& mask, int64_t height,
                       int64_t width, const PoseTargetOptions& opts, float* heatmaps, float* pafs,
                       float* mask_out);

/// The same as tensors.
struct PoseTargets {
  Tensor heatmaps;  ///< f32 (19, h, w)
  Tensor pafs;      ///< f32 (38, h, w)
  Tensor mask;      ///< f32 (1, h, w)
};
PoseTargets make_pose_targets(const std::vector<PosePerson>& people, const Tensor& mask,
                              int64_t height, int64_t width, const PoseTargetOptions& opts);

/// Checks the options (stride >= 1, sigma and limb_width positive and finite).
void check_pose_target_options(const PoseTargetOptions& opts);

}  // namespace tcv::data
