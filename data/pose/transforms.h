// Pose transforms: image, loss mask, keypoints and boxes move together, on u8
// (3, H, W) images in continuous pixel coordinates (data/pose/dataset.h), on
// the loader's threads. The training pipeline is TorchCV's OpenPose recipe
// (configs/pose/coco/openpose_vgg19_coco_pose.conf):
//
//   horizontal flip with the left/right keypoints swapped (p 0.5) ->
//   scale so the largest person's box fills `focus` of the crop, times a
//   factor in scale_range, with the aspect jittered (TorchCV's "focus"
//   RandomResize) -> rotation by up to max_degrees (p 0.5) -> a size x size
//   crop centred on the largest person, its centre jittered by up to
//   centre_jitter pixels, padded with `fill`
//
// The scale, rotation and crop are composed into one affine map and the image
// is resampled once (bilinear; the mask by nearest neighbour, padded with 1,
// so padding trains as background as in TorchCV). Keypoints that land outside
// the crop become unlabelled, as in TorchCV's and CMU's crops.
#pragma once

#include <array>
#include <cstdint>

#include "data/pose/dataset.h"

namespace tcv::data {

/// Mirrors image, mask, keypoints and boxes left to right (x -> W - x) and
/// swaps each left keypoint with its right one.
void pose_hflip(PoseSample& s);

/// A 2x3 affine map of continuous coordinates: (x, y) -> (m[0] x + m[1] y +
/// m[2], m[3] x + m[4] y + m[5]).
using Affine = std::array<double, 6>;

/// Resamples the sample onto a height x width canvas through `m` (input to
/// output coordinates): the image bilinearly with `fill` outside the input,
/// the mask by nearest neighbour with 1 outside; keypoints map through `m`
/// and become unlabelled outside [0, width) x [0, height); boxes become the
/// boxes around their mapped corners.
void pose_warp(PoseSample& s, const Affine& m, int64_t height, int64_t width,
               const std::array<uint8_t, 3>& fill);

/// Resizes image and mask to height x width (the image bilinearly, the mask by
/// nearest neighbour), scaling keypoints and boxes.
void pose_resize(PoseSample& s, int64_t height, int64_t width);

/// Where the training crop is centred.
enum class CropCentre {
  largest_person,  ///< the centre of the largest person's box (TorchCV's RandomFocusCrop)
  random_person,   ///< the centre of a person drawn uniformly (CMU's OpenPose)
};

struct PoseAugmentOptions {
  int64_t size = 368;  ///< output size x size
  double flip_p = 0.5;
  /// The largest person's longer box side over the crop size (TorchCV's 0.6;
  /// sides under a pixel count as one pixel); 0: the scale is drawn from
  /// scale_range alone.
  double focus = 0.6;
  std::array<double, 2> scale_range{0.5, 1.1};
  /// Width/height stretch: sqrt(a) and 1/sqrt(a) for a uniform in aspect_range.
  std::array<double, 2> aspect_range{0.9, 1.1};
  double rotate_p = 0.5;
  double max_degrees = 40.0;
  /// Integer pixels, uniform in [-centre_jitter, centre_jitter] per axis.
  int64_t centre_jitter = 20;
  CropCentre centre = CropCentre::largest_person;
  std::array<uint8_t, 3> fill{124, 116, 104};
};

/// The affine map of one training sample (scale, rotation, crop), drawn from
/// rng for an image of (height, width) with these people (after the flip).
Affine pose_train_affine(const std::vector<PosePerson>& people, int64_t height, int64_t width,
                         const PoseAugmentOptions& opts, Rng& rng);

/// The training pipeline above.
PoseTransform pose_train_transform(const PoseAugmentOptions& opts);

/// Evaluation: resize to size x size.
PoseTransform pose_eval_transform(int64_t size);

}  // namespace tcv::data
