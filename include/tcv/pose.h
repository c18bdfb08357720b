// Pose estimation: the data (tcv::data: COCO person keypoints reader and
// writer, crowd and RLE masks, the skeleton, OpenPose's heatmap and
// part-affinity targets, the pose augmentations and loader, generated
// scenes) and the models (tcv::models: OpenPose on VGG-19 and a light one,
// their loss, and the parsing of maps into people), with the evaluation
// (tcv/eval.h) and the task's shared parts. Includes the layers and the
// detection data types.
#pragma once

#include "data/pose/coco.h"
#include "data/pose/dataset.h"
#include "data/pose/loader.h"
#include "data/pose/scenes.h"
#include "data/pose/skeleton.h"
#include "data/pose/targets.h"
#include "data/pose/transforms.h"
#include "models/pose/openpose.h"
#include "models/pose/parse.h"
#include "tcv/eval.h"
#include "tcv/models.h"
#include "train/tasks/common.h"
