// tcv's engine, namespace tcv and tcv::ops: Tensor and its factories, the
// functional ops, autograd (custom functions, hooks, NoGradGuard), random
// numbers, mixed precision, safetensors files, the kernel profiler and the
// host allocator's statistics, and the JSON values the API hands out (Value).
//
//   #include <tcv/engine.h>
//   tcv::Tensor w = tcv::randn({10, 784}, {.requires_grad = true});
#pragma once

#include "engine/allocator.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profiler.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "engine/tensor.h"
#include "engine/value.h"
