// Scenes of people for pose estimation that need no download: articulated
// stick figures with COCO's 17 keypoints over the textured backgrounds of the
// detection scenes (data/det/scenes.h), keypoints known exactly.
//
// A figure is a skeleton in a random pose (torso lean, arm and leg angles,
// elbow and knee bends), facing the camera or away from it, at a random
// height and place: limbs are thick capsules textured with stripes and noise
// (shirt colour on the torso and arms, trousers on the legs), the head a disc
// with eyes and a nose when the figure faces the camera (its left then lies on
// the image's right) and plain hair when it faces away (nose and eyes then
// unlabelled, as COCO's annotators leave them). Figures drawn later occlude
// earlier ones; a figure is only placed where every earlier one keeps
// `min_visible` of its pixels. Occluders (textured rectangles) may be drawn
// over everything, and a crowd of tiny figures may stand behind.
//
// What each keypoint is: v = 2 when the pixel under it belongs to its figure
// in the final image, 1 when something else covers it, 0 outside the image (and
// for the face of a figure seen from behind). A figure's segmentation is its
// visible pixels (RLE), its area their count, its box their tight box. A
// crowd is one iscrowd annotation whose region is the box around its figures.
//
// Everything comes from the scene's Rng, so a scene depends on (seed, index) only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/pose/coco.h"

namespace tcv::data {

struct PoseSceneOptions {
  int64_t width = 256, height = 256;
  /// Figures tried per scene: uniform in [min_people, max_people].
  int64_t min_people = 1, max_people = 4;
  /// A figure's height (ankle to head top, standing) as a fraction of the
  /// image's shorter side.
  double min_height = 0.4, max_height = 0.95;
  /// Limb thickness as a fraction of the figure's height.
  double min_thickness = 0.05, max_thickness = 0.08;
  double min_visible = 0.5;
  /// Probability of facing away from the camera.
  double back_p = 0.35;
  /// Occluders per scene: uniform in [0, max_occluders].
  int64_t max_occluders = 1;
  /// Probability of a crowd of tiny figures behind the others.
  double crowd_p = 0.1;
  int noise = 12;
  int tries = 12;
};

/// One drawn scene: the image and its annotations (keypoints in continuous
/// coordinates; ids and image ids left 0).
struct PoseScene {
  Tensor image;  ///< u8 (3, H, W)
  std::vector<CocoPersonAnnotation> people;
};

/// Draws one scene from rng.
PoseScene render_pose_scene(const PoseSceneOptions& opts, Rng& rng);

struct PoseSceneSetOptions {
  PoseSceneOptions scene{};
  int64_t train = 2000, val = 200;
  uint64_t seed = 0;
  int jpeg_quality = 95;
};

struct PoseSceneSetSummary {
  int64_t images = 0, people = 0, labelled = 0, visible = 0, crowds = 0;
};

/// Writes a scene set under `out_dir` (created if needed): images/<id>.jpg and
/// annotations/person_keypoints_{train,val}.json (COCO keypoint files; image id
/// = the number in <id>, train first). Scene i is drawn from Rng(seed, i). Runs
/// on OpenMP's threads; the files do not depend on their number.
PoseSceneSetSummary write_pose_scene_set(const PoseSceneSetOptions& opts,
                                         const std::string& out_dir);

}  // namespace tcv::data
