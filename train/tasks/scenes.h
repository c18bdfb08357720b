// The generated scenes a detection or segmentation config trains on when
// data.dataset = "scenes": a data set drawn from Fashion-MNIST items
// (data/det/scenes.h), made on first use in data.data_dir and reused after,
// so a fresh machine trains without a download.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"

namespace tcv::train {

/// The keys both tasks read for it: data.scenes.train, .val, .size, .seed.
std::vector<KeySpec> scene_keys();

/// Checks them.
void validate_scene_keys(const Config& cfg);

/// The scene tree of the config: data.data_dir, written there first when it is
/// missing (what `tcv-data scenes --out DIR --train N --val N --size S --seed X`
/// writes, plus scenes.json naming those options). A tree made with other
/// options (its scenes.json) is an error naming data.data_dir; a tree without
/// scenes.json (written by tcv-data) is taken as it is. Several processes may
/// call it at once: each writes to its own temporary directory and the first
/// rename wins.
std::string ensure_scenes(const Config& cfg);

}  // namespace tcv::train
