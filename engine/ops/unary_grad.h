// The backward of the unary ops (relu, sigmoid, clamp, ...), and of the fused
// ops that end in one (convolution + ReLU, batch norm + ReLU), keyed by the
// kernels' op codes: for the engine's own ops, not part of the installed API.
#pragma once

#include "engine/tensor.h"
#include "kernels/pointwise.h"

namespace tcv::ops {

/// The input gradient of the unary op for upstream gradient g, from `saved`:
/// the op's output where kernels::backward_uses_output(op), its input otherwise.
/// The backward of the unary ops, and of fused ops that end in one.
Tensor unary_grad(kernels::UnaryOp op, const Tensor& g, const Tensor& saved, double p0 = 0.0,
                  double p1 = 0.0);
/// unary_grad that takes g from the caller (g is left undefined): when nothing
/// else holds g's buffer and it matches `saved` (shape, dtype, layout), the
/// gradient is computed in place in it; otherwise g is released on return. A
/// backward then holds one activation-sized gradient, not two.
Tensor unary_grad_consume(kernels::UnaryOp op, Tensor& g, const Tensor& saved, double p0 = 0.0,
                          double p1 = 0.0);

}  // namespace tcv::ops
