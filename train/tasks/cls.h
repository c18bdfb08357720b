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

/// Cross-entropy against soft targets (mixup, label smoothing):
/// -(target * log_softmax(logits)).sum(1).mean(); logits and target (N, C).
Tensor soft_target_cross_entropy(const Tensor& logits, const Tensor& target);

}  // namespace tcv::train
