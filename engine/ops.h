// The functional op API, tcv::ops: every op, differentiable where it makes sense.
#pragma once

#include "engine/ops/boxes.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/nn.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
