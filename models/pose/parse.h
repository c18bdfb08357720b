// Multi-person pose parsing for OpenPose's outputs, as TorchCV's OpenPoseTest
// (runner/pose/open_pose_test.py) does it:
//
//   1. the last stage's heatmaps and PAFs are upsampled by the stride, cropped to
//      the unpadded input and resized to the image, averaged over the scales
//      (multi-scale testing);
//   2. peaks: each keypoint's heatmap smoothed with a Gaussian (σ 3), peaks where
//      the smoothed map exceeds part_threshold and its 3x3 neighbours (the dense
//      ops of engine/ops/pose.h, on the maps' device); a peak's score is the
//      unsmoothed map there;
//   3. limbs: each pair of candidate keypoints of a limb scored by the line
//      integral of the limb's PAF along the segment (mid_points samples at the
//      nearest pixels), plus a length prior min(0.5·H/length − 1, 0); kept when
//      more than limb_pos_ratio of the samples exceed limb_threshold and the
//      score is positive; then greedy bipartite matching by score;
//   4. people: the limbs joined in TorchCV's order into subsets that share
//      keypoints (merging two subsets that a limb links and that share none);
//      people with fewer than min_parts keypoints or a mean score below
//      min_mean_score are dropped.
//
// The keypoints and limbs come from the caller as a PoseSkeleton: OpenPose's
// COCO one (18 keypoints, COCO's 17 plus the neck, and TorchCV's 19 limbs,
// limb k's PAF in channels 2k (x) and 2k + 1 (y)) is data/pose/skeleton.h's,
// the layout the data pipeline draws its targets in. models/ may not include
// data/ (DESIGN.md's arrows), so that one table is passed in rather than
// copied here. Steps 3 and 4 run on the host.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor.h"
#include "models/pose/openpose.h"

namespace tcv::models::pose {

/// The keypoints and limbs the maps are laid out in. For OpenPose on COCO:
///
///   PoseSkeleton{data::kOpenposeKeypoints, data::openpose_limbs(),
///                data::openpose_limb_order(), data::coco_to_openpose()}
///
/// (data/pose/skeleton.h; the spans view those static tables).
struct PoseSkeleton {
  /// Keypoints, one heatmap channel each (OpenPose: 18).
  int64_t keypoints = 0;
  /// (from, to) keypoints of each limb; limb l's PAF is in channels 2l (x) and 2l + 1 (y).
  std::span<const std::array<int, 2>> limbs;
  /// The order limbs are joined into people (TorchCV's mini_tree).
  std::span<const int> limb_order;
  /// COCO keypoint c is keypoint coco_to_ours[c] (TorchCV's coco_to_ours).
  std::span<const int> coco_to_ours;
};

/// TorchCV's res.* and test.* keys in brackets.
struct PoseParseOptions {
  /// Gaussian smoothing of the heatmaps before peak finding (TorchCV: 3).
  double sigma = 3.0;
  /// A peak's smoothed value must exceed this (part_threshold).
  double part_threshold = 0.1;
  /// A PAF sample supports a limb above this (limb_threshold).
  double limb_threshold = 0.05;
  /// Samples along a candidate limb (mid_point_num).
  int64_t mid_points = 10;
  /// More than this fraction of the samples must support the limb (limb_pos_ratio).
  double limb_pos_ratio = 0.8;
  /// A person needs at least this many keypoints (num_threshold).
  int64_t min_parts = 3;
  /// ... and a total score per keypoint of at least this (avg_threshold).
  double min_mean_score = 0.2;
};

/// A keypoint candidate: a peak of one heatmap.
struct Peak {
  double x = 0, y = 0;  ///< pixel coordinates in the maps
  double score = 0;     ///< the heatmap (unsmoothed) at the peak
  int64_t id = 0;       ///< index over all keypoints' peaks, keypoint by keypoint
};

/// A keypoint of a person.
struct PoseKeypoint {
  double x = 0, y = 0;  ///< pixel coordinates in the maps
  double score = 0;     ///< its peak's score
  bool found = false;   ///< false where the person has no peak for this keypoint
};

/// One person: per keypoint the peak it uses (or none).
struct PersonPose {
  /// One entry per keypoint of the skeleton, in its order.
  std::vector<PoseKeypoint> keypoints;
  /// Sum of its peaks' scores and its limbs' scores (TorchCV's subset[-2]).
  double score = 0;
  int64_t parts = 0;  ///< keypoints found
};

/// Step 2: the peaks of each keypoint's map in heatmaps (K, H, W), f32 or f64,
/// on any device: smoothed and suppressed there, collected on the host in
/// row-major order (y, then x), as np.nonzero orders them.
std::vector<std::vector<Peak>> find_peaks(const Tensor& heatmaps, double sigma, double threshold);

/// Steps 3 and 4 on the image-sized PAFs (2 · limbs, H, W) and the peaks of the
/// skeleton's keypoints: the people, in the order TorchCV's subsets form.
std::vector<PersonPose> assemble_people(const Tensor& pafs,
                                        const std::vector<std::vector<Peak>>& peaks,
                                        const PoseSkeleton& skeleton,
                                        const PoseParseOptions& opts = {});

/// Steps 2 to 4: heatmaps (≥ keypoints, H, W) (a background channel after the
/// keypoints is not read) and PAFs (2 · limbs, H, W) at the image's size.
std::vector<PersonPose> parse_poses(const Tensor& heatmaps, const Tensor& pafs,
                                    const PoseSkeleton& skeleton,
                                    const PoseParseOptions& opts = {});

/// Image-sized maps.
struct PoseMaps {
  Tensor heatmaps;  ///< (C, H, W)
  Tensor pafs;      ///< (P, H, W)
};

/// Multi-scale options (TorchCV's test.scale_search and fit_stride).
struct MultiScaleOptions {
  /// Each scale resizes the image to scale · base_height rows (keeping the
  /// aspect ratio); TorchCV searches {0.5, 1, 1.5, 2, 2.5} at base 368. Empty
  /// means one pass at the image's own size.
  std::vector<double> scales{};
  int64_t base_height = 368;
};

/// Step 1: runs `model` (in eval mode, without gradients) on image (1, 3, H,
/// W) at every scale, each resized bilinearly, padded right and bottom to a
/// multiple of the stride, the last stage's maps upsampled by the stride
/// (bilinear; TorchCV's cv2 uses bicubic), cropped to the unpadded size and
/// resized to (H, W); returns the average over scales.
PoseMaps infer_maps(OpenPose& model, const Tensor& image, const MultiScaleOptions& opts = {});

/// A person in COCO's keypoint layout (the skeleton's coco_to_ours): (x, y, 1)
/// for each keypoint found, (0, 0, 0) where missing, coordinates multiplied by
/// `scale`.
std::vector<double> to_coco_keypoints(const PersonPose& p, const PoseSkeleton& skeleton,
                                      double scale = 1.0);

}  // namespace tcv::models::pose
