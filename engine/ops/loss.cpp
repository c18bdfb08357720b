// Losses: cross entropy as one fused log-softmax + NLL kernel (label smoothing
// and class weights as in PyTorch 1.13), NLL over log-probabilities, and the
// pointwise losses, each with its backward beside it.
#include "kernels/cpu/loss.h"

#include <algorithm>
#include <cmath>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/loss.h"

namespace tcv::ops {

namespace {

using kernels::LossArg;
using kernels::PointwiseLoss;

// Class-indexed input viewed as (N, C, S) with targets (N, S).
struct ClassInput {
  Tensor x3;  // (N, C, S), contiguous, detached
  Tensor t2;  // (N, S) i64, contiguous
  int64_t n = 1, c = 1, s = 1;
  Shape pos_shape;  // the target's shape: (N, d1, ...) or () for 1-D input
};

ClassInput class_input(const char* op, const Tensor& x, const Tensor& target,
                       const Tensor& weight) {
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
            "] input must be f32 or f64, got ", dtype_name(x.dtype()), " ", x.shape_str());
  TCV_CHECK(x.dim() >= 1, "[", op, "] input must be (C), (N, C) or (N, C, d1, ...), got ",
            x.shape_str());
  TCV_CHECK(target.dtype() == DType::i64, "[", op, "] target must hold i64 class indices, got ",
            dtype_name(target.dtype()), " ", target.shape_str());
  TCV_CHECK(x.device() == target.device(), "[", op, "] input on ", x.device().str(), ", target on ",
            target.device().str());
  ClassInput ci;
  if (x.dim() == 1) {
    ci.c = x.size(0);
  } else {
    ci.n = x.size(0);
    ci.c = x.size(1);
    ci.pos_shape.push_back(ci.n);
    for (int64_t i = 2; i < x.dim(); ++i) {
      ci.s *= x.size(i);
      ci.pos_shape.push_back(x.size(i));
    }
  }
  TCV_CHECK(target.shape() == ci.pos_shape, "[", op, "] target ", target.shape_str(),
            " does not match input ", x.shape_str(), ": expected target shape ",
            shape_str(ci.pos_shape));
  if (weight.defined())
    TCV_CHECK(weight.dim() == 1 && weight.size(0) == ci.c && weight.dtype() == x.dtype(), "[", op,
              "] weight must be (", ci.c, ") ", dtype_name(x.dtype()), " for input ", x.shape_str(),
              ", got ", weight.shape_str(), " ", dtype_name(weight.dtype()));
  ci.x3 = x.detach().contiguous().view({ci.n, ci.c, ci.s});
  ci.t2 = target.detach().contiguous().view({ci.n, ci.s});
  return ci;
}

kernels::KTensor weight_k(const Tensor& w) {
  return w.defined() ? w.k() : kernels::KTensor{};
}

// The upstream gradient as an (N, S) descriptor: itself for reduction none,
// the broadcast scalar otherwise.
Tensor grad_positions(const Tensor& g, Reduction r, int64_t n, int64_t s) {
  return r == Reduction::none ? g.contiguous().view({n, s}) : g.reshape({1, 1}).expand({n, s});
}

// Validates the targets and returns their count and weight sum: on the host
// for CPU tensors, on the device (one small copy back) for CUDA tensors.
kernels::cpu::ClassLossStats class_targets(const char* op, const Tensor& x, const ClassInput& ci,
                                           int64_t ignore_index, const kernels::KTensor* wp) {
  if (x.device().is_cpu())
    return kernels::cpu::class_targets(op, ci.t2.k(), ci.c, ignore_index, wp);
  kernels::cuda::DeviceGuard guard(x.device().index);
  return kernels::cuda::class_targets(op, ci.t2.k(), ci.c, ignore_index, wp);
}

Tensor reduce_loss(const Tensor& per_elem, Reduction r) {
  switch (r) {
    case Reduction::none:
      return per_elem;
    case Reduction::sum:
      return sum(per_elem);
    case Reduction::mean:
      return mean(per_elem);
  }
  return per_elem;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& weight) {
  if (autocast::needs_f32(logits))
    return cross_entropy(logits.to(DType::f32), target, reduction, ignore_index, label_smoothing,
                         weight);
  TCV_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
            "[cross_entropy] label_smoothing must be in [0, 1], got ", label_smoothing);
  ClassInput ci = class_input("cross_entropy", logits, target, weight);
  backend::require_device("cross_entropy", logits.device(), {&target, &weight});
  const TensorOptions opts{.dtype = logits.dtype(), .device = logits.device()};
  const Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  const kernels::KTensor wk = weight_k(w);
  const kernels::KTensor* wp = w.defined() ? &wk : nullptr;
  const kernels::cpu::ClassLossStats st =
      class_targets("cross_entropy", logits, ci, ignore_index, wp);

  const double eps = label_smoothing;
  Tensor nll = empty({ci.n, ci.s}, opts);  // (N, S)
  Tensor lse = empty({ci.n, ci.s}, opts);  // (N, S)
  Tensor smooth = eps > 0 ? empty({ci.n, ci.s}, opts) : Tensor();
  const kernels::KTensor sk = eps > 0 ? smooth.k() : kernels::KTensor{};
  if (ci.n * ci.s > 0)
    TCV_KERNEL(logits.device(), cross_entropy_forward, nll.k(), eps > 0 ? &sk : nullptr, lse.k(),
               ci.x3.k(), ci.t2.k(), wp, ignore_index);

  // PyTorch 1.13: loss = (1 − ε)·nll_loss(...) + (ε / C)·reduce(smooth), where a
  // mean divides both terms by the weight sum of the non-ignored targets (their
  // count without class weights).
  double scale_nll = 1.0 - eps, scale_smooth = eps / static_cast<double>(ci.c);
  if (reduction == Reduction::mean) {
    scale_nll /= st.weight_sum;
    scale_smooth /= st.weight_sum;
  }
  Tensor out;
  {
    NoGradGuard ng;
    if (reduction == Reduction::none) {
      out = eps > 0 ? add(mul(nll, scale_nll), mul(smooth, scale_smooth)) : nll;
      out = out.view(ci.pos_shape);
    } else {
      out = mul(sum(nll), scale_nll);
      if (eps > 0) out = add(out, mul(sum(smooth), scale_smooth));
    }
  }
  if (autograd::needs_grad({&logits}))
    autograd::record(
        "cross_entropy", {logits}, {out},
        [sx = SavedTensor(ci.x3), t2 = ci.t2, w, sl = SavedTensor(lse), ignore_index, reduction,
         scale_nll, scale_smooth, x_shape = logits.shape()](std::vector<Tensor>& g) {
          Tensor x3 = sx.get();
          Tensor dx = empty_like(x3);
          const kernels::KTensor wk = weight_k(w);
          Tensor gp = grad_positions(g[0], reduction, x3.size(0), x3.size(2));
          if (dx.numel() > 0)
            TCV_KERNEL(x3.device(), cross_entropy_backward, dx.k(), x3.k(), t2.k(),
                       w.defined() ? &wk : nullptr, sl.get().k(), ignore_index, gp.k(), scale_nll,
                       scale_smooth);
          return std::vector<Tensor>{dx.view(x_shape)};
        });
  return out;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  if (autocast::needs_f32(log_probs))
    return nll_loss(log_probs.to(DType::f32), target, reduction, ignore_index, weight);
  ClassInput ci = class_input("nll_loss", log_probs, target, weight);
  backend::require_device("nll_loss", log_probs.device(), {&target, &weight});
  const Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  const kernels::KTensor wk = weight_k(w);
  const kernels::KTensor* wp = w.defined() ? &wk : nullptr;
  const kernels::cpu::ClassLossStats st =
      class_targets("nll_loss", log_probs, ci, ignore_index, wp);
  Tensor per = empty({ci.n, ci.s}, {.dtype = log_probs.dtype(), .device = log_probs.device()});
  if (per.numel() > 0)
    TCV_KERNEL(log_probs.device(), nll_forward, per.k(), ci.x3.k(), ci.t2.k(), wp, ignore_index);
  const double scale = reduction == Reduction::mean ? 1.0 / st.weight_sum : 1.0;
  Tensor out;
  {
    NoGradGuard ng;
    out = reduction == Reduction::none ? per.view(ci.pos_shape) : mul(sum(per), scale);
  }
  if (autograd::needs_grad({&log_probs}))
    autograd::record("nll_loss", {log_probs}, {out},
                     [t2 = ci.t2, w, ignore_index, reduction, scale, n = ci.n, c = ci.c, s = ci.s,
                      x_shape = log_probs.shape(), dt = log_probs.dtype()](std::vector<Tensor>& g) {
                       Tensor dx = empty({n, c, s}, {.dtype = dt, .device = g[0].device()});
                       const kernels::KTensor wk = weight_k(w);
                       Tensor gp = grad_positions(g[0], reduction, n, s);
                       if (dx.numel() > 0)
                         TCV_KERNEL(dx.device(), nll_backward, dx.k(), t2.k(),
                                    w.defined() ? &wk : nullptr, ignore_index, gp.k(), scale);
                       return std::vector<Tensor>{dx.view(x_shape)};
                     });
  return out;
}

Tensor ohem_cross_entropy(const Tensor& logits, const Tensor& target, const OhemOptions& o) {
  TCV_CHECK(o.min_kept >= 0, "[ohem_cross_entropy] min_kept must be >= 0, got ", o.min_kept);
  TCV_CHECK(o.reduction != Reduction::none,
            "[ohem_cross_entropy] reduction must be mean or sum (the kept pixels vary)");
  // Per pixel −log p of the target class (0 where ignored); the backward runs
  // through cross_entropy's. Targets are validated there.
  const Tensor nll = cross_entropy(logits, target, Reduction::none, o.ignore_index);  // (N, ...)
  Tensor keep, scale;  // (N, ...) f32/f64 0 or w[t]; the normaliser, a 0-d tensor
  {
    NoGradGuard ng;
    const TensorOptions fo{.dtype = nll.dtype(), .device = nll.device()};
    const Tensor valid = ne(target, full({}, static_cast<double>(o.ignore_index),
                                         {.dtype = DType::i64, .device = target.device()}));
    // p at valid pixels, +inf elsewhere, so an ignored pixel is never below a threshold.
    const Tensor prob = where(valid, exp(neg(nll.detach())), full({}, INFINITY, fo));
    const Tensor counts =
        stack({sum(cast(valid, DType::i64)), sum(cast(lt(prob, o.thresh), DType::i64))})
            .to(kCPU);  // (2): valid pixels, pixels below thresh
    const int64_t n_valid = counts.data<int64_t>()[0], n_below = counts.data<int64_t>()[1];
    const int64_t k = std::min(o.min_kept, n_valid - 1);
    Tensor kept;  // bool (N, ...)
    if (n_valid == 0 || n_below > k) {
      // p₍k₎ < thresh (or nothing to select): the threshold is thresh.
      kept = lt(prob, o.thresh);
    } else {
      // p₍k₎ >= thresh: keep what lies strictly below the k-th smallest p.
      const Tensor smallest = topk(prob.detach().flatten(), k + 1, 0, /*largest=*/false).first;
      kept = lt(prob, smallest.narrow(0, k, 1).reshape({}));
    }
    keep = cast(kept, nll.dtype());
    if (o.weight.defined()) {
      TCV_CHECK(o.weight.dim() == 1 && o.weight.size(0) == logits.size(1), "[ohem_cross_entropy] ",
                "weight must be (", logits.size(1), "), got ", o.weight.shape_str());
      const Tensor safe_t =
          where(valid, target, zeros({}, {.dtype = DType::i64, .device = target.device()}));
      keep = mul(keep, index_select(o.weight.detach().to(nll.dtype()), 0, safe_t.flatten())
                           .reshape(keep.shape()));
    }
    scale = o.reduction == Reduction::sum ? ones({}, fo)
                                          : maximum(sum(cast(kept, nll.dtype())), ones({}, fo));
  }
  return div(sum(mul(nll, keep)), scale);
}

namespace {

const char* loss_name(PointwiseLoss loss) {
  switch (loss) {
    case PointwiseLoss::mse:
      return "mse_loss";
    case PointwiseLoss::smooth_l1:
      return "smooth_l1_loss";
    case PointwiseLoss::bce_with_logits:
      return "binary_cross_entropy_with_logits";
  }
  return "loss";
}

// The elementwise loss over the broadcast shape of its operands; the
// reduction is composed afterwards from differentiable sum/mean.
Tensor pointwise(PointwiseLoss loss, const Tensor& x, const Tensor& y, const Tensor& pw,
                 double beta, Reduction reduction) {
  if (autocast::needs_f32(x) || autocast::needs_f32(y))
    return pointwise(loss, autocast::to_f32(x), autocast::to_f32(y), autocast::to_f32(pw), beta,
                     reduction);
  const char* name = loss_name(loss);
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", name,
            "] input must be f32 or f64, got ", dtype_name(x.dtype()), " ", x.shape_str());
  TCV_CHECK(y.dtype() == x.dtype(), "[", name, "] input ", x.shape_str(), " ",
            dtype_name(x.dtype()), " and target ", y.shape_str(), " ", dtype_name(y.dtype()),
            " differ in dtype");
  TCV_CHECK(x.device() == y.device(), "[", name, "] input on ", x.device().str(), ", target on ",
            y.device().str());
  Shape shape = broadcast_shapes(x.shape(), y.shape(), name);
  if (pw.defined()) {
    TCV_CHECK(pw.dtype() == x.dtype(), "[", name, "] pos_weight ", pw.shape_str(), " is ",
              dtype_name(pw.dtype()), ", input ", dtype_name(x.dtype()));
    shape = broadcast_shapes(shape, pw.shape(), name);
  }
  backend::require_device(name, x.device(), {&y, &pw});
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  const kernels::KTensor pk = pw.defined() ? pw.detach().expand(shape).k() : kernels::KTensor{};
  if (out.numel() > 0)
    TCV_KERNEL(x.device(), pointwise_loss, loss, out.k(), x.detach().expand(shape).k(),
               y.detach().expand(shape).k(), pw.defined() ? &pk : nullptr, beta);
  if (autograd::needs_grad({&x, &y, &pw})) {
    const std::array<bool, 3> need{x.requires_grad(), y.requires_grad(),
                                   pw.defined() && pw.requires_grad()};
    autograd::record(name, {x, y, pw}, {out},
                     [loss, need, beta, shape, sx = SavedTensor(x), sy = SavedTensor(y),
                      sp = SavedTensor(pw)](std::vector<Tensor>& g) {
                       Tensor xv = sx.get(), yv = sy.get(), pv = sp.defined() ? sp.get() : Tensor();
                       const kernels::KTensor pk =
                           pv.defined() ? pv.expand(shape).k() : kernels::KTensor{};
                       const kernels::KTensor gk = g[0].expand(shape).k();
                       std::vector<Tensor> grads(3);
                       constexpr std::array<LossArg, 3> args{LossArg::input, LossArg::target,
                                                             LossArg::pos_weight};
                       const std::array<Shape, 3> shapes{xv.shape(), yv.shape(),
                                                         pv.defined() ? pv.shape() : Shape{}};
                       for (size_t i = 0; i < 3; ++i) {
                         if (!need[i]) continue;
                         Tensor d = empty(shape, {.dtype = xv.dtype(), .device = xv.device()});
                         if (d.numel() > 0)
                           TCV_KERNEL(xv.device(), pointwise_loss_backward, loss, args[i], d.k(),
                                      gk, xv.expand(shape).k(), yv.expand(shape).k(),
                                      pv.defined() ? &pk : nullptr, beta);
                         grads[i] = sum_to(d, shapes[i]);
                       }
                       return grads;
                     });
  }
  return reduce_loss(out, reduction);
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return pointwise(PointwiseLoss::mse, input, target, Tensor(), 0.0, reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  TCV_CHECK(beta >= 0.0, "[smooth_l1_loss] beta must be >= 0, got ", beta);
  return pointwise(PointwiseLoss::smooth_l1, input, target, Tensor(), beta, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction, const Tensor& pos_weight) {
  return pointwise(PointwiseLoss::bce_with_logits, logits, target, pos_weight, 0.0, reduction);
}

}  // namespace tcv::ops
