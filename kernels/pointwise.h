// The elementwise formulas of tcv, written once for both backends: the unary
// and binary ops with their gradients, and the pointwise losses with theirs.
//
// A formula is a small functor over values already in its compute type: A, the
// arithmetic type (float for f16/bf16, int for bool, the type itself
// otherwise), and F, the type transcendentals run in (A when floating, double
// for integers). Transcendentals come from a Math policy M, so each backend
// brings its own: the CPU the vectorizable vm:: functions (kernels/cpu/vmath.h),
// CUDA the device's math library. The element loops, broadcasting and dtype
// conversions stay with each backend (kernels/cpu/elementwise.cpp, loss.cpp;
// kernels/cuda/elementwise.cu, loss.cu), which run the functor a visit_*
// function hands them:
//
//   visit_unary<A, F, Math>(op, p0, p1, [&](auto fn) { map(out, wrap(fn), in); });
//
// Functors hold only their parameters (a slope, clamp bounds, alpha), so they
// copy into device kernels by value and inline into the CPU loops.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TCV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TCV_HOST_DEVICE inline __attribute__((always_inline))
#endif

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

/// Elementwise losses of an input against a target of the same (broadcast) shape.
enum class PointwiseLoss : uint8_t { mse, smooth_l1, bce_with_logits };
/// Which operand a pointwise-loss gradient is taken with respect to.
enum class LossArg : uint8_t { input, target, pos_weight };

}  // namespace tcv::kernels

namespace tcv::kernels::pointwise {

// ---------------------------------------------------------------- unary ops
// y = f(x); A-typed ops keep integers integral, F-typed ones compute in F.

template <class A>
struct Neg {
  TCV_HOST_DEVICE A operator()(A x) const { return A(-x); }
};
template <class A>
struct Abs {
  TCV_HOST_DEVICE A operator()(A x) const { return x < A(0) ? A(-x) : x; }
};
template <class A>
struct Square {
  TCV_HOST_DEVICE A operator()(A x) const { return A(x * x); }
};
template <class A>
struct Sign {
  TCV_HOST_DEVICE A operator()(A x) const { return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0)); }
};
template <class A>
struct Relu {
  TCV_HOST_DEVICE A operator()(A x) const { return x > A(0) ? x : A(0); }
};
template <class A, class F, class M>
struct Exp {
  TCV_HOST_DEVICE F operator()(A x) const { return M::exp(F(x)); }
};
template <class A, class F, class M>
struct Log {
  TCV_HOST_DEVICE F operator()(A x) const { return M::log(F(x)); }
};
template <class A, class F, class M>
struct Sqrt {
  TCV_HOST_DEVICE F operator()(A x) const { return M::sqrt(F(x)); }
};
template <class A, class F, class M>
struct Rsqrt {
  TCV_HOST_DEVICE F operator()(A x) const { return F(1) / M::sqrt(F(x)); }
};
template <class A, class F, class M>
struct Sigmoid {
  TCV_HOST_DEVICE F operator()(A x) const { return M::sigmoid(F(x)); }
};
template <class A, class F, class M>
struct Tanh {
  TCV_HOST_DEVICE F operator()(A x) const { return M::tanh(F(x)); }
};
template <class A, class F>
struct LeakyRelu {
  F slope;
  TCV_HOST_DEVICE F operator()(A x) const { return F(x) > F(0) ? F(x) : F(x) * slope; }
};
template <class A, class F>
struct Hardswish {
  TCV_HOST_DEVICE F operator()(A x) const {
    const F v = F(x);
    const F r = v + F(3) < F(0) ? F(0) : (v + F(3) > F(6) ? F(6) : v + F(3));
    return v * r / F(6);
  }
};
template <class A, class F>
struct Relu6 {
  TCV_HOST_DEVICE F operator()(A x) const {
    const F a = F(x) < F(0) ? F(0) : F(x);
    return F(6) < a ? F(6) : a;
  }
};
/// min(max(v, lo), hi) as selects: NaN stays NaN (v < lo and hi < a are false
/// for it), lo > hi gives hi (as torch.clamp), and the CPU loop vectorizes
/// (nested branches ran ~30x slower).
template <class A, class F>
struct Clamp {
  F lo, hi;
  TCV_HOST_DEVICE F operator()(A x) const {
    const F v = F(x);
    const F a = v < lo ? lo : v;
    return hi < a ? hi : a;
  }
};

/// g(functor) with the functor of `op` (p0: leaky_relu's slope or clamp's
/// lower bound, p1: clamp's upper bound).
template <class A, class F, class M, class G>
void visit_unary(UnaryOp op, double p0, double p1, G&& g) {
  switch (op) {
    case UnaryOp::neg:
      return g(Neg<A>{});
    case UnaryOp::abs:
      return g(Abs<A>{});
    case UnaryOp::square:
      return g(Square<A>{});
    case UnaryOp::sign:
      return g(Sign<A>{});
    case UnaryOp::exp:
      return g(Exp<A, F, M>{});
    case UnaryOp::log:
      return g(Log<A, F, M>{});
    case UnaryOp::sqrt:
      return g(Sqrt<A, F, M>{});
    case UnaryOp::rsqrt:
      return g(Rsqrt<A, F, M>{});
    case UnaryOp::relu:
      return g(Relu<A>{});
    case UnaryOp::leaky_relu:
      return g(LeakyRelu<A, F>{static_cast<F>(p0)});
    case UnaryOp::sigmoid:
      return g(Sigmoid<A, F, M>{});
    case UnaryOp::tanh:
      return g(Tanh<A, F, M>{});
    case UnaryOp::hardswish:
      return g(Hardswish<A, F>{});
    case UnaryOp::clamp:
      return g(Clamp<A, F>{static_cast<F>(p0), static_cast<F>(p1)});
    case UnaryOp::relu6:
      return g(Relu6<A, F>{});
  }
}

// ---------------------------------------------------------------- unary gradients
// dx = f(g, v): g the upstream gradient, v the saved input, or the output where
// backward_uses_output(op); both in F.

template <class F>
struct NegGrad {
  TCV_HOST_DEVICE F operator()(F g, F) const { return -g; }
};
template <class F>
struct AbsGrad {
  TCV_HOST_DEVICE F operator()(F g, F x) const { return x > F(0) ? g : (x < F(0) ? -g : F(0)); }
};
template <class F>
struct SquareGrad {
  TCV_HOST_DEVICE F operator()(F g, F x) const { return F(2) * x * g; }
};
template <class F>
struct ZeroGrad {
  TCV_HOST_DEVICE F operator()(F, F) const { return F(0); }
};
template <class F>
struct ExpGrad {  // v = y
  TCV_HOST_DEVICE F operator()(F g, F y) const { return g * y; }
};
template <class F>
struct LogGrad {
  TCV_HOST_DEVICE F operator()(F g, F x) const { return g / x; }
};
template <class F>
struct SqrtGrad {  // v = y
  TCV_HOST_DEVICE F operator()(F g, F y) const { return g / (F(2) * y); }
};
template <class F>
struct RsqrtGrad {  // d/dx x^-1/2 = -1/2 y^3
  TCV_HOST_DEVICE F operator()(F g, F y) const { return F(-0.5) * g * y * y * y; }
};
template <class F>
struct ReluGrad {  // v = y
  TCV_HOST_DEVICE F operator()(F g, F y) const { return y > F(0) ? g : F(0); }
};
template <class F>
struct LeakyReluGrad {
  F slope;
  TCV_HOST_DEVICE F operator()(F g, F x) const { return x > F(0) ? g : g * slope; }
};
template <class F>
struct SigmoidGrad {  // v = y
  TCV_HOST_DEVICE F operator()(F g, F y) const { return g * y * (F(1) - y); }
};
template <class F>
struct TanhGrad {  // v = y
  TCV_HOST_DEVICE F operator()(F g, F y) const { return g * (F(1) - y * y); }
};
template <class F>
struct HardswishGrad {
  TCV_HOST_DEVICE F operator()(F g, F x) const {
    return g * (x < F(-3) ? F(0) : (x > F(3) ? F(1) : (F(2) * x + F(3)) / F(6)));
  }
};
template <class F>
struct Relu6Grad {  // v = y; `&` rather than `&&` so the CPU loop vectorizes
  TCV_HOST_DEVICE F operator()(F g, F y) const { return (y > F(0)) & (y < F(6)) ? g : F(0); }
};
template <class F>
struct ClampGrad {
  F lo, hi;
  TCV_HOST_DEVICE F operator()(F g, F x) const { return (x >= lo) & (x <= hi) ? g : F(0); }
};

/// g(functor) with the gradient functor of `op` (p0, p1 as for visit_unary).
template <class F, class G>
void visit_unary_grad(UnaryOp op, double p0, double p1, G&& g) {
  switch (op) {
    case UnaryOp::neg:
      return g(NegGrad<F>{});
    case UnaryOp::abs:
      return g(AbsGrad<F>{});
    case UnaryOp::square:
      return g(SquareGrad<F>{});
    case UnaryOp::sign:
      return g(ZeroGrad<F>{});
    case UnaryOp::exp:
      return g(ExpGrad<F>{});
    case UnaryOp::log:
      return g(LogGrad<F>{});
    case UnaryOp::sqrt:
      return g(SqrtGrad<F>{});
    case UnaryOp::rsqrt:
      return g(RsqrtGrad<F>{});
    case UnaryOp::relu:
      return g(ReluGrad<F>{});
    case UnaryOp::leaky_relu:
      return g(LeakyReluGrad<F>{static_cast<F>(p0)});
    case UnaryOp::sigmoid:
      return g(SigmoidGrad<F>{});
    case UnaryOp::tanh:
      return g(TanhGrad<F>{});
    case UnaryOp::hardswish:
      return g(HardswishGrad<F>{});
    case UnaryOp::clamp:
      return g(ClampGrad<F>{static_cast<F>(p0), static_cast<F>(p1)});
    case UnaryOp::relu6:
      return g(Relu6Grad<F>{});
  }
}

// ---------------------------------------------------------------- binary ops
// out = f(x, y) in A (comparisons give bool).

template <class A>
struct Add {
  TCV_HOST_DEVICE A operator()(A x, A y) const { return A(x + y); }
};
template <class A>
struct AddScaled {  // x + alpha·y
  A alpha;
  TCV_HOST_DEVICE A operator()(A x, A y) const { return A(x + alpha * y); }
};
template <class A>
struct Sub {
  TCV_HOST_DEVICE A operator()(A x, A y) const { return A(x - y); }
};
template <class A>
struct SubScaled {  // x - alpha·y
  A alpha;
  TCV_HOST_DEVICE A operator()(A x, A y) const { return A(x - alpha * y); }
};
template <class A>
struct Mul {
  TCV_HOST_DEVICE A operator()(A x, A y) const { return A(x * y); }
};
/// Integer division by zero gives 0 (it has no value to propagate).
template <class A>
struct Div {
  TCV_HOST_DEVICE A operator()(A x, A y) const {
    if constexpr (std::is_floating_point_v<A>)
      return x / y;
    else
      return y == 0 ? A(0) : A(x / y);
  }
};
template <class A, class F, class M>
struct Pow {
  TCV_HOST_DEVICE F operator()(A x, A y) const { return M::pow(F(x), F(y)); }
};
template <class A>
struct Maximum {  // NaN propagates
  TCV_HOST_DEVICE A operator()(A x, A y) const { return (x != x) ? x : (x > y ? x : y); }
};
template <class A>
struct Minimum {  // NaN propagates
  TCV_HOST_DEVICE A operator()(A x, A y) const { return (x != x) ? x : (x < y ? x : y); }
};
template <class A>
struct AddRelu {  // relu(x + alpha·y)
  A alpha;
  TCV_HOST_DEVICE A operator()(A x, A y) const {
    const A v = x + alpha * y;
    return v > A(0) ? v : A(0);
  }
};
template <class A>
struct Eq {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x == y; }
};
template <class A>
struct Ne {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x != y; }
};
template <class A>
struct Lt {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x < y; }
};
template <class A>
struct Le {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x <= y; }
};
template <class A>
struct Gt {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x > y; }
};
template <class A>
struct Ge {
  TCV_HOST_DEVICE bool operator()(A x, A y) const { return x >= y; }
};

/// g(functor) with the functor of `op`; add and sub with alpha 1 take the
/// plain sum and difference (no multiply).
template <class A, class F, class M, class G>
void visit_binary(BinaryOp op, double alpha, G&& g) {
  const A al = static_cast<A>(alpha);
  switch (op) {
    case BinaryOp::add:
      return alpha == 1.0 ? g(Add<A>{}) : g(AddScaled<A>{al});
    case BinaryOp::sub:
      return alpha == 1.0 ? g(Sub<A>{}) : g(SubScaled<A>{al});
    case BinaryOp::mul:
      return g(Mul<A>{});
    case BinaryOp::div:
      return g(Div<A>{});
    case BinaryOp::pow:
      return g(Pow<A, F, M>{});
    case BinaryOp::maximum:
      return g(Maximum<A>{});
    case BinaryOp::minimum:
      return g(Minimum<A>{});
    case BinaryOp::add_relu:
      return g(AddRelu<A>{al});
    case BinaryOp::eq:
      return g(Eq<A>{});
    case BinaryOp::ne:
      return g(Ne<A>{});
    case BinaryOp::lt:
      return g(Lt<A>{});
    case BinaryOp::le:
      return g(Le<A>{});
    case BinaryOp::gt:
      return g(Gt<A>{});
    case BinaryOp::ge:
      return g(Ge<A>{});
  }
}

// ---------------------------------------------------------------- pointwise losses
// loss = f(a, b) for input a and target b, or f(a, b, w) with BCE's pos_weight
// w; gradients f(gv, a, b, w) (w = 1 without pos_weight) scaled by the upstream
// gradient gv. All in A.

template <class A>
struct MseLoss {
  TCV_HOST_DEVICE A operator()(A a, A b) const { return (a - b) * (a - b); }
  TCV_HOST_DEVICE A operator()(A a, A b, A) const { return (*this)(a, b); }
};
template <class A, class M>
struct SmoothL1Loss {
  A beta;
  TCV_HOST_DEVICE A operator()(A a, A b) const {
    const A d = M::abs(a - b);
    return d < beta ? A(0.5) * d * d / beta : d - A(0.5) * beta;
  }
  TCV_HOST_DEVICE A operator()(A a, A b, A) const { return (*this)(a, b); }
};
/// (1 − y)·x + (1 + (pw − 1)·y)·softplus(−x): PyTorch's stable form; without
/// pos_weight (1 − y)·x + softplus(−x).
template <class A, class M>
struct BceWithLogitsLoss {
  TCV_HOST_DEVICE A operator()(A a, A b) const { return (A(1) - b) * a + M::softplus(-a); }
  TCV_HOST_DEVICE A operator()(A a, A b, A w) const {
    return (A(1) - b) * a + (A(1) + (w - A(1)) * b) * M::softplus(-a);
  }
};

template <class A>
struct MseGrad {  // sign: +1 for the input, −1 for the target
  A sign;
  TCV_HOST_DEVICE A operator()(A gv, A a, A b, A) const { return sign * A(2) * (a - b) * gv; }
};
template <class A, class M>
struct SmoothL1Grad {
  A sign, beta;
  TCV_HOST_DEVICE A operator()(A gv, A a, A b, A) const {
    const A diff = a - b;
    const A s = M::abs(diff) < beta ? diff / beta : static_cast<A>((diff > A(0)) - (diff < A(0)));
    return sign * s * gv;
  }
};
/// ∂/∂x = (1 − y) − (1 + (pw − 1)·y)·σ(−x).
template <class A, class M>
struct BceInputGrad {
  TCV_HOST_DEVICE A operator()(A gv, A a, A b, A w) const {
    return gv * ((A(1) - b) - (A(1) + (w - A(1)) * b) * M::sigmoid(-a));
  }
};
/// ∂/∂y = −x + (pw − 1)·softplus(−x).
template <class A, class M>
struct BceTargetGrad {
  TCV_HOST_DEVICE A operator()(A gv, A a, A, A w) const {
    return gv * (-a + (w - A(1)) * M::softplus(-a));
  }
};
/// ∂/∂pw = y·softplus(−x).
template <class A, class M>
struct BcePosWeightGrad {
  TCV_HOST_DEVICE A operator()(A gv, A a, A b, A) const { return gv * (b * M::softplus(-a)); }
};

/// g(functor) with the functor of `loss` (beta: smooth L1's threshold).
template <class A, class M, class G>
void visit_loss(PointwiseLoss loss, double beta, G&& g) {
  switch (loss) {
    case PointwiseLoss::mse:
      return g(MseLoss<A>{});
    case PointwiseLoss::smooth_l1:
      return g(SmoothL1Loss<A, M>{static_cast<A>(beta)});
    case PointwiseLoss::bce_with_logits:
      return g(BceWithLogitsLoss<A, M>{});
  }
}

/// g(functor) with the gradient functor of `loss` with respect to `arg`.
template <class A, class M, class G>
void visit_loss_grad(PointwiseLoss loss, LossArg arg, double beta, G&& g) {
  const A sign = arg == LossArg::target ? A(-1) : A(1);
  switch (loss) {
    case PointwiseLoss::mse:
      return g(MseGrad<A>{sign});
    case PointwiseLoss::smooth_l1:
      return g(SmoothL1Grad<A, M>{sign, static_cast<A>(beta)});
    case PointwiseLoss::bce_with_logits:
      switch (arg) {
        case LossArg::input:
          return g(BceInputGrad<A, M>{});
        case LossArg::target:
          return g(BceTargetGrad<A, M>{});
        case LossArg::pos_weight:
          return g(BcePosWeightGrad<A, M>{});
      }
  }
}

}  // namespace tcv::kernels::pointwise
