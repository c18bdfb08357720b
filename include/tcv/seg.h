// Semantic segmentation: the data (tcv::data: Cityscapes, Pascal VOC and
// ADE20K readers, label PNGs, colour palettes, the joint image-and-label
// transforms, the segmentation loader, generated scenes) and the models (tcv::models:
// DeepLabV3, FCN and PSPNet on ResNets with their heads and losses), the
// inference modes (whole, sliding window, multi-scale + flip), with the
// evaluation (tcv/eval.h) and the task's shared parts. Includes the layers
// and the classifiers.
#pragma once

#include "data/det/scenes.h"
#include "data/label_png.h"
#include "data/seg/colorize.h"
#include "data/seg/dataset.h"
#include "data/seg/loader.h"
#include "data/seg/transforms.h"
#include "models/seg/heads.h"
#include "models/seg/loss.h"
#include "models/seg/segmentation.h"
#include "tcv/eval.h"
#include "tcv/models.h"
#include "train/seg_infer.h"
#include "train/tasks/common.h"
