// Elementwise ops: forward through the device's kernel, backward next to it.
#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/unary_grad.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace tcv::ops {

using kernels::BinaryOp;
using kernels::UnaryOp;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TCV_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
              shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  TCV_CHECK(lead >= 0, "[sum_to] cannot reduce ", t.shape_str(), " to ", shape_str(shape));
  Shape dims;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else if (shape[i - lead] == 1 && t.shape()[i] != 1) {
      dims.push_back(i);
    }
  }
  Tensor s = dims.empty() ? t : sum(t, dims, /*keepdim=*/true);
  return s.reshape(shape);
}

namespace {

// A kernel descriptor of t broadcast to `shape` (0 strides where expanded).
kernels::KTensor broadcast_k(const Tensor& t, const Shape& shape) {
  return t.detach().expand(shape).strided_desc();
}

DType result_type(const Tensor& a, const Tensor& b) {
  return promote_types(a.dtype(), b.dtype());
}

Tensor as_dtype(const Tensor& t, DType dt) {
  return t.dtype() == dt ? t : t.detach().to(dt);
}

Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, double alpha) {
  const char* name = kernels::binary_op_name(op);
  TCV_CHECK(a.device() == b.device(), "[", name, "] operands on ", a.device().str(), " and ",
            b.device().str());
  // Equal-shape operands of one dtype, one of them in the blocked layout: the
  // other is converted to it and the result stays blocked.
  // One look at each layout (another thread may convert a storage meanwhile).
  const kernels::KTensor ak = a.desc_as_stored(), bk = b.desc_as_stored();
  if ((ak.blocked || bk.blocked) && a.shape() == b.shape() && a.dtype() == b.dtype() &&
      !kernels::is_comparison(op)) {
    const Tensor ab = ak.blocked ? Tensor() : to_blocked(a);
    const Tensor bb = bk.blocked ? Tensor() : to_blocked(b);
    Tensor out = empty_blocked(a.shape(), a.dtype());
    TCV_KERNEL(a.device(), binary, op, flat_desc(out),
               flat_desc(ak.blocked ? ak : ab.desc_as_stored()),
               flat_desc(bk.blocked ? bk : bb.desc_as_stored()), alpha);
    return out;
  }
  DType dt = result_type(a, b);
  if ((op == BinaryOp::div || op == BinaryOp::pow) && !is_floating(dt)) dt = DType::f32;
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out =
      empty(shape, {.dtype = kernels::is_comparison(op) ? DType::b8 : dt, .device = a.device()});
  if (out.numel() == 0) return out;
  TCV_KERNEL(a.device(), binary, op, out.strided_desc(), broadcast_k(as_dtype(a, dt), shape),
             broadcast_k(as_dtype(b, dt), shape), alpha);
  return out;
}

struct InputMeta {
  Shape shape;
  DType dtype;
  explicit InputMeta(const Tensor& t) : shape(t.shape()), dtype(t.dtype()) {}
  Tensor reduce(const Tensor& g) const { return sum_to(g, shape).to(dtype); }
};

Tensor scalar_like(const Tensor& t, double v) {
  DType dt = t.dtype();
  if (!is_floating(dt) && v != std::floor(v)) dt = DType::f32;
  return scalar_tensor(v, {.dtype = dt, .device = t.device()});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_forward(BinaryOp::add, a, b, alpha);
  if (autograd::needs_grad({&a, &b}))
    autograd::record("add", {a, b}, {out},
                     [ma = InputMeta(a), mb = InputMeta(b), alpha](std::vector<Tensor>& g) {
                       return std::vector<Tensor>{
                           ma.reduce(g[0]), mb.reduce(alpha == 1.0 ? g[0] : mul(g[0], alpha))};
                     });
  return out;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::add_relu, a, b, 1.0);
  if (autograd::needs_grad({&a, &b}))
    autograd::record(
        "add_relu", {a, b}, {out},
        [ma = InputMeta(a), mb = InputMeta(b), so = SavedTensor(out)](std::vector<Tensor>& g) {
          const Tensor gr = unary_grad_consume(UnaryOp::relu, g[0], so.get());
          return std::vector<Tensor>{ma.reduce(gr), mb.reduce(gr)};
        });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_forward(BinaryOp::sub, a, b, alpha);
  if (autograd::needs_grad({&a, &b}))
    autograd::record("sub", {a, b}, {out},
                     [ma = InputMeta(a), mb = InputMeta(b), alpha](std::vector<Tensor>& g) {
                       return std::vector<Tensor>{ma.reduce(g[0]), mb.reduce(mul(g[0], -alpha))};
                     });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::mul, a, b, 1.0);
  if (autograd::needs_grad({&a, &b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("mul", {a, b}, {out},
                     [ma = InputMeta(a), mb = InputMeta(b), sa = SavedTensor(gb ? a : Tensor()),
                      sb = SavedTensor(ga ? b : Tensor())](std::vector<Tensor>& g) {
                       Tensor da = sb.defined() ? ma.reduce(mul(g[0], sb.get())) : Tensor();
                       Tensor db = sa.defined() ? mb.reduce(mul(g[0], sa.get())) : Tensor();
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::div, a, b, 1.0);
  if (autograd::needs_grad({&a, &b})) {
    const bool gb = b.requires_grad();
    autograd::record("div", {a, b}, {out},
                     [ma = InputMeta(a), mb = InputMeta(b), sb = SavedTensor(b),
                      so = SavedTensor(gb ? out : Tensor())](std::vector<Tensor>& g) {
                       Tensor bv = sb.get();
                       Tensor da = ma.reduce(div(g[0], bv));
                       Tensor db =
                           so.defined() ? mb.reduce(neg(div(mul(g[0], so.get()), bv))) : Tensor();
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::pow, a, b, 1.0);
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("pow", {a, b}, {out},
                     [ma = InputMeta(a), mb = InputMeta(b), sa = SavedTensor(a),
                      sb = SavedTensor(b), so = SavedTensor(out)](std::vector<Tensor>& g) {
                       Tensor av = sa.get(), bv = sb.get();
                       // d/da a^b = b a^(b-1); d/db a^b = a^b log a (0 where a == 0).
                       Tensor da = ma.reduce(mul(g[0], mul(bv, pow(av, sub(bv, ones_like(bv))))));
                       Tensor lg = where(eq(av, 0.0), zeros_like(av), log(av));
                       Tensor db = mb.reduce(mul(g[0], mul(so.get(), lg)));
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  if (exponent == 2.0) return square(a);
  return pow(a, scalar_like(a, exponent));
}

namespace {
// maximum/minimum: the gradient goes to the chosen input, split evenly on ties.
Tensor extremum(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(op, a, b, 1.0);
  if (autograd::needs_grad({&a, &b}))
    autograd::record(kernels::binary_op_name(op), {a, b}, {out},
                     [op, ma = InputMeta(a), mb = InputMeta(b), sa = SavedTensor(a),
                      sb = SavedTensor(b)](std::vector<Tensor>& g) {
                       Tensor av = sa.get(), bv = sb.get();
                       Tensor win = op == BinaryOp::maximum ? gt(av, bv) : lt(av, bv);
                       Tensor tie = eq(av, bv);
                       Tensor wa = add(win.to(g[0].dtype()), mul(tie.to(g[0].dtype()), 0.5));
                       Tensor ga = mul(g[0], wa);
                       Tensor gb = sub(g[0], ga);
                       return std::vector<Tensor>{ma.reduce(ga), mb.reduce(gb)};
                     });
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::minimum, a, b);
}
Tensor add(const Tensor& a, double b) {
  return add(a, scalar_like(a, b));
}
Tensor mul(const Tensor& a, double b) {
  return mul(a, scalar_like(a, b));
}

// ---------------------------------------------------------------- unary

namespace {

Tensor unary_forward(UnaryOp op, const Tensor& x, double p0, double p1) {
  const kernels::KTensor xk = x.desc_as_stored();
  if (xk.blocked) {  // element by element: the layout does not matter
    Tensor out = empty_blocked(x.shape(), x.dtype());
    TCV_KERNEL(x.device(), unary, op, flat_desc(out), flat_desc(xk), p0, p1);
    return out;
  }
  Tensor out = empty_like(x);
  if (out.numel() == 0) return out;
  TCV_KERNEL(x.device(), unary, op, out.strided_desc(), xk, p0, p1);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x, double p0 = 0.0, double p1 = 0.0) {
  const char* name = kernels::unary_op_name(op);
  Tensor in = x;
  if (!is_floating(x.dtype()) && op != UnaryOp::neg && op != UnaryOp::abs &&
      op != UnaryOp::square && op != UnaryOp::sign && op != UnaryOp::relu && op != UnaryOp::relu6 &&
      op != UnaryOp::clamp)
    in = x.to(DType::f32);
  Tensor out = unary_forward(op, in, p0, p1);
  if (autograd::needs_grad({&x})) {
    SavedTensor saved(kernels::backward_uses_output(op) ? out : in);
    autograd::record(name, {x}, {out}, [op, saved, p0, p1](std::vector<Tensor>& g) {
      return std::vector<Tensor>{unary_grad_consume(op, g[0], saved.get(), p0, p1)};
    });
  }
  return out;
}

}  // namespace

Tensor unary_grad_consume(kernels::UnaryOp op, Tensor& g, const Tensor& saved, double p0,
                          double p1) {
  Tensor taken = std::move(g);  // held here alone when exclusive: its layout cannot change
  const kernels::KTensor sk = saved.desc_as_stored();
  const bool exclusive = taken.impl_ptr().use_count() == 1 && taken.storage().use_count() == 1 &&
                         taken.shape() == saved.shape() && taken.dtype() == saved.dtype() &&
                         taken.device() == saved.device() && taken.is_blocked() == sk.blocked &&
                         (sk.blocked || (taken.is_contiguous() && saved.is_contiguous()));
  if (!exclusive) return unary_grad(op, taken, saved, p0, p1);
  const kernels::KTensor gk = sk.blocked ? flat_desc(taken) : taken.strided_desc();
  TCV_KERNEL(saved.device(), unary_backward, op, gk, gk, sk.blocked ? flat_desc(sk) : sk, p0, p1);
  return taken;
}

Tensor unary_grad(kernels::UnaryOp op, const Tensor& g, const Tensor& saved, double p0, double p1) {
  const kernels::KTensor sk = saved.desc_as_stored();
  if (sk.blocked && g.dtype() == saved.dtype()) {
    Tensor dx = empty_blocked(saved.shape(), saved.dtype());
    TCV_KERNEL(saved.device(), unary_backward, op, flat_desc(dx), flat_desc(to_blocked(g)),
               flat_desc(sk), p0, p1);
    return dx;
  }
  Tensor dx = empty_like(saved);
  TCV_KERNEL(saved.device(), unary_backward, op, dx.strided_desc(), g.contiguous().strided_desc(),
             saved.strided_desc(), p0, p1);
  return dx;
}

// The one-argument ops of ops.h, each the unary op of its name.
#define TCV_UNARY_OP(name)          \
  Tensor name(const Tensor& x) {    \
    return unary(UnaryOp::name, x); \
  }
TCV_UNARY_OP(neg)
TCV_UNARY_OP(abs)
TCV_UNARY_OP(exp)
TCV_UNARY_OP(log)
TCV_UNARY_OP(sqrt)
TCV_UNARY_OP(rsqrt)
TCV_UNARY_OP(square)
TCV_UNARY_OP(sign)
TCV_UNARY_OP(relu)
TCV_UNARY_OP(relu6)
TCV_UNARY_OP(sigmoid)
TCV_UNARY_OP(tanh)
TCV_UNARY_OP(hardswish)
#undef TCV_UNARY_OP

Tensor leaky_relu(const Tensor& x, double slope) {
  return unary(UnaryOp::leaky_relu, x, slope);
}
Tensor clamp(const Tensor& x, double lo, double hi) {
  TCV_CHECK(lo <= hi, "[clamp] min ", lo, " > max ", hi);
  return unary(UnaryOp::clamp, x, lo, hi);
}

Tensor& relu_(Tensor& x) {
  TCV_CHECK(!autograd::needs_grad({&x}), "[relu_] in place on a tensor that requires grad");
  TCV_KERNEL(x.device(), unary, UnaryOp::relu, x.strided_desc(), x.strided_desc());
  x.bump_version();
  return x;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  TCV_CHECK(cond.dtype() == DType::b8, "[where] condition must be bool, got ",
            dtype_name(cond.dtype()));
  const DType dt = result_type(a, b);
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = empty(shape, {.dtype = dt, .device = a.device()});
  if (out.numel() > 0) {
    backend::require_device("where", a.device(), {&cond, &b});
    TCV_KERNEL(a.device(), where, out.strided_desc(), broadcast_k(cond, shape),
               broadcast_k(as_dtype(a, dt), shape), broadcast_k(as_dtype(b, dt), shape));
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record(
        "where", {a, b}, {out},
        [ma = InputMeta(a), mb = InputMeta(b), sc = SavedTensor(cond)](std::vector<Tensor>& g) {
          Tensor c = sc.get();
          Tensor z = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
          return std::vector<Tensor>{ma.reduce(where(c, g[0], z)), mb.reduce(where(c, z, g[0]))};
        });
  return out;
}

// Comparisons: a b8 result, no gradient.
#define TCV_COMPARE_OP(name)                          \
  Tensor name(const Tensor& a, const Tensor& b) {     \
    return binary_forward(BinaryOp::name, a, b, 1.0); \
  }
TCV_COMPARE_OP(eq)
TCV_COMPARE_OP(ne)
TCV_COMPARE_OP(lt)
TCV_COMPARE_OP(le)
TCV_COMPARE_OP(gt)
TCV_COMPARE_OP(ge)
#undef TCV_COMPARE_OP
Tensor eq(const Tensor& a, double b) {
  return eq(a, scalar_like(a, b));
}
Tensor gt(const Tensor& a, double b) {
  return gt(a, scalar_like(a, b));
}
Tensor lt(const Tensor& a, double b) {
  return lt(a, scalar_like(a, b));
}

// ---------------------------------------------------------------- copies

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), {.dtype = dtype, .device = x.device()});
  backend::copy(out, x);
  if (is_floating(dtype) && autograd::needs_grad({&x}))
    autograd::record("cast", {x}, {out}, [in = x.dtype()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(in)};
    });
  return out;
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = device});
  backend::copy(out, x);
  if (autograd::needs_grad({&x}))
    autograd::record("to_device", {x}, {out}, [src = x.device()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(src)};
    });
  return out;
}

Tensor clone(const Tensor& x) {
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  backend::copy(out, x);
  if (autograd::needs_grad({&x}))
    autograd::record("clone", {x}, {out},
                     [](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

}  // namespace tcv::ops

namespace tcv {
Tensor operator+(const Tensor& a, const Tensor& b) {
  return ops::add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return ops::sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return ops::mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return ops::div(a, b);
}
Tensor operator-(const Tensor& a) {
  return ops::neg(a);
}
Tensor operator+(const Tensor& a, double b) {
  return ops::add(a, b);
}
Tensor operator-(const Tensor& a, double b) {
  return ops::add(a, -b);
}
Tensor operator*(const Tensor& a, double b) {
  return ops::mul(a, b);
}
Tensor operator/(const Tensor& a, double b) {
  return ops::mul(a, 1.0 / b);
}
Tensor operator+(double a, const Tensor& b) {
  return ops::add(b, a);
}
Tensor operator-(double a, const Tensor& b) {
  return ops::add(ops::neg(b), a);
}
Tensor operator*(double a, const Tensor& b) {
  return ops::mul(b, a);
}
Tensor operator/(double a, const Tensor& b) {
  return ops::div(full({}, a, {.dtype = b.dtype(), .device = b.device()}), b);
}
}  // namespace tcv
