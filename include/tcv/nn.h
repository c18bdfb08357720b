// Layers, namespace tcv::nn: Module (named parameters, buffers, children,
// train/eval, state_dict), Conv2d, BatchNorm2d, SyncBatchNorm, Linear,
// pooling, activations, Dropout, Upsample, Sequential and torch.nn.init's
// initialisers. Includes the engine.
#pragma once

#include "layers/layers.h"
#include "layers/sync_batch_norm.h"
#include "tcv/engine.h"
