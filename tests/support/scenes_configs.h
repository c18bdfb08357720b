// Training configs on tiny generated scenes (data.dataset = "scenes", made
// in data.data_dir on first use) for detection, segmentation and pose: a few
// iterations take seconds. Tests set data.data_dir and solver.max_iters, and
// what else they vary, with overrides.
#pragma once

#include <sstream>
#include <string>

namespace tcv::testing {

/// How many scenes to generate and their size.
struct SceneSet {
  int train = 8;
  int size = 96;
};

/// A scenes config: what all three tasks share (CPU, one loader worker, 4
/// validation scenes of seed 3, ImageNet normalisation, batch 4, a log line
/// and a validation every iteration, base_lr 0.01), then `own`, which starts
/// in the [data] table.
inline std::string scenes_config(const char* task, SceneSet set, const char* own) {
  std::ostringstream s;
  s << "\ntask = \"" << task << "\"\ndevice = \"cpu\"\n"
    << "[solver]\ndisplay_iter = 1\ntest_interval = 1\n[solver.lr]\nbase_lr = 0.01\n"
    << "[train]\nbatch_size = 4\n"
    << "[data.normalize]\ndiv_value = 255.0\nmean = [0.485, 0.456, 0.406]\n"
    << "std = [0.229, 0.224, 0.225]\n"
    << "[data.scenes]\ntrain = " << set.train << "\nval = 4\nsize = " << set.size << "\nseed = 3\n"
    << "[data]\ndataset = \"scenes\"\nworkers = 1\n"
    << own;
  return s.str();
}

inline const std::string kScenesDet = scenes_config("det", {.train = 8, .size = 96}, R"(
num_classes = 11
[val]
batch_size = 4
[network]
model_name = "ssd300_lite"
)");

inline const std::string kScenesSeg = scenes_config("seg", {.train = 8, .size = 64}, R"(
num_classes = 11
[train.aug_trans.random_crop]
crop_size = [64, 64]
[val]
batch_size = 3
[network]
model_name = "pspnet_resnet18"
stride = 16
)");

inline const std::string kScenesPose = scenes_config("pose", {.train = 16, .size = 128}, R"(
[train.aug_trans.random_resize]
scale_range = [0.8, 1.2]
[train.aug_trans.random_focus_crop]
crop_size = [128, 128]
[test]
input_size = [128, 128]
[val]
batch_size = 3
[network]
model_name = "openpose_lite"
[res]
part_threshold = 0.02
limb_threshold = 0.0
limb_pos_ratio = 0.0
num_threshold = 1
avg_threshold = 0.0
[solver.optim]
optim_method = "adam"
)");

}  // namespace tcv::testing
