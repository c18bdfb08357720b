// Detection (task = "det"): SSD300/SSD512 (models/det) on Pascal VOC trees
// (several year roots: VOC07+12), COCO files or generated scenes (data/det),
// TorchCV's SSD augmentations, the MultiBox loss, VOC07 / VOC / COCO mAP
// (`best` by map, detections of every rank gathered), detections drawn in the
// report and by tcv-predict.
//
// Its config keys (TorchCV's names where it has them):
//   data.train_roots, data.val_roots     VOC year directories under data.data_dir
//   data.train_split, data.val_split     ImageSets/Main/<split>.txt (VOC, scenes)
//   data.train_ann, data.val_ann,        COCO instances files and image
//   data.train_images, data.val_images     directories under data.data_dir
//   data.keep_difficult, data.input_size, data.scenes.*
//   train.aug_trans.*                    photometric, random_hflip, random_pad, random_det_crop
//   anchor.iou_threshold, anchor.aspect_ratio_list, anchor.cur_anchor_sizes,
//   network.stride_list                  default boxes and matching
//   loss.neg_pos_ratio                   hard negatives per positive
//   res.nms.max_threshold, res.nms.pre_nms, res.val_conf_thre, res.vis_conf_thre,
//   res.max_per_image                    post-processing
//   val.metric                           voc07 | voc | coco
#pragma once

#include "train/task.h"

namespace tcv::train {

/// The detection task's registry entry.
TaskInfo det_task_info();

}  // namespace tcv::train
