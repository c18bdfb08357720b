// Multi-person pose estimation (task = "pose"): OpenPose and openpose_lite
// (models/pose) on COCO person keypoints or generated stick-figure scenes
// (data/pose), TorchCV's OpenPose augmentations (flip with left/right swap,
// focus resize, rotation, crop around a person), heatmap and part-affinity-
// field targets at stride 8 with the loss mask, the staged masked L2 loss,
// inference by peak finding and PAF assembly (models/pose/parse.h) into COCO
// keypoint AP/AR (`best` by ap, every rank's detections combined), skeletons
// drawn in the report and by tcv-predict, which also writes the people in
// COCO's results format.
//
// Its config keys (TorchCV's names where it has them):
//   data.train_ann, data.val_ann,        COCO person_keypoints files and image
//   data.train_images, data.val_images     directories under data.data_dir
//   data.scenes.*                        generated scenes (data.dataset = "scenes")
//   train.aug_trans.random_hflip.ratio
//   train.aug_trans.random_resize.*      scale_range, aspect_range, method (focus | random)
//   train.aug_trans.random_rotate.*      ratio, max_degree
//   train.aug_trans.random_focus_crop.*  crop_size, center_jitter
//   target.heatmap.sigma, target.paf.theta
//   test.input_size, test.mode (ss_test | ms_test), test.scale_search
//   loss.loss_weights.openpose_loss.{paf,heatmap}_loss{0..5}
//   res.part_threshold, res.limb_threshold, res.mid_point_num, res.limb_pos_ratio,
//   res.num_threshold, res.avg_threshold   parsing
//   res.vis_stick_width, res.vis_circle_radius   drawing
//   network.stride                       8 (OpenPose's)
#pragma once

#include "train/task.h"

namespace tcv::train {

/// The pose task's registry entry.
TaskInfo pose_task_info();

}  // namespace tcv::train
