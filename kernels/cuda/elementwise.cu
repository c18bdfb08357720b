#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loops.cuh"

namespace tcv::kernels::cuda {
namespace {

// Arithmetic type (bool computes as int) and the type transcendentals use.
template <typename T>
using arith_t = std::conditional_t<std::is_same_v<T, bool>, int, acc_t<T>>;
template <typename A>
using float_t_ = std::conditional_t<std::is_floating_point_v<A>, A, double>;

template <typename T>
void binary_typed(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
                  double alpha) {
  using A = arith_t<T>;
  const A al = static_cast<A>(alpha);
  switch (op) {
    case BinaryOp::add:
      map<T, T, T>(
          out, [al] __device__(T x, T y) { return convert<T>(to_acc(x) + al * to_acc(y)); }, a, b);
      break;
    case BinaryOp::sub:
      map<T, T, T>(
          out, [al] __device__(T x, T y) { return convert<T>(to_acc(x) - al * to_acc(y)); }, a, b);
      break;
    case BinaryOp::mul:
      map<T, T, T>(
          out, [] __device__(T x, T y) { return convert<T>(A(to_acc(x)) * A(to_acc(y))); }, a, b);
      break;
    case BinaryOp::div:
      map<T, T, T>(
          out,
          [] __device__(T x, T y) {
            const A u = A(to_acc(x)), v = A(to_acc(y));
            if constexpr (std::is_floating_point_v<A>)
              return convert<T>(u / v);
            else
              return convert<T>(v == 0 ? A(0) : A(u / v));
          },
          a, b);
      break;
    case BinaryOp::pow:
      map<T, T, T>(
          out,
          [] __device__(T x, T y) {
            using F = float_t_<A>;
            return convert<T>(::pow(F(A(to_acc(x))), F(A(to_acc(y)))));
          },
          a, b);
      break;
    case BinaryOp::maximum:
      map<T, T, T>(
          out,
          [] __device__(T x, T y) {
            const A u = A(to_acc(x)), v = A(to_acc(y));
            return convert<T>((u != u) ? u : (u > v ? u : v));  // NaN propagates
          },
          a, b);
      break;
    case BinaryOp::minimum:
      map<T, T, T>(
          out,
          [] __device__(T x, T y) {
            const A u = A(to_acc(x)), v = A(to_acc(y));
            return convert<T>((u != u) ? u : (u < v ? u : v));
          },
          a, b);
      break;
    case BinaryOp::add_relu:
      map<T, T, T>(
          out,
          [al] __device__(T x, T y) {
            const A v = to_acc(x) + al * to_acc(y);
            return convert<T>(v > A(0) ? v : A(0));
          },
          a, b);
      break;
    case BinaryOp::eq:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) == A(to_acc(y)); }, a, b);
      break;
    case BinaryOp::ne:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) != A(to_acc(y)); }, a, b);
      break;
    case BinaryOp::lt:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) < A(to_acc(y)); }, a, b);
      break;
    case BinaryOp::le:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) <= A(to_acc(y)); }, a, b);
      break;
    case BinaryOp::gt:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) > A(to_acc(y)); }, a, b);
      break;
    case BinaryOp::ge:
      map<bool, T, T>(
          out, [] __device__(T x, T y) { return A(to_acc(x)) >= A(to_acc(y)); }, a, b);
      break;
  }
}

template <typename T>
void unary_typed(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  using A = arith_t<T>;
  using F = float_t_<A>;
  const F q0 = static_cast<F>(p0), q1 = static_cast<F>(p1);
#define TCV_UNARY(expr)           \
  map<T, T>(                      \
      out,                        \
      [q0, q1] __device__(T t) {  \
        const A x = A(to_acc(t)); \
        (void)q0;                 \
        (void)q1;                 \
        return convert<T>(expr);  \
      },                          \
      in)
  switch (op) {
    case UnaryOp::neg:
      TCV_UNARY(A(-x));
      break;
    case UnaryOp::abs:
      TCV_UNARY(x < A(0) ? A(-x) : x);
      break;
    case UnaryOp::square:
      TCV_UNARY(A(x * x));
      break;
    case UnaryOp::sign:
      TCV_UNARY(x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0)));
      break;
    case UnaryOp::exp:
      TCV_UNARY(::exp(F(x)));
      break;
    case UnaryOp::log:
      TCV_UNARY(::log(F(x)));
      break;
    case UnaryOp::sqrt:
      TCV_UNARY(::sqrt(F(x)));
      break;
    case UnaryOp::rsqrt:
      TCV_UNARY(F(1) / ::sqrt(F(x)));
      break;
    case UnaryOp::relu:
      TCV_UNARY(x > A(0) ? x : A(0));
      break;
    case UnaryOp::leaky_relu:
      TCV_UNARY(F(x) > F(0) ? F(x) : F(x) * q0);
      break;
    case UnaryOp::sigmoid:
      TCV_UNARY(F(1) / (F(1) + ::exp(-F(x))));
      break;
    case UnaryOp::tanh:
      TCV_UNARY(::tanh(F(x)));
      break;
    case UnaryOp::hardswish:
      TCV_UNARY(F(x) * (F(x) + F(3) < F(0) ? F(0) : (F(x) + F(3) > F(6) ? F(6) : F(x) + F(3))) /
                F(6));
      break;
    case UnaryOp::clamp:
      TCV_UNARY(F(x) != F(x) ? F(x) : (F(x) < q0 ? q0 : (F(x) > q1 ? q1 : F(x))));
      break;
    case UnaryOp::relu6:
      TCV_UNARY(F(x) < F(0) ? F(0) : (F(6) < F(x) ? F(6) : F(x)));
      break;
  }
#undef TCV_UNARY
}

template <typename T>
void unary_backward_typed(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& s,
                          double p0, double p1) {
  using A = arith_t<T>;
  using F = float_t_<A>;
  const F q0 = static_cast<F>(p0), q1 = static_cast<F>(p1);
  // g: upstream gradient, v: the saved input or output (see backward_uses_output).
#define TCV_UNARY_BW(expr)                                  \
  map<T, T, T>(                                             \
      dx,                                                   \
      [q0, q1] __device__(T gt, T vt) {                     \
        const F g = F(A(to_acc(gt))), v = F(A(to_acc(vt))); \
        (void)g;                                            \
        (void)v;                                            \
        (void)q0;                                           \
        (void)q1;                                           \
        return convert<T>(expr);                            \
      },                                                    \
      dy, s)
  switch (op) {
    case UnaryOp::neg:
      TCV_UNARY_BW(-g);
      break;
    case UnaryOp::abs:
      TCV_UNARY_BW(v > F(0) ? g : (v < F(0) ? -g : F(0)));
      break;
    case UnaryOp::square:
      TCV_UNARY_BW(F(2) * v * g);
      break;
    case UnaryOp::sign:
      TCV_UNARY_BW(F(0));
      break;
    case UnaryOp::exp:
      TCV_UNARY_BW(g * v);
      break;
    case UnaryOp::log:
      TCV_UNARY_BW(g / v);
      break;
    case UnaryOp::sqrt:
      TCV_UNARY_BW(g / (F(2) * v));
      break;
    case UnaryOp::rsqrt:
      TCV_UNARY_BW(F(-0.5) * g * v * v * v);
      break;
    case UnaryOp::relu:
      TCV_UNARY_BW(v > F(0) ? g : F(0));
      break;
    case UnaryOp::leaky_relu:
      TCV_UNARY_BW(v > F(0) ? g : g * q0);
      break;
    case UnaryOp::sigmoid:
      TCV_UNARY_BW(g * v * (F(1) - v));
      break;
    case UnaryOp::tanh:
      TCV_UNARY_BW(g * (F(1) - v * v));
      break;
    case UnaryOp::hardswish:
      TCV_UNARY_BW(g * (v < F(-3) ? F(0) : (v > F(3) ? F(1) : (F(2) * v + F(3)) / F(6))));
      break;
    case UnaryOp::clamp:
      TCV_UNARY_BW(v >= q0 && v <= q1 ? g : F(0));
      break;
    case UnaryOp::relu6:  // v is the output
      TCV_UNARY_BW(v > F(0) && v < F(6) ? g : F(0));
      break;
  }
#undef TCV_UNARY_BW
}

}  // namespace

void binary(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b, double alpha) {
  TCV_CUDA_DISPATCH_ALL(a.dtype, binary_op_name(op), binary_typed<scalar_t>(op, out, a, b, alpha));
}

void unary(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  TCV_CUDA_DISPATCH_ALL(in.dtype, unary_op_name(op), unary_typed<scalar_t>(op, out, in, p0, p1));
}

void unary_backward(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& saved,
                    double p0, double p1) {
  TCV_CUDA_DISPATCH_ALL(dy.dtype, unary_op_name(op),
                        unary_backward_typed<scalar_t>(op, dx, dy, saved, p0, p1));
}

void copy(const KTensor& dst, const KTensor& src) {
  TCV_CUDA_DISPATCH_ALL(dst.dtype, "copy", {
    using D = scalar_t;
    TCV_CUDA_DISPATCH_ALL(src.dtype, "copy", {
      using S = scalar_t;
      map<D, S>(
          dst, [] __device__(S v) { return convert<D>(v); }, src);
    });
  });
}

void fill(const KTensor& dst, double value) {
  TCV_CUDA_DISPATCH_ALL(dst.dtype, "fill", {
    const scalar_t v = convert<scalar_t>(value);
    map<scalar_t, scalar_t>(
        dst, [v] __device__(scalar_t) { return v; }, dst);
  });
}

void where(const KTensor& out, const KTensor& cond, const KTensor& a, const KTensor& b) {
  TCV_CUDA_DISPATCH_ALL(out.dtype, "where", {
    map<scalar_t, bool, scalar_t, scalar_t>(
        out, [] __device__(bool c, scalar_t x, scalar_t y) { return c ? x : y; }, cond, a, b);
  });
}

}  // namespace tcv::kernels::cuda
