// Training configs on tiny generated scenes (data.dataset = "scenes", made
// in data.data_dir on first use) for detection, segmentation and pose: a few
// iterations take seconds. Tests set data.data_dir and solver.max_iters, and
// what else they vary, with overrides.
#pragma once

namespace tcv::testing {

inline constexpr const char* kScenesDet = R"(
task = "det"
device = "cpu"
[data]
dataset = "scenes"
num_classes = 11
workers = 1
[data.scenes]
train = 8
val = 4
size = 96
seed = 3
[data.normalize]
div_value = 255.0
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
[train]
batch_size = 4
[val]
batch_size = 4
[network]
model_name = "ssd300_lite"
[solver]
display_iter = 1
test_interval = 1
[solver.lr]
base_lr = 0.01
)";

inline constexpr const char* kScenesSeg = R"(
task = "seg"
device = "cpu"
[data]
dataset = "scenes"
num_classes = 11
workers = 1
[data.scenes]
train = 8
val = 4
size = 64
seed = 3
[data.normalize]
div_value = 255.0
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
[train]
batch_size = 4
[train.aug_trans.random_crop]
crop_size = [64, 64]
[val]
batch_size = 3
[network]
model_name = "pspnet_resnet18"
stride = 16
[solver]
display_iter = 1
test_interval = 1
[solver.lr]
base_lr = 0.01
)";

inline constexpr const char* kScenesPose = R"(
task = "pose"
device = "cpu"
[data]
dataset = "scenes"
workers = 1
[data.scenes]
train = 16
val = 4
size = 128
seed = 3
[data.normalize]
div_value = 255.0
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
[train]
batch_size = 4
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
[solver]
display_iter = 1
test_interval = 1
[solver.lr]
base_lr = 0.01
[solver.optim]
optim_method = "adam"
)";

}  // namespace tcv::testing
