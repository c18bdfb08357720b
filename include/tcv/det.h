// Object detection: the data (tcv::data: boxes and targets, Pascal VOC and
// COCO instances readers and writers, generated scenes, the SSD augmentations
// and the detection loader) and the models (tcv::models: SSD300/512 on VGG-16
// and a light SSD, default boxes, MultiBox matching and loss, decoding and
// NMS), with the evaluation (tcv/eval.h) and the task's shared parts
// (train/tasks/common.h). Includes the layers and the classifiers.
#pragma once

#include "data/det/coco.h"
#include "data/det/dataset.h"
#include "data/det/loader.h"
#include "data/det/scenes.h"
#include "data/det/transforms.h"
#include "data/det/voc.h"
#include "models/det/anchors.h"
#include "models/det/multibox_loss.h"
#include "models/det/postprocess.h"
#include "models/det/ssd.h"
#include "tcv/eval.h"
#include "tcv/models.h"
#include "train/tasks/common.h"
