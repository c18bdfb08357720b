// The generated scenes a detection, segmentation or pose config trains on when
// data.dataset = "scenes": a data set drawn from Fashion-MNIST items
// (data/det/scenes.h) or of stick-figure people (data/pose/scenes.h), made on
// first use in data.data_dir and reused after, so a fresh machine trains
// without a download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace tcv::train {

/// What a scene tree holds.
enum class SceneKind : uint8_t {
  objects,  ///< Fashion-MNIST items: VOC tree and COCO instances (det, seg)
  people,   ///< stick figures: images/ and COCO person keypoints (pose)
};

/// The keys the tasks read for it: data.scenes.train, .val, .size, .seed.
std::vector<KeySpec> scene_keys();

/// The pose task's keys of its people: data.scenes.min_people, .max_people,
/// .min_height, .max_height (data/pose/scenes.h's options).
std::vector<KeySpec> people_scene_keys();

/// data.scenes.*, parsed and checked.
struct SceneConfig {
  SceneKind kind = SceneKind::objects;
  int64_t train = 0, val = 0, size = 0;
  uint64_t seed = 0;
  /// People only.
  int64_t min_people = 0, max_people = 0;
  double min_height = 0, max_height = 0;
};

/// Reads and checks data.scenes.* of `kind` (the people's keys for people), and
/// that data.data_dir is set with data.dataset "scenes".
SceneConfig parse_scene_config(const Config& cfg, SceneKind kind = SceneKind::objects);

/// The scene tree of the config: data.data_dir (`scenes` parsed from it), written there first when
/// it is missing (what `tcv-data scenes --out DIR --train N --val N --size S --seed X` writes, or
/// `tcv-data pose-scenes ...` for people, plus scenes.json naming those options, with "kind":
/// "people" for people). A tree made with other options or of the other kind (its scenes.json) is
/// an error naming data.data_dir; a tree without scenes.json (written by tcv-data: classes.txt, or
/// annotations/person_keypoints_train.json for people) is taken as it is. Several processes may
/// call it at once: each writes to its own temporary directory and the first rename wins.
std::string ensure_scenes(const Config& cfg, const SceneConfig& scenes);

}  // namespace tcv::train
