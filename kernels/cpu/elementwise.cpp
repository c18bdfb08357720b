#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/vmath.h"

namespace tcv::kernels {

const char* binary_op_name(BinaryOp op) {
  static const char* names[] = {"add",      "sub", "mul", "div", "pow", "maximum", "minimum",
                                "add_relu", "eq",  "ne",  "lt",  "le",  "gt",      "ge"};
  return names[static_cast<int>(op)];
}

const char* unary_op_name(UnaryOp op) {
  static const char* names[] = {"neg",       "abs",   "exp",        "log",     "sqrt",
                                "rsqrt",     "relu",  "leaky_relu", "sigmoid", "tanh",
                                "hardswish", "clamp", "square",     "sign",    "relu6"};
  return names[static_cast<int>(op)];
}

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {
namespace {

// Arithmetic on f16/bf16 goes through float.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float,
                                 std::conditional_t<std::is_same_v<T, bool>, int, T>>;

template <typename T>
void binary_typed(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
                  double alpha) {
  using A = acc_t<T>;
  const A al = static_cast<A>(alpha);
  auto cast = [](auto v) { return static_cast<T>(v); };
  switch (op) {
    case BinaryOp::add:
      if (alpha == 1.0)
        map<T, T>(
            out, [&](T x, T y) { return cast(A(x) + A(y)); }, a, b);
      else
        map<T, T>(
            out, [&](T x, T y) { return cast(A(x) + al * A(y)); }, a, b);
      break;
    case BinaryOp::sub:
      if (alpha == 1.0)
        map<T, T>(
            out, [&](T x, T y) { return cast(A(x) - A(y)); }, a, b);
      else
        map<T, T>(
            out, [&](T x, T y) { return cast(A(x) - al * A(y)); }, a, b);
      break;
    case BinaryOp::mul:
      map<T, T>(
          out, [&](T x, T y) { return cast(A(x) * A(y)); }, a, b);
      break;
    case BinaryOp::div:
      if constexpr (std::is_floating_point_v<A>) {
        map<T, T>(
            out, [&](T x, T y) { return cast(A(x) / A(y)); }, a, b);
      } else {
        map<T, T>(
            out, [&](T x, T y) { return cast(A(y) == 0 ? A(0) : A(A(x) / A(y))); }, a, b);
      }
      break;
    case BinaryOp::pow:
      map<T, T>(
          out, [&](T x, T y) { return cast(std::pow(A(x), A(y))); }, a, b);
      break;
    case BinaryOp::maximum:
      map<T, T>(
          out,
          [&](T x, T y) {
            const A u = A(x), v = A(y);
            return cast((u != u) ? u : (u > v ? u : v));  // NaN propagates
          },
          a, b);
      break;
    case BinaryOp::minimum:
      map<T, T>(
          out,
          [&](T x, T y) {
            const A u = A(x), v = A(y);
            return cast((u != u) ? u : (u < v ? u : v));
          },
          a, b);
      break;
    case BinaryOp::add_relu:
      map<T, T>(
          out,
          [&](T x, T y) {
            const A v = A(x) + al * A(y);
            return cast(v > A(0) ? v : A(0));
          },
          a, b);
      break;
    case BinaryOp::eq:
      map<bool, T>(
          out, [](T x, T y) { return A(x) == A(y); }, a, b);
      break;
    case BinaryOp::ne:
      map<bool, T>(
          out, [](T x, T y) { return A(x) != A(y); }, a, b);
      break;
    case BinaryOp::lt:
      map<bool, T>(
          out, [](T x, T y) { return A(x) < A(y); }, a, b);
      break;
    case BinaryOp::le:
      map<bool, T>(
          out, [](T x, T y) { return A(x) <= A(y); }, a, b);
      break;
    case BinaryOp::gt:
      map<bool, T>(
          out, [](T x, T y) { return A(x) > A(y); }, a, b);
      break;
    case BinaryOp::ge:
      map<bool, T>(
          out, [](T x, T y) { return A(x) >= A(y); }, a, b);
      break;
  }
}

template <typename T>
void unary_typed(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  using A = acc_t<T>;
  // Transcendentals of integers are computed in double, then truncated.
  using F = std::conditional_t<std::is_floating_point_v<A>, A, double>;
  auto cast = [](auto v) { return static_cast<T>(v); };
  switch (op) {
    case UnaryOp::neg:
      map<T, T>(
          out, [&](T x) { return cast(-A(x)); }, in);
      break;
    case UnaryOp::abs:
      map<T, T>(
          out, [&](T x) { return cast(A(x) < A(0) ? A(-A(x)) : A(x)); }, in);
      break;
    case UnaryOp::square:
      map<T, T>(
          out, [&](T x) { return cast(A(x) * A(x)); }, in);
      break;
    case UnaryOp::sign:
      map<T, T>(
          out, [&](T x) { return cast(A(x) > A(0) ? A(1) : (A(x) < A(0) ? A(-1) : A(0))); }, in);
      break;
    case UnaryOp::exp:
      map<T, T>(
          out, [&](T x) { return cast(vm::exp(F(x))); }, in);
      break;
    case UnaryOp::log:
      map<T, T>(
          out, [&](T x) { return cast(vm::log(F(x))); }, in);
      break;
    case UnaryOp::sqrt:
      map<T, T>(
          out, [&](T x) { return cast(std::sqrt(F(x))); }, in);
      break;
    case UnaryOp::rsqrt:
      map<T, T>(
          out, [&](T x) { return cast(F(1) / std::sqrt(F(x))); }, in);
      break;
    case UnaryOp::relu:
      map<T, T>(
          out, [&](T x) { return cast(A(x) > A(0) ? A(x) : A(0)); }, in);
      break;
    case UnaryOp::leaky_relu: {
      const F s = static_cast<F>(p0);
      map<T, T>(
          out, [&](T x) { return cast(F(x) > F(0) ? F(x) : F(x) * s); }, in);
      break;
    }
    case UnaryOp::sigmoid:
      map<T, T>(
          out, [&](T x) { return cast(vm::sigmoid(F(x))); }, in);
      break;
    case UnaryOp::tanh:
      map<T, T>(
          out, [&](T x) { return cast(vm::tanh(F(x))); }, in);
      break;
    case UnaryOp::hardswish:
      map<T, T>(
          out,
          [&](T x) {
            const F v = F(x);
            const F r = v + F(3) < F(0) ? F(0) : (v + F(3) > F(6) ? F(6) : v + F(3));
            return cast(v * r / F(6));
          },
          in);
      break;
    case UnaryOp::relu6:
      map<T, T>(
          out,
          [cast](T x) {
            const F a = F(x) < F(0) ? F(0) : F(x);
            return cast(F(6) < a ? F(6) : a);
          },
          in);
      break;
    case UnaryOp::clamp: {
      // min(max(v, lo), hi) as selects: NaN stays NaN (v < lo and hi < v are
      // false for it) and the loop vectorizes; nested branches ran ~30x slower.
      const F lo = static_cast<F>(p0), hi = static_cast<F>(p1);
      map<T, T>(
          out,
          [lo, hi, cast](T x) {
            const F v = F(x);
            const F a = v < lo ? lo : v;
            return cast(hi < a ? hi : a);
          },
          in);
      break;
    }
  }
}

template <typename T>
void unary_backward_typed(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& s,
                          double p0, double p1) {
  using A = acc_t<T>;
  using F = std::conditional_t<std::is_floating_point_v<A>, A, double>;
  auto cast = [](auto v) { return static_cast<T>(v); };
  switch (op) {
    case UnaryOp::neg:
      map<T, T>(
          dx, [&](T g, T) { return cast(-F(g)); }, dy, s);
      break;
    case UnaryOp::abs:
      map<T, T>(
          dx, [&](T g, T x) { return cast(F(x) > F(0) ? F(g) : (F(x) < F(0) ? -F(g) : F(0))); }, dy,
          s);
      break;
    case UnaryOp::square:
      map<T, T>(
          dx, [&](T g, T x) { return cast(F(2) * F(x) * F(g)); }, dy, s);
      break;
    case UnaryOp::sign:
      map<T, T>(
          dx, [&](T, T) { return cast(F(0)); }, dy, s);
      break;
    case UnaryOp::exp:
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(g) * F(y)); }, dy, s);
      break;
    case UnaryOp::log:
      map<T, T>(
          dx, [&](T g, T x) { return cast(F(g) / F(x)); }, dy, s);
      break;
    case UnaryOp::sqrt:
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(g) / (F(2) * F(y))); }, dy, s);
      break;
    case UnaryOp::rsqrt:  // d/dx x^-1/2 = -1/2 y^3
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(-0.5) * F(g) * F(y) * F(y) * F(y)); }, dy, s);
      break;
    case UnaryOp::relu:
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(y) > F(0) ? F(g) : F(0)); }, dy, s);
      break;
    case UnaryOp::leaky_relu: {
      const F sl = static_cast<F>(p0);
      map<T, T>(
          dx, [&](T g, T x) { return cast(F(x) > F(0) ? F(g) : F(g) * sl); }, dy, s);
      break;
    }
    case UnaryOp::sigmoid:
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(g) * F(y) * (F(1) - F(y))); }, dy, s);
      break;
    case UnaryOp::tanh:
      map<T, T>(
          dx, [&](T g, T y) { return cast(F(g) * (F(1) - F(y) * F(y))); }, dy, s);
      break;
    case UnaryOp::hardswish:
      map<T, T>(
          dx,
          [&](T g, T x) {
            const F v = F(x);
            const F d = v < F(-3) ? F(0) : (v > F(3) ? F(1) : (F(2) * v + F(3)) / F(6));
            return cast(F(g) * d);
          },
          dy, s);
      break;
    case UnaryOp::relu6:
      map<T, T>(
          dx, [cast](T g, T y) { return cast((F(y) > F(0)) & (F(y) < F(6)) ? F(g) : F(0)); }, dy,
          s);
      break;
    case UnaryOp::clamp: {
      const F lo = static_cast<F>(p0), hi = static_cast<F>(p1);
      map<T, T>(
          dx,
          [lo, hi, cast](T g, T x) {
            const F v = F(x);
            return cast((v >= lo) & (v <= hi) ? F(g) : F(0));
          },
          dy, s);
      break;
    }
  }
}

template <typename D, typename S>
void copy_typed(const KTensor& dst, const KTensor& src) {
  if constexpr (std::is_same_v<D, S>) {
    map<D, S>(
        dst, [](S v) { return v; }, src);
  } else if constexpr (std::is_same_v<D, bool>) {
    map<D, S>(
        dst, [](S v) { return static_cast<acc_t<S>>(v) != acc_t<S>(0); }, src);
  } else {
    map<D, S>(
        dst, [](S v) { return static_cast<D>(static_cast<acc_t<S>>(v)); }, src);
  }
}

}  // namespace

void binary(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b, double alpha) {
  TCV_DISPATCH_ALL(a.dtype, binary_op_name(op), binary_typed<scalar_t>(op, out, a, b, alpha));
}

void unary(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  TCV_DISPATCH_ALL(in.dtype, unary_op_name(op), unary_typed<scalar_t>(op, out, in, p0, p1));
}

void unary_backward(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& saved,
                    double p0, double p1) {
  TCV_DISPATCH_ALL(dy.dtype, unary_op_name(op),
                   unary_backward_typed<scalar_t>(op, dx, dy, saved, p0, p1));
}

void copy(const KTensor& dst, const KTensor& src) {
  TCV_DISPATCH_ALL(dst.dtype, "copy", {
    using D = scalar_t;
    TCV_DISPATCH_ALL(src.dtype, "copy", (copy_typed<D, scalar_t>(dst, src)));
  });
}

void fill(const KTensor& dst, double value) {
  TCV_DISPATCH_ALL(dst.dtype, "fill", {
    // Any non-zero value is true, 0.5 included, as in torch.full(..., dtype=bool).
    const scalar_t v = std::is_same_v<scalar_t, bool>
                           ? static_cast<scalar_t>(value != 0.0)
                           : static_cast<scalar_t>(static_cast<acc_t<scalar_t>>(value));
    map<scalar_t, scalar_t>(
        dst, [v](scalar_t) { return v; }, dst);
  });
}

void where(const KTensor& out, const KTensor& cond, const KTensor& a, const KTensor& b) {
  TCV_DISPATCH_ALL(out.dtype, "where", {
    Loop<4> loop({&out, &cond, &a, &b});
    loop.run([](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
        *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) =
            *reinterpret_cast<const scalar_t*>(p[c ? 2 : 3] + i * s[c ? 2 : 3]);
      }
    });
  });
}

}  // namespace tcv::kernels::cpu
