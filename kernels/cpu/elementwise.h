// Elementwise CPU kernels: binary with broadcasting, unary and their
// backward (the formulas of kernels/pointwise.h), copy with dtype conversion,
// fill, where.
//
// Operands arrive already broadcast to the output's shape (stride 0 where
// expanded) and, except for copy, in one dtype.
#pragma once

#include "kernels/base.h"
#include "kernels/pointwise.h"

namespace tcv::kernels::cpu {

/// out = a op b; for add/sub: out = a ± alpha·b. Comparisons write bool.
void binary(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
            double alpha = 1.0);
/// out = op(in); p0/p1: leaky_relu slope, clamp bounds.
void unary(UnaryOp op, const KTensor& out, const KTensor& in, double p0 = 0.0, double p1 = 0.0);
/// dx = dy · op'(saved), saved being the output when backward_uses_output(op), else the input.
void unary_backward(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& saved,
                    double p0 = 0.0, double p1 = 0.0);
/// dst = src, converting dtype; src may be broadcast.
void copy(const KTensor& dst, const KTensor& src);
void fill(const KTensor& dst, double value);
/// out = cond ? a : b (cond is bool).
void where(const KTensor& out, const KTensor& cond, const KTensor& a, const KTensor& b);

}  // namespace tcv::kernels::cpu
