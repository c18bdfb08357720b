#include "kernels/cpu/elementwise.h"

#include <algorithm>
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

// The type transcendentals of A compute in: A itself when floating, double for integers.
template <typename A>
using float_t_ = std::conditional_t<std::is_floating_point_v<A>, A, double>;

template <typename T>
void binary_typed(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
                  double alpha) {
  using A = acc_t<T>;
  pointwise::visit_binary<A, float_t_<A>, VecMath>(op, alpha, [&](auto fn) {
    if constexpr (std::is_same_v<decltype(fn(A(), A())), bool>)
      map<bool, T>(
          out, [fn](T x, T y) { return fn(A(x), A(y)); }, a, b);
    else
      map<T, T>(
          out, [fn](T x, T y) { return static_cast<T>(fn(A(x), A(y))); }, a, b);
  });
}

template <typename T>
void unary_typed(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  using A = acc_t<T>;
  pointwise::visit_unary<A, float_t_<A>, VecMath>(op, p0, p1, [&](auto fn) {
    map<T, T>(
        out, [fn](T x) { return static_cast<T>(fn(A(x))); }, in);
  });
}

template <typename T>
void unary_backward_typed(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& s,
                          double p0, double p1) {
  using F = float_t_<acc_t<T>>;
  pointwise::visit_unary_grad<F>(op, p0, p1, [&](auto fn) {
    map<T, T>(
        dx, [fn](T g, T v) { return static_cast<T>(fn(F(g), F(v))); }, dy, s);
  });
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
    // Write-only: the old contents are never read (uninitialised bytes are
    // not a valid bool).
    Loop<1> loop({&dst});
    loop.run([v](char** p, const int64_t* s, int64_t n) {
      if (s[0] == static_cast<int64_t>(sizeof(scalar_t))) {
        std::fill_n(reinterpret_cast<scalar_t*>(p[0]), n, v);
        return;
      }
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) = v;
    });
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
