// Data-parallel training, namespace tcv::dist: the env:// variables tcv-run
// and torchrun set (read_dist_env), rank 0's TcpStore, ProcessGroup (Gloo for
// CPU tensors, NCCL for CUDA ones), the bucketed Reducer (its all-reduce cost
// model and bucket planner in comm_model.h), DistributedDataParallel and its
// communication hooks (bf16, fp16, PowerSGD), and the scaling projection of a
// measured step (step_projection.h). Includes the layers.
#pragma once

#include "dist/comm_hook.h"
#include "dist/comm_model.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/process_group.h"
#include "dist/reducer.h"
#include "dist/step_projection.h"
#include "dist/store.h"
#include "tcv/nn.h"
