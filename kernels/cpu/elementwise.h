// Elementwise CPU kernels: binary with broadcasting, unary and their
// backward, copy with dtype conversion, fill, where.
//
// Operands arrive already broadcast to the output's shape (stride 0 where
// expanded) and, except for copy, in one dtype.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {

/// add_relu: max(a + alpha·b, 0) with relu's `s > 0 ? s : 0` (a residual sum and
/// its relu in one pass). Comparisons come last (is_comparison).
enum class BinaryOp : uint8_t {
  add,
  sub,
  mul,
  div,
  pow,
  maximum,
  minimum,
  add_relu,
  eq,
  ne,
  lt,
  le,
  gt,
  ge
};
enum class UnaryOp : uint8_t {
  neg,
  abs,
  exp,
  log,
  sqrt,
  rsqrt,
  relu,
  leaky_relu,
  sigmoid,
  tanh,
  hardswish,
  clamp,
  square,
  sign,
  /// min(max(x, 0), 6) as torch.nn.ReLU6; the gradient passes where the output
  /// is strictly inside (0, 6), as torch's hardtanh (read from the output).
  relu6
};

const char* binary_op_name(BinaryOp op);
const char* unary_op_name(UnaryOp op);
inline bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::eq;
}
/// Ops whose backward reads the output rather than the input.
inline bool backward_uses_output(UnaryOp op) {
  return op == UnaryOp::exp || op == UnaryOp::sqrt || op == UnaryOp::rsqrt ||
         op == UnaryOp::sigmoid || op == UnaryOp::tanh || op == UnaryOp::relu ||
         op == UnaryOp::relu6;
}

}  // namespace tcv::kernels

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
