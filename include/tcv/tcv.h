// All of tcv's public API: the engine (tcv, tcv::ops), layers (tcv::nn),
// models (tcv::models), data (tcv::data), data-parallel training (tcv::dist)
// and training (tcv::train), with detection, segmentation, pose and their
// evaluation (tcv/det.h, seg.h, pose.h, eval.h). docs/api.md names the entry
// points.
//
//   #include <tcv/tcv.h>   // with target_link_libraries(my_app PRIVATE tcv::tcv)
#pragma once

#include "tcv/data.h"
#include "tcv/det.h"
#include "tcv/dist.h"
#include "tcv/engine.h"
#include "tcv/eval.h"
#include "tcv/models.h"
#include "tcv/nn.h"
#include "tcv/pose.h"
#include "tcv/seg.h"
#include "tcv/train.h"
