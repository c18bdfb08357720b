#include "support/op_bounds.h"

#include <algorithm>

#include "engine/autograd.h"
#include "support/error_bound.h"

namespace tcv::testing {
namespace {

bool is_half(DType dt) {
  return dt == DType::f16 || dt == DType::bf16;
}

Tensor chan(const Tensor& t, int64_t c) {
  return t.detach().to(DType::f64).reshape({1, c, 1});
}

}  // namespace

BoundFn batch_norm_bound(const BatchNormCall& n) {
  using Act = BatchNormCall::Act;
  return [n](const BoundArgs& a) {
    const Act act = n.act;
    const double momentum = n.momentum, eps = n.eps;
    NoGradGuard ng;
    const DType xdt = a.in_dtypes[0];
    const DType pdt = n.affine ? a.in_dtypes[1] : (is_half(xdt) ? DType::f32 : xdt);
    const double scale = unit_roundoff(pdt) / unit_roundoff(DType::f32);
    const Tensor& x = a.inputs[0];
    const int64_t c = x.size(1);
    const Tensor rm = n.running ? a.inputs[n.affine ? 3 : 1] : Tensor();
    const Tensor rv = n.running ? a.inputs[n.affine ? 4 : 2] : Tensor();
    // Eval without running statistics normalizes with the batch's.
    const bool batch_stats = n.training || !n.running;
    const BatchNormBounds bb = batch_norm_f32_bounds({.x = x,
                                                      .weight = n.affine ? a.inputs[1] : Tensor(),
                                                      .bias = n.affine ? a.inputs[2] : Tensor(),
                                                      .dy = a.dy[0],
                                                      .training = batch_stats,
                                                      .running_mean = batch_stats ? Tensor() : rm,
                                                      .running_var = batch_stats ? Tensor() : rv,
                                                      .eps = eps});
    auto scaled = [&](const Tensor& t) { return ops::mul(t, scale); };
    const double u_out = unit_roundoff(xdt);
    Bounds b;
    b.outputs.resize(a.outputs.size());
    b.grads.resize(a.inputs.size());
    b.outputs[0] =
        ops::add(scaled(bb.y), ops::mul(ops::abs(a.outputs[0]), is_half(xdt) ? u_out : 0.0));
    if (n.running && n.training) {
      // r' = (1 − m)·r + m·s: m·(bound of s) + three roundings of the terms.
      const int64_t count = x.numel() / c;
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      const Tensor x3 = x.reshape({x.size(0), c, -1});
      const Tensor xm = ops::mean(x3, {0, 2}), xv = ops::var(x3, {0, 2}, 1);
      const double u = unit_roundoff(pdt);
      auto update = [&](const Tensor& r, const Tensor& s, const Tensor& es, double f) {
        const Tensor terms =
            ops::add(ops::mul(ops::abs(r), 1 - momentum), ops::mul(ops::abs(s), momentum));
        return ops::add(ops::mul(scaled(es), momentum * f), ops::mul(terms, 4 * u));
      };
      b.outputs[1] = update(rm, xm, bb.mean, 1.0);
      b.outputs[2] = update(rv, xv, bb.var, unbias);
    }
    if (!a.dy[0].defined()) return b;
    Tensor dx = scaled(bb.dx), dw = n.affine ? scaled(bb.dweight) : Tensor(),
           db = n.affine ? scaled(bb.dbias) : Tensor();
    if (act != Act::none) {
      // z = γ·x̂ + β before the activation; within y's bound of a kink the
      // mask may differ.
      const int64_t nb = x.size(0);
      const Tensor x3 = x.reshape({nb, c, -1});
      const Tensor m = batch_stats ? ops::mean(x3, {0, 2}, true) : chan(rm, c);
      const Tensor v = batch_stats ? ops::var(x3, {0, 2}, 0, true) : chan(rv, c);
      const Tensor s = ops::rsqrt(ops::add(v, eps));
      const Tensor xhat = ops::mul(ops::sub(x3, m), s);
      const Tensor g = n.affine ? chan(a.inputs[1], c) : ones({1, c, 1}, {.dtype = DType::f64});
      const Tensor beta = n.affine ? chan(a.inputs[2], c) : zeros({1, c, 1}, {.dtype = DType::f64});
      const Tensor z = ops::add(ops::mul(g, xhat), beta);
      const Tensor by = b.outputs[0].expand(x.shape()).reshape(z.shape());
      Tensor flip = ops::le(ops::abs(z), by).to(DType::f64);
      if (act == Act::relu6)
        flip = ops::add(flip, ops::le(ops::abs(ops::add(z, -6.0)), by).to(DType::f64));
      const Tensor dyf = ops::mul(ops::abs(a.dy[0].reshape(z.shape())), flip);
      const Tensor f = ops::sum(dyf, {0, 2}, true);                            // Σ|dy| flipped
      const Tensor h = ops::sum(ops::mul(dyf, ops::abs(xhat)), {0, 2}, true);  // Σ|dy·x̂| flipped
      Tensor extra = dyf;
      if (batch_stats) {
        const double count = static_cast<double>(x3.numel() / c);
        extra = ops::add(extra, ops::mul(ops::add(f, ops::mul(ops::abs(xhat), h)), 1.0 / count));
      }
      dx = ops::add(dx, ops::mul(ops::mul(ops::abs(g), s), extra).reshape(x.shape()));
      if (n.affine) {
        dw = ops::add(dw, h.reshape({c}));
        db = ops::add(db, f.reshape({c}));
      }
    }
    if (a.grads[0].defined())
      b.grads[0] = ops::add(dx, ops::mul(ops::abs(a.grads[0]), is_half(xdt) ? u_out : 0.0));
    if (n.affine) {
      if (a.grads[1].defined()) b.grads[1] = dw;
      if (a.grads[2].defined()) b.grads[2] = db;
    }
    return b;
  };
}

Tol conv2d_tol(const Shape& x, const Shape& w, const ops::Conv2dParams& p) {
  int64_t positions = x[0];
  for (int i = 0; i < 2; ++i) {
    const int64_t k = p.dilation[i] * (w[2 + i] - 1) + 1;
    positions *= (x[2 + i] + 2 * p.padding[i] - k) / p.stride[i] + 1;
  }
  const int64_t taps = w[2] * w[3];
  const int64_t terms = std::max({w[1] * taps + 3, w[0] / p.groups * taps + 2, positions + 2});
  // Winograd's growth only where it may run: the default keeps direct
  // convolution's bound (kernels/cpu/conv.h).
  const bool winograd = ops::get_conv_algo() == ops::ConvAlgo::winograd && w[2] == 3 && w[3] == 3 &&
                        p.stride[0] == 1 && p.stride[1] == 1 && p.dilation[0] == 1 &&
                        p.dilation[1] == 1 && p.groups == 1;
  return {.ulps = 1, .terms = terms, .growth = winograd ? kWinograd4x3Growth : 1.0};
}

BoundFn softmax_bound(int64_t dim, bool log) {
  return [dim, log](const BoundArgs& a) {
    const SoftmaxBounds sb = softmax_bounds(a.inputs[0], dim, log, a.dy[0], a.out_dtypes[0]);
    return Bounds{.outputs = {sb.y}, .grads = {a.dy[0].defined() ? sb.dx : Tensor()}};
  };
}

}  // namespace tcv::testing
