// Semantic segmentation (task = "seg"): PSPNet, DeepLabV3 and FCN on dilated
// ResNets (models/seg) on Cityscapes, Pascal VOC 2012 (with SBD's lists),
// ADE20K or the generated scenes' masks (data/seg), joint image and label
// augmentations, cross-entropy or OHEM with the auxiliary head's loss, a
// confusion matrix summed over the ranks into mIoU (`best` by miou), whole
// image, sliding-window and multi-scale + flip evaluation (train/seg_infer),
// colour overlays beside the ground truth in the report and label PNGs from
// tcv-predict.
//
// Its config keys (TorchCV's names where it has them):
//   data.train_split, data.val_split     the lists of each data set
//   data.reduce_zero_label               ADE20K: 0 ("other") ignored
//   data.scenes.*                        generated scenes
//   train.aug_trans.random_resize.*      scale_range, base_size
//   train.aug_trans.random_crop.*        crop_size, cat_max_ratio
//   train.aug_trans.random_hflip.ratio, train.aug_trans.photometric_distortion
//   test.mode                            ss_test | sscrop_test | ms_test | mscrop_test
//   test.crop_size, test.crop_stride_ratio, test.scale_search, test.flip, test.base_size
//   loss.loss_type                       seg_auxce_loss | seg_auxohemce_loss
//   loss.loss_weights.seg_loss, loss.loss_weights.aux_loss,
//   loss.params.ce_weight, loss.params.ohem_thresh, loss.params.ohem_minkeep
//   network.stride                       the backbone's output stride, 8 or 16
#pragma once

#include "train/task.h"

namespace tcv::train {

/// The segmentation task's registry entry.
TaskInfo seg_task_info();

}  // namespace tcv::train
