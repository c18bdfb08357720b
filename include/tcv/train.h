// Training, namespace tcv::train: optimizers (SGD, Adam, AdamW),
// clip_grad_norm, LR policies, GradScaler, metrics, checkpoints and
// pretrained weights (load_pretrained), and the config-driven Trainer and
// Predictor behind tcv-train and tcv-predict, with the task seam (Task,
// register_task) that classification, detection and segmentation plug into.
// Includes the layers.
#pragma once

#include "tcv/nn.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/grad_scaler.h"
#include "train/lr_policy.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/predict.h"
#include "train/task.h"
#include "train/trainer.h"
