// Losses: cross_entropy on (C), (N, C) and (N, C, H, W) logits with every
// reduction, class weights, ignore_index (the default and a class index),
// label smoothing; nll_loss likewise; mse_loss, smooth_l1_loss (several beta,
// 0 included) and binary_cross_entropy_with_logits (with and without a
// broadcast pos_weight) with broadcast targets and inputs; empty batches;
// segmentation-shaped cross-entropy (21 classes, ignore 255) and OHEM
// cross-entropy in both selection regimes.
//
// Bounds, per position p, then the reduction (γ_P over the P positions, and
// for mean the division by a sum of positive weights: γ_P + 2u relative):
//   cross_entropy: lse = m + log Σ e^(x−m) within
//     B = γ_C + u(R + |m| + |lse| + 2k + k·log C + 2) (as softmax_bounds), the
//     loss (1−ε)·w_t(lse − x_t) + ε/C·Σ_c w_c(lse − x_c) within that on every
//     term plus 2u of each term and γ_C of the smoothing sum; its gradient
//     a(q − [c = t]) + b(q·Σw − w_c), q = e^(x − lse) within q(B + u|x − lse| + 3u).
//   nll_loss: −w_t·lp_t rounds once.
//   mse (a − b)²: 3 roundings; smooth_l1: 4 of (l + |a − b|) (continuous at
//   |a − b| = β in value and slope); bce (1 − y)x + lw·softplus(−x),
//   lw = 1 + (pw − 1)y: 8 ulps of its terms' magnitudes (softplus within 3).
//   Gradients: the same ulps of the terms, and γ_m over the m positions a
//   broadcast operand collects.
//   ohem_cross_entropy: cross_entropy's sum over the kept pixels (chosen in
//   f64 from the exact probabilities; the seeded inputs keep every pixel's
//   probability far from the threshold, so each dtype keeps the same ones),
//   for mean divided by their count: 2u more relative.
#include <algorithm>
#include <cmath>

#include "ops/cases.h"

namespace tcv::testing {
namespace {

using ops::Reduction;

const char* red_name(Reduction r) {
  return r == Reduction::none ? "none" : (r == Reduction::mean ? "mean" : "sum");
}

/// Logits (N, C, d...) or (C) as rows (P, C).
Tensor rows_of(const Tensor& x) {
  if (x.dim() == 1) return x.reshape({1, x.size(0)});
  const int64_t c = x.size(1);
  Shape perm{0};
  for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return x.permute(perm).reshape({-1, c});
}

/// Rows (P, C) back in the logits' layout.
Tensor unrows(const Tensor& rows, const Shape& x) {
  if (x.size() == 1) return rows.reshape(x);
  Shape moved{x[0]};
  for (size_t d = 2; d < x.size(); ++d) moved.push_back(x[d]);
  moved.push_back(x[1]);
  Shape perm{0, static_cast<int64_t>(x.size()) - 1};
  for (size_t d = 1; d + 1 < x.size(); ++d) perm.push_back(static_cast<int64_t>(d));
  return rows.reshape(moved).permute(perm).contiguous();
}

/// The bound of the reduction of per-position values `l` with bounds `e`.
Tensor reduce_bound(const Tensor& l, const Tensor& e, Reduction red, const Tensor& weight_sum,
                    DType dt) {
  if (red == Reduction::none) return e;
  const int64_t n = std::max<int64_t>(l.numel(), 1);
  const double u = unit_roundoff(dt), g = gamma_n(n + 1, dt);
  Tensor b = ops::add(ops::sum(e), ops::mul(ops::sum(ops::abs(l)), g));
  if (red == Reduction::sum) return b;
  const Tensor mean = ops::div(ops::sum(l), weight_sum);
  return ops::add(ops::div(b, weight_sum), ops::mul(ops::abs(mean), g + 2 * u));
}

/// The upstream gradient each position sees.
Tensor position_grad(const Tensor& dy, Reduction red, const Tensor& weight_sum,
                     const Shape& positions) {
  Tensor g = dy;
  if (red == Reduction::mean) g = ops::div(g, weight_sum);
  return red == Reduction::none ? g.reshape(positions) : g.expand(positions);
}

BoundFn cross_entropy_bound(Reduction red, int64_t ignore, double ls, bool weighted) {
  return [=](const BoundArgs& a) {
    NoGradGuard ng;
    const DType dt = a.in_dtypes[0];
    const double u = unit_roundoff(dt), k = 2.0;
    const Tensor x = rows_of(a.inputs[0]);  // (P, C)
    const int64_t c = x.size(1), p = x.size(0);
    const Tensor t = a.inputs[1].reshape({p});
    const Tensor valid =
        ops::ne(t, scalar_tensor(static_cast<double>(ignore), {.dtype = DType::i64}));
    const Tensor tc = ops::where(valid, t, zeros_like(t)).reshape({p, 1});
    const Tensor w = weighted ? a.inputs[2] : ones({c}, {.dtype = DType::f64});
    const Tensor wt = ops::mul(ops::index_select(w, 0, tc.reshape({p})), valid.to(DType::f64));
    const Tensor wsum_pos = ops::sum(wt);
    Bounds b;
    b.grads.resize(a.inputs.size());
    if (p == 0 || c == 0) {
      b.outputs = {zeros({}, {.dtype = DType::f64})};
      b.grads[0] = zeros({}, {.dtype = DType::f64});
      return b;
    }
    const Tensor m = ops::max(x, 1, true).first;
    const Tensor r = ops::max(ops::abs(ops::sub(x, m)), 1, true).first;
    const Tensor lse = ops::add(m, ops::log(ops::sum(ops::exp(ops::sub(x, m)), {1}, true)));
    const double logc = std::log(static_cast<double>(c));
    const Tensor blse = ops::add(
        ops::mul(ops::add(ops::add(ops::add(r, ops::abs(m)), ops::abs(lse)), 2 * k + k * logc + 2),
                 u),
        gamma_n(c, dt));
    const Tensor xt = ops::gather(x, 1, tc);
    const Tensor nll = ops::mul(wt.reshape({p, 1}), ops::sub(lse, xt));
    const Tensor e_nll =
        ops::mul(ops::abs(wt.reshape({p, 1})),
                 ops::add(blse, ops::mul(ops::add(ops::abs(lse), ops::abs(xt)), 2 * u)));
    const Tensor wr = w.reshape({1, c});
    const Tensor sm = ops::sum(ops::mul(wr, ops::sub(lse, x)), {1}, true);
    Tensor e_sm =
        ops::sum(ops::mul(ops::abs(wr),
                          ops::add(blse, ops::mul(ops::add(ops::abs(lse), ops::abs(x)), 2 * u))),
                 {1}, true);
    e_sm = ops::add(e_sm, ops::mul(ops::sum(ops::abs(ops::mul(wr, ops::sub(lse, x))), {1}, true),
                                   gamma_n(c, dt)));
    const Tensor vf = valid.to(DType::f64).reshape({p, 1});
    const Tensor loss = ops::mul(ops::add(ops::mul(nll, 1 - ls), ops::mul(sm, ls / c)), vf);
    Tensor e = ops::add(ops::mul(e_nll, 1 - ls), ops::mul(e_sm, ls / c));
    e = ops::add(
        e,
        ops::mul(ops::add(ops::abs(ops::mul(nll, 1 - ls)), ops::abs(ops::mul(sm, ls / c))), 2 * u));
    e = ops::mul(e, vf);
    const Shape tshape = a.inputs[1].shape();
    Tensor bout = reduce_bound(loss.reshape({p}), e.reshape({p}), red, wsum_pos, dt);
    b.outputs = {red == Reduction::none ? bout.reshape(tshape) : bout};
    if (!a.dy[0].defined()) return b;
    // dx = a(q − [c = t]) + b(q·Σw − w_c).
    const Tensor gp = position_grad(a.dy[0], red, wsum_pos, {p}).reshape({p, 1});
    const Tensor q = ops::exp(ops::sub(x, lse));
    const Tensor dq =
        ops::mul(q, ops::add(ops::add(blse, ops::mul(ops::abs(ops::sub(x, lse)), u)), 3 * u));
    const Tensor onehot =
        ops::eq(ops::sub(arange(0, c, 1, {.dtype = DType::f64}).reshape({1, c}), tc.to(DType::f64)),
                0.0)
            .to(DType::f64);
    const Tensor ca = ops::abs(ops::mul(ops::mul(gp, wt.reshape({p, 1})), 1 - ls));
    const Tensor cb = ops::mul(ops::abs(ops::mul(gp, vf)), ls / c);
    const double wsum = ops::sum(w).item();
    Tensor bd = ops::mul(ca, ops::add(dq, ops::mul(ops::abs(ops::sub(q, onehot)), u)));
    Tensor smooth =
        ops::add(ops::mul(dq, std::abs(wsum)), ops::mul(q, std::abs(wsum) * gamma_n(c, dt)));
    smooth = ops::add(smooth, ops::mul(ops::add(ops::mul(q, std::abs(wsum)), ops::abs(wr)), 2 * u));
    bd = ops::add(bd, ops::mul(cb, smooth));
    const Tensor dx = rows_of(a.grads[0]);
    bd = ops::add(bd, ops::mul(ops::abs(dx), 4 * u));
    if (red == Reduction::mean)
      bd = ops::add(bd, ops::mul(ops::abs(dx), gamma_n(p + 1, dt) + 2 * u));
    b.grads[0] = unrows(bd, a.inputs[0].shape());
    return b;
  };
}

BoundFn nll_bound(Reduction red, int64_t ignore, bool weighted) {
  return [=](const BoundArgs& a) {
    NoGradGuard ng;
    const DType dt = a.in_dtypes[0];
    const double u = unit_roundoff(dt);
    const Tensor lp = rows_of(a.inputs[0]);
    const int64_t c = lp.size(1), p = lp.size(0);
    const Tensor t = a.inputs[1].reshape({p});
    const Tensor valid =
        ops::ne(t, scalar_tensor(static_cast<double>(ignore), {.dtype = DType::i64}));
    const Tensor tc = ops::where(valid, t, zeros_like(t));
    const Tensor w = weighted ? a.inputs[2] : ones({c}, {.dtype = DType::f64});
    const Tensor wt = ops::mul(ops::index_select(w, 0, tc), valid.to(DType::f64));
    const Tensor l = ops::neg(ops::mul(wt, ops::gather(lp, 1, tc.reshape({p, 1})).reshape({p})));
    Bounds b;
    b.grads.resize(a.inputs.size());
    const Tensor bout = reduce_bound(l, ops::mul(ops::abs(l), u), red, ops::sum(wt), dt);
    b.outputs = {red == Reduction::none ? bout.reshape(a.inputs[1].shape()) : bout};
    if (a.dy[0].defined()) {
      Tensor bd = ops::mul(ops::abs(a.grads[0]), 3 * u);
      if (red == Reduction::mean)
        bd = ops::add(bd, ops::mul(ops::abs(a.grads[0]), gamma_n(p + 1, dt) + 2 * u));
      b.grads[0] = bd;
    }
    return b;
  };
}

enum class Pointwise : uint8_t { mse, smooth_l1, bce };

/// Sums a full-shape tensor down to an operand's shape (its broadcast positions).
Tensor to_operand(const Tensor& full, const Shape& shape) {
  return ops::sum_to(full, shape);
}

BoundFn pointwise_bound(Pointwise kind, Reduction red, double beta, bool with_pw) {
  return [=](const BoundArgs& a) {
    NoGradGuard ng;
    const DType dt = a.in_dtypes[0];
    const double u = unit_roundoff(dt);
    const Shape full = ops::broadcast_shapes(a.inputs[0].shape(), a.inputs[1].shape());
    const Shape fullp = with_pw ? ops::broadcast_shapes(full, a.inputs[2].shape()) : full;
    const Tensor x = a.inputs[0].expand(fullp), y = a.inputs[1].expand(fullp);
    Tensor l, e, tx, ty, tpw;  // value, its bound, and each operand's gradient terms
    if (kind == Pointwise::mse) {
      const Tensor d = ops::sub(x, y);
      l = ops::square(d);
      e = ops::mul(l, 3 * u);
      tx = ty = ops::mul(ops::abs(d), 2.0);
    } else if (kind == Pointwise::smooth_l1) {
      const Tensor d = ops::abs(ops::sub(x, y));
      l = beta > 0 ? ops::where(ops::lt(d, beta), ops::mul(ops::square(d), 0.5 / beta),
                                ops::add(d, -0.5 * beta))
                   : d;
      e = ops::mul(ops::add(l, d), 4 * u);
      tx = ty = beta > 0 ? ops::clamp(ops::mul(d, 1.0 / beta), 0, 1) : ones_like(d);
    } else {
      const Tensor pw = with_pw ? a.inputs[2].expand(fullp) : ones(fullp, {.dtype = DType::f64});
      const Tensor lw = ops::add(ops::mul(ops::add(pw, -1.0), y), 1.0);
      const Tensor sp = ops::add(ops::relu(ops::neg(x)),
                                 ops::log(ops::add(ops::exp(ops::neg(ops::abs(x))), 1.0)));
      const Tensor t1 = ops::abs(ops::mul((1.0 - y), x));
      const Tensor t2 = ops::mul(ops::add(ops::abs(ops::mul(ops::add(pw, -1.0), y)), 1.0), sp);
      l = ops::add(ops::mul((1.0 - y), x), ops::mul(lw, sp));
      e = ops::mul(ops::add(ops::add(t1, t2), ops::abs(l)), 8 * u);
      const Tensor sig = ops::sigmoid(ops::neg(x));
      tx = ops::add(ops::abs((1.0 - y)), ops::mul(ops::abs(lw), sig));
      ty = ops::add(ops::abs(x), ops::mul(ops::abs(ops::add(pw, -1.0)), sp));
      tpw = ops::mul(ops::abs(y), sp);
    }
    Bounds b;
    b.grads.resize(a.inputs.size());
    const Tensor count =
        full_like(zeros({}, {.dtype = DType::f64}), static_cast<double>(l.numel()));
    const Tensor bout = reduce_bound(l.reshape({-1}), e.reshape({-1}), red, count, dt);
    b.outputs = {red == Reduction::none ? bout.reshape(fullp) : bout};
    if (!a.dy[0].defined() || l.numel() == 0) {
      for (size_t i = 0; i < a.inputs.size(); ++i)
        if (a.grads[i].defined()) b.grads[i] = zeros({}, {.dtype = DType::f64});
      return b;
    }
    const Tensor g = ops::abs(position_grad(a.dy[0], red, count, fullp));
    const double ulps = kind == Pointwise::bce ? 8 : 4;
    auto grad_bound = [&](size_t i, const Tensor& terms) {
      const Shape& s = a.inputs[i].shape();
      const int64_t m =
          std::max<int64_t>(1, shape_numel(fullp) / std::max<int64_t>(1, shape_numel(s)));
      const double f = ulps * u + gamma_n(m + 1, dt) + (red == Reduction::mean ? 2 * u : 0.0);
      return ops::mul(to_operand(ops::mul(terms, g), s), f);
    };
    if (a.grads[0].defined()) b.grads[0] = grad_bound(0, tx);
    if (a.grads[1].defined()) b.grads[1] = grad_bound(1, ty);
    if (with_pw && a.grads[2].defined()) b.grads[2] = grad_bound(2, tpw);
    return b;
  };
}

void add_class_losses(OpRegistry& r) {
  const std::vector<Reduction> reds = {Reduction::none, Reduction::mean, Reduction::sum};
  // Gradient-checked: (5, 4) logits with an ignored target, and spatial ones.
  const Tensor t5 = from_vector<int64_t>({0, 3, -100, 2, 1});
  struct Small {
    const char* name;
    Reduction r;
    double ls;
    bool weighted;
  };
  for (const Small& s :
       {Small{"mean", Reduction::mean, 0.0, false}, Small{"sum", Reduction::sum, 0.0, false},
        Small{"none", Reduction::none, 0.0, false},
        Small{"mean_smoothing", Reduction::mean, 0.15, false},
        Small{"none_smoothing", Reduction::none, 0.15, false},
        Small{"mean_weights", Reduction::mean, 0.0, true},
        Small{"mean_weights_smoothing", Reduction::mean, 0.25, true},
        Small{"sum_weights_smoothing", Reduction::sum, 0.25, true}}) {
    OpCase c{.op = "cross_entropy",
             .name = s.name,
             .inputs = {{.shape = {5, 4}}, {.value = t5}},
             .fn =
                 [s](const In& v) {
                   return ops::cross_entropy(v[0], v[1], s.r, -100, s.ls,
                                             s.weighted ? v[2] : Tensor());
                 },
             .tol = {.bound = cross_entropy_bound(s.r, -100, s.ls, s.weighted)}};
    if (s.weighted) c.inputs.push_back({.value = testing::lit({1.0, 2.0, 0.5, 1.5}, {4})});
    r.add(c);
  }
  {
    Tensor ts = class_targets({2, 2, 3}, 3, 11);
    ts.data<int64_t>()[4] = -1;
    r.add({.op = "cross_entropy",
           .name = "spatial_ignore_smoothing_weights",
           .inputs = {{.shape = {2, 3, 2, 3}},
                      {.value = ts},
                      {.value = testing::lit({0.5, 1.0, 2.0}, {3})}},
           .fn =
               [](const In& v) {
                 return ops::cross_entropy(v[0], v[1], Reduction::mean, -1, 0.1, v[2]);
               },
           .tol = {.bound = cross_entropy_bound(Reduction::mean, -1, 0.1, true)}});
  }
  for (Reduction red : reds)
    r.add({.op = "nll_loss",
           .name = std::string(red_name(red)) + "_weights",
           .inputs = {{.shape = {5, 4}, .lo = -3, .hi = 0},
                      {.value = t5},
                      {.value = testing::lit({1.0, 2.0, 0.5, 1.5}, {4})}},
           .fn = [red](const In& v) { return ops::nll_loss(v[0], v[1], red, -100, v[2]); },
           .tol = {.bound = nll_bound(red, -100, true)}});

  // The cross-device shapes: (C), (N, C), one class, a thousand, spatial.
  const Shape shapes[] = {{10},         {7, 10},      {5, 1},      {64, 1000},
                          {3, 5, 4, 6}, {2, 1000, 3}, {1, 3, 1, 1}};
  auto target_shape = [](const Shape& x) {
    Shape t;
    if (x.size() == 1) return t;
    t.push_back(x[0]);
    for (size_t i = 2; i < x.size(); ++i) t.push_back(x[i]);
    return t;
  };
  uint64_t seed = 100;
  for (const Shape& xs : shapes) {
    const int64_t classes = xs.size() == 1 ? xs[0] : xs[1];
    const Tensor weight = random_input({classes}, ++seed, DType::f64, false, 0.2, 2.0);
    for (Reduction red : reds)
      for (const double ls : {0.0, 0.1})
        for (const bool weighted : {false, true})
          for (const int64_t ignore : {int64_t(-100), int64_t(0)}) {
            const Tensor t =
                class_targets(target_shape(xs), classes, ++seed, ignore == -100, ignore);
            OpCase c{.op = "cross_entropy",
                     .name = shape_str(xs) + "_" + red_name(red) + "_ls" +
                             std::to_string(ls).substr(0, 3) + (weighted ? "_weighted" : "") +
                             "_ignore" + std::to_string(ignore),
                     .inputs = {{.shape = xs, .lo = -3, .hi = 3}, {.value = t}},
                     .fn =
                         [red, ls, ignore, weighted](const In& v) {
                           return ops::cross_entropy(v[0], v[1], red, ignore, ls,
                                                     weighted ? v[2] : Tensor());
                         },
                     .check = Check::parity_only,
                     .tol = {.bound = cross_entropy_bound(red, ignore, ls, weighted)}};
            if (weighted) c.inputs.push_back({.value = weight});
            r.add(c);
          }
    for (Reduction red : reds)
      for (const bool weighted : {false, true}) {
        const Tensor t = class_targets(target_shape(xs), classes, ++seed, true);
        OpCase c{.op = "nll_loss",
                 .name = shape_str(xs) + "_" + red_name(red) + (weighted ? "_weighted" : ""),
                 .inputs = {{.shape = xs, .lo = -5, .hi = 0}, {.value = t}},
                 .fn =
                     [red, weighted](const In& v) {
                       return ops::nll_loss(v[0], v[1], red, -100, weighted ? v[2] : Tensor());
                     },
                 .check = Check::parity_only,
                 .tol = {.bound = nll_bound(red, -100, weighted)}};
        if (weighted) c.inputs.push_back({.value = weight});
        r.add(c);
      }
  }
  for (Reduction red : reds)
    r.add({.op = "cross_entropy",
           .name = std::string("empty_batch_") + red_name(red),
           .inputs = {{.shape = {0, 5}}, {.value = class_targets({0}, 5, 5)}},
           .fn = [red](const In& v) { return ops::cross_entropy(v[0], v[1], red); },
           .dtypes = {DType::f32},
           .check = Check::parity_only,
           .tol = {.bound = cross_entropy_bound(red, -100, 0.0, false)}});
  r.add({.op = "cross_entropy",
         .name = "transposed_logits",
         .inputs = {{.shape = {33, 10}, .lo = -3, .hi = 3, .layout = Layout::permuted({1, 0})},
                    {.value = class_targets({33}, 10, 7, true)}},
         .fn = [](const In& v) { return ops::cross_entropy(v[0], v[1]); },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.bound = cross_entropy_bound(Reduction::mean, -100, 0.0, false)}});
}

/// The pixels OHEM keeps (1, else 0, per pixel): valid ones whose target
/// probability is below max(thresh, the min(min_kept, count − 1)-th smallest),
/// as TorchCV.
Tensor ohem_kept(const Tensor& logits, const Tensor& target, double thresh, int64_t min_kept) {
  const Tensor x = rows_of(logits);
  const int64_t p = x.size(0);
  const Tensor t = target.reshape({p});
  const Tensor valid = ops::ne(t, scalar_tensor(255.0, {.dtype = DType::i64}));
  const Tensor tc = ops::where(valid, t, zeros_like(t)).reshape({p, 1});
  const std::vector<double> prob =
      ops::gather(ops::softmax(x, 1), 1, tc).reshape({p}).to_vector<double>();
  const std::vector<uint8_t> ok = valid.to(DType::u8).to_vector<uint8_t>();
  std::vector<double> sorted;
  for (size_t i = 0; i < prob.size(); ++i)
    if (ok[i]) sorted.push_back(prob[i]);
  std::vector<double> kept(prob.size(), 0.0);
  if (!sorted.empty()) {
    std::sort(sorted.begin(), sorted.end());
    const auto k =
        static_cast<size_t>(std::min<int64_t>(min_kept, static_cast<int64_t>(sorted.size()) - 1));
    const double threshold = std::max(sorted[k], thresh);
    for (size_t i = 0; i < prob.size(); ++i) kept[i] = ok[i] && prob[i] < threshold ? 1.0 : 0.0;
  }
  return from_vector<double>(kept, {p});
}

BoundFn ohem_bound(double thresh, int64_t min_kept, Reduction red, bool weighted) {
  return [=](const BoundArgs& a) {
    NoGradGuard ng;
    const double u = unit_roundoff(a.in_dtypes[0]);
    const Tensor kept = ohem_kept(a.inputs[0], a.inputs[1], thresh, min_kept);
    const double count = ops::sum(kept).item();
    BoundArgs s = a;
    s.inputs[1] = ops::where(ops::gt(kept, 0.5), a.inputs[1].reshape({-1}),
                             full_like(a.inputs[1].reshape({-1}), 255.0))
                      .reshape(a.inputs[1].shape());
    const bool mean = red == Reduction::mean && count > 0;
    if (mean && a.dy[0].defined()) s.dy[0] = ops::mul(a.dy[0], 1.0 / count);
    Bounds b = cross_entropy_bound(Reduction::sum, 255, 0.0, weighted)(s);
    if (mean)
      b.outputs[0] =
          ops::add(ops::mul(b.outputs[0], 1.0 / count), ops::mul(ops::abs(a.outputs[0]), 2 * u));
    return b;
  };
}

void add_ohem_and_segmentation(OpRegistry& r) {
  // Gradient-checked: (2, 5, 3, 4) logits, 255-ignored pixels, class weights,
  // the thresh rule and the min_kept rule (the selection is locally constant
  // away from a tie at the threshold).
  const Tensor small_target = class_targets({2, 3, 4}, 5, 51, true, 255);
  const Tensor small_weight = testing::lit({1.0, 2.0, 0.5, 1.5, 0.8}, {5});
  struct Regime {
    const char* name;
    double thresh;
    int64_t min_kept;
  };
  for (const Regime& g : {Regime{"thresh", 0.6, 3}, Regime{"min_kept", 0.05, 10}})
    for (const Reduction red : {Reduction::mean, Reduction::sum})
      r.add({.op = "ohem_cross_entropy",
             .name = std::string(g.name) + "_" + red_name(red) + "_weights",
             .inputs = {{.shape = {2, 5, 3, 4}, .lo = -3, .hi = 3},
                        {.value = small_target},
                        {.value = small_weight}},
             .fn =
                 [g, red](const In& v) {
                   return ops::ohem_cross_entropy(v[0], v[1],
                                                  {.thresh = g.thresh,
                                                   .min_kept = g.min_kept,
                                                   .weight = v[2],
                                                   .reduction = red});
                 },
             .tol = {.bound = ohem_bound(g.thresh, g.min_kept, red, true)}});
  // The cross-device shapes: (2, 21, 33, 47) as a segmentation loss sees them.
  const Shape seg{2, 21, 33, 47};
  const Tensor seg_target = class_targets({2, 33, 47}, 21, 52, true, 255);
  const Tensor seg_weight = random_input({21}, 53, DType::f64, false, 0.2, 2.0);
  for (const bool weighted : {false, true}) {
    OpCase c{.op = "cross_entropy",
             .name = std::string("segmentation_ignore255") + (weighted ? "_weighted" : ""),
             .inputs = {{.shape = seg, .lo = -3, .hi = 3}, {.value = seg_target}},
             .fn =
                 [weighted](const In& v) {
                   return ops::cross_entropy(v[0], v[1], Reduction::mean, 255, 0.0,
                                             weighted ? v[2] : Tensor());
                 },
             .check = Check::parity_only,
             .tol = {.bound = cross_entropy_bound(Reduction::mean, 255, 0.0, weighted)}};
    if (weighted) c.inputs.push_back({.value = seg_weight});
    r.add(c);
  }
  for (const Regime& g : {Regime{"thresh", 0.7, 300}, Regime{"min_kept", 0.02, 2000}})
    for (const bool weighted : {false, true})
      for (const Reduction red : {Reduction::mean, Reduction::sum}) {
        OpCase c{.op = "ohem_cross_entropy",
                 .name = std::string("segmentation_") + g.name + "_" + red_name(red) +
                         (weighted ? "_weighted" : ""),
                 .inputs = {{.shape = seg, .lo = -3, .hi = 3}, {.value = seg_target}},
                 .fn =
                     [g, red, weighted](const In& v) {
                       return ops::ohem_cross_entropy(v[0], v[1],
                                                      {.thresh = g.thresh,
                                                       .min_kept = g.min_kept,
                                                       .weight = weighted ? v[2] : Tensor(),
                                                       .reduction = red});
                     },
                 .check = Check::parity_only,
                 .tol = {.bound = ohem_bound(g.thresh, g.min_kept, red, weighted)}};
        if (weighted) c.inputs.push_back({.value = seg_weight});
        r.add(c);
      }
}

void add_pointwise_losses(OpRegistry& r) {
  const std::vector<Reduction> reds = {Reduction::none, Reduction::mean, Reduction::sum};
  // Gradient-checked: inputs and targets both differentiable, targets
  // broadcast along dim 0.
  for (Reduction red : reds) {
    const std::string rn = red_name(red);
    r.add({.op = "mse_loss",
           .name = rn + "_broadcast_target",
           .inputs = {{.shape = {3, 4}}, {.shape = {4}}},
           .fn = [red](const In& v) { return ops::mse_loss(v[0], v[1], red); },
           .tol = {.bound = pointwise_bound(Pointwise::mse, red, 0, false)}});
    r.add({.op = "smooth_l1_loss",
           .name = rn + "_beta_0.4",
           .inputs = {{.shape = {3, 4}}, {.shape = {3, 4}}},
           .fn = [red](const In& v) { return ops::smooth_l1_loss(v[0], v[1], red, 0.4); },
           .grad = {.kink = 1e-3},
           .tol = {.bound = pointwise_bound(Pointwise::smooth_l1, red, 0.4, false)}});
    r.add(
        {.op = "binary_cross_entropy_with_logits",
         .name = rn,
         .inputs = {{.shape = {3, 4}, .lo = -4, .hi = 4}, {.shape = {3, 4}, .lo = 0, .hi = 1}},
         .fn =
             [red](const In& v) { return ops::binary_cross_entropy_with_logits(v[0], v[1], red); },
         .tol = {.bound = pointwise_bound(Pointwise::bce, red, 0, false)}});
  }
  r.add({.op = "binary_cross_entropy_with_logits",
         .name = "mean_pos_weight",
         .inputs = {{.shape = {3, 4}, .lo = -4, .hi = 4},
                    {.shape = {3, 4}, .lo = 0, .hi = 1},
                    {.shape = {4}, .lo = 0.5, .hi = 3}},
         .fn =
             [](const In& v) {
               return ops::binary_cross_entropy_with_logits(v[0], v[1], Reduction::mean, v[2]);
             },
         .tol = {.bound = pointwise_bound(Pointwise::bce, Reduction::mean, 0, true)}});

  // The cross-device shapes: target broadcast, input broadcast, empty.
  struct Pair {
    Shape x, y, pw;
  };
  const Pair pairs[] = {{{1000}, {1000}, {1}},
                        {{7, 33}, {7, 33}, {33}},
                        {{4, 5, 6}, {5, 6}, {6}},
                        {{4, 1, 6}, {4, 5, 6}, {5, 1}},
                        {{0, 3}, {0, 3}, {3}}};
  for (const Pair& p : pairs)
    for (Reduction red : reds) {
      const std::string tag = shape_str(p.x) + "_" + red_name(red);
      r.add({.op = "mse_loss",
             .name = tag,
             .inputs = {{.shape = p.x, .lo = -3, .hi = 3}, {.shape = p.y, .lo = -3, .hi = 3}},
             .fn = [red](const In& v) { return ops::mse_loss(v[0], v[1], red); },
             .check = Check::parity_only,
             .tol = {.bound = pointwise_bound(Pointwise::mse, red, 0, false)}});
      for (const double beta : {1.0, 0.5, 0.0})
        r.add(
            {.op = "smooth_l1_loss",
             .name = tag + "_beta" + std::to_string(beta).substr(0, 3),
             .inputs = {{.shape = p.x, .lo = -3, .hi = 3}, {.shape = p.y, .lo = -3, .hi = 3}},
             .fn = [red, beta](const In& v) { return ops::smooth_l1_loss(v[0], v[1], red, beta); },
             .check = Check::parity_only,
             .tol = {.bound = pointwise_bound(Pointwise::smooth_l1, red, beta, false)}});
      for (const bool with_pw : {false, true}) {
        // Large logits exercise the stable softplus.
        OpCase c{.op = "binary_cross_entropy_with_logits",
                 .name = tag + (with_pw ? "_pos_weight" : ""),
                 .inputs = {{.shape = p.x, .lo = -30, .hi = 30}, {.shape = p.y, .lo = 0, .hi = 1}},
                 .fn =
                     [red, with_pw](const In& v) {
                       return ops::binary_cross_entropy_with_logits(v[0], v[1], red,
                                                                    with_pw ? v[2] : Tensor());
                     },
                 .check = Check::parity_only,
                 .tol = {.bound = pointwise_bound(Pointwise::bce, red, 0, with_pw)}};
        if (with_pw) c.inputs.push_back({.shape = p.pw, .lo = 0.5, .hi = 3});
        r.add(c);
      }
    }
  r.add({.op = "mse_loss",
         .name = "transposed",
         .inputs = {{.shape = {13, 9}, .lo = -3, .hi = 3, .layout = Layout::permuted({1, 0})},
                    {.shape = {13, 9}, .lo = -3, .hi = 3}},
         .fn = [](const In& v) { return ops::mse_loss(v[0], v[1], Reduction::none); },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.bound = pointwise_bound(Pointwise::mse, Reduction::none, 0, false)}});
}

}  // namespace

void register_loss_cases(OpRegistry& r) {
  add_class_losses(r);
  add_ohem_and_segmentation(r);
  add_pointwise_losses(r);
}

}  // namespace tcv::testing
