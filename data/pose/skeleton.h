// The keypoint layouts of person pose estimation: COCO's 17 keypoints (what
// annotation files hold) and OpenPose's 18 (COCO's plus the neck, in CMU's
// order), which the heatmap and part-affinity-field targets are laid out in,
// with the 19 limbs of OpenPose's COCO skeleton (TorchCV's
// configs/pose/coco/openpose_vgg19_coco_pose.conf, details.limb_seq and
// mini_tree).
//
// The one copy of these tables: the targets here and the parsing of a model's
// maps into people (models/pose/parse.h) both follow them. models/ may not
// include data/ nor data/ models/ (DESIGN.md's arrows), and engine/ knows
// nothing of data sets, so the parsing takes them as a PoseSkeleton that its
// caller (train/tasks/pose.cpp) builds from these functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tcv::data {

inline constexpr int64_t kCocoKeypoints = 17;
inline constexpr int64_t kOpenposeKeypoints = 18;
inline constexpr int64_t kOpenposeLimbs = 19;
/// Heatmap channels: one per OpenPose keypoint, then the background.
inline constexpr int64_t kOpenposeHeatmaps = kOpenposeKeypoints + 1;
/// Part-affinity-field channels: (x, y) per limb.
inline constexpr int64_t kOpenposePafs = 2 * kOpenposeLimbs;

/// COCO's keypoint names in annotation order: nose, left_eye, right_eye,
/// left_ear, right_ear, left_shoulder, right_shoulder, left_elbow, right_elbow,
/// left_wrist, right_wrist, left_hip, right_hip, left_knee, right_knee,
/// left_ankle, right_ankle.
const std::array<std::string, kCocoKeypoints>& coco_keypoint_names();

/// OpenPose's order: nose, neck, r_shoulder, r_elbow, r_wrist, l_shoulder,
/// l_elbow, l_wrist, r_hip, r_knee, r_ankle, l_hip, l_knee, l_ankle, r_eye,
/// l_eye, r_ear, l_ear.
const std::array<std::string, kOpenposeKeypoints>& openpose_keypoint_names();

/// The OpenPose index of COCO keypoint k (TorchCV's coco_to_ours).
const std::array<int, kCocoKeypoints>& coco_to_openpose();

/// The COCO index of OpenPose keypoint k; -1 for the neck, which COCO lacks.
const std::array<int, kOpenposeKeypoints>& openpose_to_coco();

/// OpenPose keypoint of the neck: the midpoint of the shoulders.
inline constexpr int kOpenposeNeck = 1;

/// The 19 limbs as pairs of 0-based OpenPose keypoints (from, to); limb l owns
/// PAF channels 2l (x) and 2l + 1 (y), pointing from `from` to `to`.
const std::array<std::array<int, 2>, kOpenposeLimbs>& openpose_limbs();

/// The order the limbs are joined into people when parsing a model's maps
/// (TorchCV's mini_tree): a walk of the skeleton from the neck outwards.
const std::array<int, kOpenposeLimbs>& openpose_limb_order();

/// COCO keypoints that trade places in a horizontal flip (left <-> right), 0-based.
const std::array<std::array<int, 2>, 8>& coco_flip_pairs();

/// COCO's own skeleton (the "skeleton" of the person category), 1-based, as
/// annotation files write it.
const std::array<std::array<int, 2>, 19>& coco_skeleton();

}  // namespace tcv::data
