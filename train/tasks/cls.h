// Classification (task = "cls"): image datasets with one class per image
// (train/data_setup.h), any model of the registry, cross-entropy with label
// smoothing and mixup, top-1/top-5 accuracy (`best` by top-1), sample images
// with their predicted and true classes in the report, the top classes in
// tcv-predict.
//
// Its config keys: data.train_dir, data.val_dir, data.train_list,
// data.val_list, data.image_root, data.input_size, data.channels,
// train.mixup_alpha, train.aug.*, val.aug.*, loss.label_smoothing.
#pragma once

#include "train/task.h"

namespace tcv::train {

/// The classification task's registry entry.
TaskInfo cls_task_info();

/// train.aug.* (classification's training augmentation).
struct ClsTrainAug {
  int64_t resize_shorter = 0;  ///< 0 = off
  bool random_resized_crop = false;
  std::vector<double> rrc_scale, rrc_ratio;  ///< [low, high]
  bool random_crop = false;
  int64_t random_crop_padding = 0;
  double hflip = 0;                  ///< probability
  std::vector<double> color_jitter;  ///< [brightness, contrast, saturation, hue]
  /// Whether any of it is on.
  bool any() const;
};

/// Classification's own keys, parsed and checked (parse_cls_config).
struct ClsConfig {
  std::string train_dir, val_dir;                ///< image_folder
  std::string train_list, val_list, image_root;  ///< list
  std::vector<int64_t> input_size;               ///< [h, w]; empty: the data set's own
  int64_t channels = 0;                          ///< 0: the data set's own
  double mixup_alpha = 0;                        ///< 0 = off
  ClsTrainAug aug;
  int64_t val_resize_shorter = 0;  ///< val.aug.resize_shorter; 0 = off
  bool val_center_crop = false;    ///< val.aug.center_crop
  double label_smoothing = 0;
};

/// Reads and checks classification's keys (and data.dataset's choices for it);
/// errors name the key and where it was set.
ClsConfig parse_cls_config(const Config& cfg);

/// Cross-entropy against soft targets (mixup, label smoothing):
/// -(target * log_softmax(logits)).sum(1).mean(); logits and target (N, C).
Tensor soft_target_cross_entropy(const Tensor& logits, const Tensor& target);

}  // namespace tcv::train
