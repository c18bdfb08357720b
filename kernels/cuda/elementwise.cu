#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loops.cuh"

namespace tcv::kernels::cuda {
namespace {

// Arithmetic type (bool computes as int) and the type transcendentals use.
template <typename T>
using arith_t = std::conditional_t<std::is_same_v<T, bool>, int, acc_t<T>>;
template <typename A>
using float_t_ = std::conditional_t<std::is_floating_point_v<A>, A, double>;

// The element loops of the shared formulas (kernels/pointwise.h): convert in,
// apply, convert out. Structs rather than lambdas: a device lambda may not be
// defined inside the generic lambda the visit_* functions call.
template <typename T, typename Fn>
struct UnaryMap {
  Fn fn;
  __device__ __forceinline__ T operator()(T t) const {
    return convert<T>(fn(arith_t<T>(to_acc(t))));
  }
};
template <typename T, typename Fn>
struct UnaryGradMap {
  Fn fn;
  __device__ __forceinline__ T operator()(T g, T v) const {
    using A = arith_t<T>;
    using F = float_t_<A>;
    return convert<T>(fn(F(A(to_acc(g))), F(A(to_acc(v)))));
  }
};
template <typename T, typename R, typename Fn>
struct BinaryMap {
  Fn fn;
  __device__ __forceinline__ R operator()(T x, T y) const {
    using A = arith_t<T>;
    return convert<R>(fn(A(to_acc(x)), A(to_acc(y))));
  }
};

template <typename T>
void binary_typed(BinaryOp op, const KTensor& out, const KTensor& a, const KTensor& b,
                  double alpha) {
  using A = arith_t<T>;
  pointwise::visit_binary<A, float_t_<A>, DeviceMath>(op, alpha, [&](auto fn) {
    using Fn = decltype(fn);
    if constexpr (std::is_same_v<decltype(fn(A(), A())), bool>)
      map<bool, T, T>(out, BinaryMap<T, bool, Fn>{fn}, a, b);
    else
      map<T, T, T>(out, BinaryMap<T, T, Fn>{fn}, a, b);
  });
}

template <typename T>
void unary_typed(UnaryOp op, const KTensor& out, const KTensor& in, double p0, double p1) {
  using A = arith_t<T>;
  pointwise::visit_unary<A, float_t_<A>, DeviceMath>(
      op, p0, p1, [&](auto fn) { map<T, T>(out, UnaryMap<T, decltype(fn)>{fn}, in); });
}

template <typename T>
void unary_backward_typed(UnaryOp op, const KTensor& dx, const KTensor& dy, const KTensor& s,
                          double p0, double p1) {
  pointwise::visit_unary_grad<float_t_<arith_t<T>>>(
      op, p0, p1, [&](auto fn) { map<T, T, T>(dx, UnaryGradMap<T, decltype(fn)>{fn}, dy, s); });
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
