// Evaluation, namespace tcv::train: the Evaluator life (accumulate on each
// rank, serialise, merge, finish), detection mAP (Pascal VOC's devkit and
// COCOeval for boxes), COCO results files and COCOeval's printed summary,
// segmentation's confusion matrix and mIoU (cityscapesscripts' figures), and
// COCO keypoint AP (COCOeval with OKS). Includes the data (tcv/data.h) and
// the detection data types.
#pragma once

#include "tcv/data.h"
#include "train/eval/coco_results.h"
#include "train/eval/det_map.h"
#include "train/eval/evaluator.h"
#include "train/eval/keypoint_ap.h"
#include "train/eval/seg_miou.h"
