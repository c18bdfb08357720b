// COCO person keypoints: person_keypoints_*.json files (read and written with
// nlohmann-json), the choice of the people a pose network trains on, and the
// data set of their images.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "data/det/coco.h"
#include "data/pose/dataset.h"

namespace tcv::data {

/// One entry of "annotations" of a keypoint file.
struct CocoPersonAnnotation {
  int64_t id = 0, image_id = 0, category_id = 1;
  /// [x, y, w, h] in pixels; from the labelled keypoints when absent.
  std::array<double, 4> bbox{};
  double area = 0;
  bool iscrowd = false;
  /// COCO's num_keypoints: how many keypoints are labelled (v > 0).
  int64_t num_keypoints = 0;
  /// In continuous coordinates: the file's values plus 0.5 (see data/pose/dataset.h).
  std::array<Keypoint, kCocoKeypoints> keypoints{};
  Segmentation segmentation;
};

/// The parts of a keypoint file that pose estimation uses.
struct CocoKeypointFile {
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;
  std::vector<CocoPersonAnnotation> annotations;
};

/// Parses a person keypoints file's JSON; `name` (the file) appears in errors.
/// Errors name the entry and key: JSON that does not parse (with its byte
/// offset), a missing "images" or "categories" array, a missing or mistyped
/// key, a repeated image or category id, an annotation of an unknown image or
/// category, "keypoints" that are not 17 (x, y, v) triples of finite numbers
/// with v in {0, 1, 2} (crowd regions may leave them out), a "num_keypoints"
/// that differs from the count of labelled keypoints, a bbox that is not four
/// finite numbers with a non-negative size, and a "segmentation" that is
/// neither a list of polygons (each an even number, at least 6, of finite
/// numbers) nor a run-length mask {"counts": [...] or "...", "size": [h, w]}
/// whose runs cover its h x w pixels exactly (sums checked for overflow), an
/// integer above 2^63 - 1.
CocoKeypointFile parse_coco_keypoints(const std::string& json, const std::string& name);

/// The file as COCO JSON (keypoints written as pixel indices: minus 0.5; the
/// category "person" gets COCO's keypoint names and skeleton).
std::string format_coco_keypoints(const CocoKeypointFile& f);

/// Which people of an image are trained on, as TorchCV's and CMU's COCO
/// preprocessing choose them (data/pose/preprocess/coco/coco_pose_generator.py):
/// crowd regions and people with fewer than `min_keypoints` labelled keypoints
/// or an area below `min_area` are left out of the loss; so is a person whose
/// box centre lies within `min_centre_distance` times the longer box side of
/// an earlier trained person from that person's centre.
struct PoseSelection {
  int64_t min_keypoints = 5;
  double min_area = 32.0 * 32.0;
  double min_centre_distance = 0.3;
};

/// The record of one image from its annotations (in file order), split by `sel`.
PoseRecord pose_record(const CocoImage& image, const std::vector<const CocoPersonAnnotation*>& anns,
                       const PoseSelection& sel);

struct PoseCocoOptions {
  std::string annotation_file{};  ///< e.g. annotations/person_keypoints_train2017.json
  std::string image_dir{};        ///< where each image's file_name is found
  PoseSelection selection{};
  /// Images without a trained person: kept (evaluation) or left out (training,
  /// as TorchCV's preprocessing does).
  EmptyImages empty_images = EmptyImages::keep;
  OnCorrupt on_corrupt = OnCorrupt::error;
  /// Images above limits.max_pixels are refused when loaded.
  ImageLimits limits{};
};

/// Reads a COCO keypoint data set. Errors (or, with OnCorrupt::skip, images
/// left out and counted) name the file: a missing image, a bbox (of any
/// annotation) or a keypoint of a trained person more than one pixel outside
/// its image.
PoseDataset read_coco_keypoints(const PoseCocoOptions& opts);

}  // namespace tcv::data
