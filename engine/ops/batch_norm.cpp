// batch_norm: batch statistics and running-stat update in training, running
// statistics in eval, and the backward of both; sync_batch_norm: the training
// statistics of a whole data-parallel group (through SyncBNGroup's all-reduce).
#include "kernels/cpu/batch_norm.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/unary_grad.h"
#include "kernels/cuda/batch_norm.h"

namespace tcv::ops {

namespace {

void check_param(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  TCV_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "[", op, "] ", what, " ", t.shape_str(),
            " must be (", x.size(1), ") for input ", x.shape_str());
  TCV_CHECK(t.device() == x.device(), "[", op, "] ", what, " on ", t.device().str(),
            " but input on ", x.device().str());
}

// What batch_norm and sync_batch_norm check alike: per-channel parameters for
// x's channels on x's device, weight and bias in the computation dtype `cd`,
// running statistics both given or neither, a positive eps.
void check_inputs(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, DType cd, double eps) {
  check_param(op, "weight", weight, x);
  check_param(op, "bias", bias, x);
  check_param(op, "running_mean", running_mean, x);
  check_param(op, "running_var", running_var, x);
  TCV_CHECK(running_mean.defined() == running_var.defined(), "[", op,
            "] running_mean and running_var must be both defined or both undefined");
  for (const Tensor* t : {&weight, &bias})
    TCV_CHECK(!t->defined() || t->dtype() == cd, "[", op, "] weight/bias are ",
              dtype_name(t->dtype()), " but input ", dtype_name(x.dtype()), " needs ",
              dtype_name(cd));
  TCV_CHECK(eps > 0, "[", op, "] eps must be positive, got ", eps);
  backend::require_device(op, x.device(), {&weight, &bias, &running_mean, &running_var});
}

// The upstream gradient as the backward kernels take it: masked by a fused
// activation's saved output (sy), in the kernels' dtype kd, and blocked where
// x as stored now is (nothing read it row-major since the forward).
Tensor kernel_dy(Tensor& grad, const SavedTensor& sy, kernels::BnAct act, DType kd, bool blocked) {
  const auto op = act == kernels::BnAct::relu ? kernels::UnaryOp::relu : kernels::UnaryOp::relu6;
  Tensor dy = sy.defined() ? unary_grad_consume(op, grad, sy.get()) : std::move(grad);
  dy = dy.to(kd).contiguous();
  return blocked ? to_blocked(dy) : dy;
}

kernels::KTensor opt_k(const Tensor& t) {
  return t.defined() ? t.strided_desc() : kernels::KTensor{};
}

// With an activation (relu, relu6) the kernels clamp the output as they write
// it (one pass over the data fewer than batch_norm then the activation), and
// backward masks dy with the saved output, as that activation's backward does,
// before the batch-norm backward.
Tensor batch_norm_impl(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, bool training, double momentum,
                       double eps, kernels::BnAct act) {
  TCV_CHECK(x.dim() >= 2, "[batch_norm] expects input (N, C, ...), got ", x.shape_str());
  TCV_CHECK(is_floating(x.dtype()), "[batch_norm] supports f32, f64, f16 and bf16, got ",
            dtype_name(x.dtype()));
  // f16/bf16 inputs (mixed precision) compute in f32 with f32 parameters and
  // statistics; the output, the tensor saved for backward and dx stay 16-bit,
  // as in PyTorch's autocast. The CUDA kernels, and the CPU's for bf16, read and
  // write the 16-bit data directly; the CPU gets widened copies of f16 (`widen`).
  const bool half_in = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  const DType cd = half_in ? DType::f32 : x.dtype();
  const bool widen = x.dtype() == DType::f16 && x.device().is_cpu();
  const DType kd = widen ? cd : x.dtype();  // the kernels' data dtype
  check_inputs("batch_norm", x, weight, bias, running_mean, running_var, cd, eps);

  kernels::BatchNormGeom g;
  g.n = x.size(0);
  g.c = x.size(1);
  g.l = x.numel() / std::max<int64_t>(g.n * g.c, 1);
  g.eps = eps;
  g.act = act;
  // Without running statistics eval also normalizes with the batch (PyTorch's
  // track_running_stats=False).
  const bool batch_stats = training || !running_mean.defined();
  const int64_t count = g.n * g.l;
  TCV_CHECK(!batch_stats || count > 1,
            "[batch_norm] expected more than 1 value per channel when training, got input ",
            x.shape_str());

  Tensor xc = x.detach().contiguous();       // saved for backward, in x's dtype
  const Tensor xk = widen ? xc.to(cd) : xc;  // what the kernels read
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const kernels::KTensor wk = opt_k(wc), bk = opt_k(bc);
  const TensorOptions opts{.dtype = cd, .device = x.device()};
  // A blocked input (a CPU convolution's output) gives a blocked output. One
  // look at the layout: another thread may convert xk's storage meanwhile.
  const kernels::KTensor xs = xk.desc_as_stored();
  g.blocked = xs.blocked;
  Tensor y = g.blocked ? empty_blocked(x.shape(), kd)
                       : empty(x.shape(), {.dtype = kd, .device = x.device()});
  Tensor mean, var;  // (C); biased var
  if (batch_stats) {
    mean = empty({g.c}, opts);
    var = empty({g.c}, opts);
    // The kernels update running statistics of the parameters' dtype in place
    // (no extra passes or launches); others go through tensor ops below.
    const bool update = training && running_mean.defined();
    const bool in_kernel = update && running_mean.dtype() == cd && running_var.dtype() == cd &&
                           running_mean.is_contiguous() && running_var.is_contiguous();
    const kernels::KTensor rmk = in_kernel ? running_mean.strided_desc() : kernels::KTensor{};
    const kernels::KTensor rvk = in_kernel ? running_var.strided_desc() : kernels::KTensor{};
    const kernels::RunningStats running{.mean = in_kernel ? &rmk : nullptr,
                                        .var = in_kernel ? &rvk : nullptr,
                                        .momentum = momentum};
    if (x.numel() > 0)  // else no channel (training needs more than one value per channel)
      TCV_KERNEL(x.device(), batch_norm_forward_train, g, xs, wc.defined() ? &wk : nullptr,
                 bc.defined() ? &bk : nullptr, y.desc_as_stored(), mean.strided_desc(),
                 var.strided_desc(), running);
    if (in_kernel) {
      running_mean.bump_version();
      running_var.bump_version();
    } else if (update) {
      NoGradGuard no_grad;
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      running_mean.mul_(1.0 - momentum);
      running_mean.add_(mean.to(running_mean.dtype()), momentum);
      running_var.mul_(1.0 - momentum);
      running_var.add_(var.to(running_var.dtype()), momentum * unbias);
    }
  } else {
    // Copies, so a later training step updating the running stats in place does
    // not invalidate this graph.
    mean = running_mean.detach().to(cd).contiguous().clone();
    var = running_var.detach().to(cd).contiguous().clone();
    if (x.numel() > 0)
      TCV_KERNEL(x.device(), batch_norm_forward_eval, g, xs, wc.defined() ? &wk : nullptr,
                 bc.defined() ? &bk : nullptr, mean.strided_desc(), var.strided_desc(),
                 y.desc_as_stored());
  }
  if (widen) y = y.to(x.dtype());

  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    autograd::record(
        act == kernels::BnAct::relu    ? "batch_norm_relu"
        : act == kernels::BnAct::relu6 ? "batch_norm_relu6"
                                       : "batch_norm",
        {x, weight, bias}, {y},
        [g, batch_stats, need_dx, need_dw, need_db, cd, kd, widen, xdt = x.dtype(),
         sx = SavedTensor(xc), sw = SavedTensor(wc),
         sy = SavedTensor(act != kernels::BnAct::none ? y : Tensor()), mean,
         var](std::vector<Tensor>& grads) {
          const Tensor xv = widen ? sx.get().to(cd) : sx.get();
          const Tensor wv = sw.defined() ? sw.get() : Tensor();
          // x still blocked (nothing read it row-major since): dy and dx follow it.
          kernels::BatchNormGeom gb = g;
          const kernels::KTensor xvs = xv.desc_as_stored();
          gb.blocked = xvs.blocked;
          const Tensor dy = kernel_dy(grads[0], sy, g.act, kd, gb.blocked);
          const TensorOptions o{.dtype = cd, .device = dy.device()};
          Tensor dx = need_dx
                          ? (gb.blocked ? empty_blocked(xv.shape(), kd)
                                        : empty(xv.shape(), {.dtype = kd, .device = dy.device()}))
                          : Tensor();
          Tensor dweight = need_dw ? empty({g.c}, o) : Tensor();
          Tensor dbias = need_db ? empty({g.c}, o) : Tensor();
          if (dy.numel() == 0) {
            for (Tensor* t : {&dx, &dweight, &dbias})
              if (t->defined()) t->zero_();
          } else {
            const kernels::KTensor wk2 = opt_k(wv),
                                   dxk = dx.defined() ? dx.desc_as_stored() : kernels::KTensor{},
                                   dwk = opt_k(dweight), dbk = opt_k(dbias);
            TCV_KERNEL(dy.device(), batch_norm_backward, gb, batch_stats, xvs,
                       gb.blocked ? dy.desc_as_stored() : dy.strided_desc(),
                       wv.defined() ? &wk2 : nullptr, mean.strided_desc(), var.strided_desc(),
                       need_dx ? &dxk : nullptr, need_dw ? &dwk : nullptr,
                       need_db ? &dbk : nullptr);
          }
          if (widen && dx.defined()) dx = dx.to(xdt);
          return std::vector<Tensor>{dx, dweight, dbias};
        });
  }
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, const BatchNormParams& p) {
  return batch_norm_impl(x, weight, bias, std::move(running_mean), std::move(running_var),
                         p.training, p.momentum, p.eps, kernels::BnAct::none);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, const BatchNormParams& p) {
  return batch_norm_impl(x, weight, bias, std::move(running_mean), std::move(running_var),
                         p.training, p.momentum, p.eps, kernels::BnAct::relu);
}

Tensor batch_norm_relu6(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Tensor running_mean, Tensor running_var, const BatchNormParams& p) {
  return batch_norm_impl(x, weight, bias, std::move(running_mean), std::move(running_var),
                         p.training, p.momentum, p.eps, kernels::BnAct::relu6);
}

Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, const SyncBNGroup& group,
                       const SyncBatchNormParams& p) {
  TCV_CHECK(x.dim() == 4, "[sync_batch_norm] expects (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(group.all_reduce_sum != nullptr, "[sync_batch_norm] the group has no all-reduce");
  // f16/bf16 inputs (mixed precision): statistics and normalisation in f32, like batch_norm.
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16)
    return sync_batch_norm(x.to(DType::f32), weight, bias, running_mean, running_var, group, p)
        .to(x.dtype());
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64,
            "[sync_batch_norm] supports f32, f64, f16 and bf16, got ", dtype_name(x.dtype()));
  check_inputs("sync_batch_norm", x, weight, bias, running_mean, running_var, x.dtype(), p.eps);
  using Act = SyncBatchNormParams::Act;
  kernels::BatchNormGeom g;
  g.n = x.size(0);
  g.c = x.size(1);
  g.l = x.size(2) * x.size(3);
  g.eps = p.eps;
  g.act = p.act == Act::relu    ? kernels::BnAct::relu
          : p.act == Act::relu6 ? kernels::BnAct::relu6
                                : kernels::BnAct::none;
  const int64_t c = g.c;
  const Tensor xc = x.detach().contiguous();
  // One look at the layout (see batch_norm_impl): a blocked input stays blocked.
  const kernels::KTensor xs = xc.desc_as_stored();
  g.blocked = xs.blocked;
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  const TensorOptions o64{.dtype = DType::f64, .device = x.device()};

  // This rank's mean m (with the part its rounding lost: f64 precision) and
  // variance v about m, with its count n, summed over the group in f64 as
  // (n·m, n·m², n·v, n): one collective. The group's variance is then
  // mean(v) + (mean(m²) - M²), the spread within ranks and between them; only
  // the second term cancels, in f64, where E[x²] - M² in the data's precision
  // would lose the variance of data with |mean| >> std.
  Tensor mean = zeros({c}, opts), var = zeros({c}, opts), mean_rest = zeros({c}, opts);
  const double n_local = static_cast<double>(g.n * g.l);
  if (x.numel() > 0) {
    const kernels::KTensor rk = mean_rest.strided_desc();
    TCV_KERNEL(x.device(), batch_norm_stats, g, xs, mean.strided_desc(), var.strided_desc(), &rk);
  }
  Tensor y, bias_eff, rest, invstd;
  double count = 0;
  {
    NoGradGuard no_grad;
    const Tensor m64 = mean.to(DType::f64) + mean_rest.to(DType::f64), v64 = var.to(DType::f64);
    Tensor stats = ops::cat({m64 * n_local, ops::square(m64) * n_local, v64 * n_local,
                             full({1}, n_local, o64)})
                       .contiguous();
    group.all_reduce_sum(stats);
    count = stats.narrow(0, 3 * c, 1).item();
    TCV_CHECK(count > 1,
              "[sync_batch_norm] expected more than 1 value per channel over the group, "
              "got input ",
              x.shape_str());
    const Tensor gmean = stats.narrow(0, 0, c) / count;
    const Tensor between =
        ops::clamp(stats.narrow(0, c, c) / count - ops::square(gmean), 0.0, 1e300);
    const Tensor gvar = stats.narrow(0, 2 * c, c) / count + between;
    mean = gmean.to(x.dtype()).contiguous();
    var = gvar.to(x.dtype()).contiguous();
    // The kernels take x - mean about the mean rounded to x's dtype; the rest
    // goes into the shift (forward) and into dx's constant (backward), as
    // batch_norm does with its own batch's mean.
    rest = gmean - mean.to(DType::f64);
    invstd = ops::rsqrt(var.to(DType::f64) + p.eps);
    Tensor shift = bias.defined() ? bias.detach().to(DType::f64) : zeros({c}, o64);
    shift = shift -
            rest * invstd * (weight.defined() ? weight.detach().to(DType::f64) : ones({c}, o64));
    bias_eff = shift.to(x.dtype()).contiguous();
    if (running_mean.defined()) {
      running_mean.mul_(1.0 - p.momentum);
      running_mean.add_(gmean.to(running_mean.dtype()), p.momentum);
      running_var.mul_(1.0 - p.momentum);
      running_var.add_(gvar.to(running_var.dtype()), p.momentum * count / (count - 1));
    }
  }
  const Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  const kernels::KTensor wk = opt_k(wc), bk = bias_eff.strided_desc();
  y = g.blocked ? empty_blocked(x.shape(), x.dtype()) : empty(x.shape(), opts);
  if (x.numel() > 0)
    TCV_KERNEL(x.device(), batch_norm_forward_eval, g, xs, wc.defined() ? &wk : nullptr, &bk,
               mean.strided_desc(), var.strided_desc(), y.desc_as_stored());

  if (autograd::needs_grad({&x, &weight, &bias})) {
    autograd::record(
        p.act == Act::relu    ? "sync_batch_norm_relu"
        : p.act == Act::relu6 ? "sync_batch_norm_relu6"
                              : "sync_batch_norm",
        {x, weight, bias}, {y},
        [g, count, group, mean, var, rest, invstd, rest_x = rest.to(x.dtype()).contiguous(),
         need_dx = x.requires_grad(), sx = SavedTensor(xc), sw = SavedTensor(wc),
         sy = SavedTensor(g.act != kernels::BnAct::none ? y : Tensor()),
         need_dw = weight.defined() && weight.requires_grad(),
         need_db = bias.defined() && bias.requires_grad()](std::vector<Tensor>& grads) {
          const Tensor xv = sx.get(), wv = sw.defined() ? sw.get() : Tensor();
          kernels::BatchNormGeom gb = g;
          const kernels::KTensor xvs = xv.desc_as_stored();
          gb.blocked = xvs.blocked;
          const Tensor dy = kernel_dy(grads[0], sy, g.act, mean.dtype(), gb.blocked);
          const kernels::KTensor dys = gb.blocked ? dy.desc_as_stored() : dy.strided_desc();
          const TensorOptions o{.dtype = mean.dtype(), .device = dy.device()};
          const kernels::KTensor wk2 = opt_k(wv);
          // This rank's Σdy and Σdy·(x - m)·invstd (training = false: the
          // statistics are not this batch's), then Σdy·x̂ with the rest of the mean.
          Tensor sum_dy = zeros({g.c}, o), sum_dy_xm = zeros({g.c}, o);
          const kernels::KTensor sdk = sum_dy.strided_desc(), sxk = sum_dy_xm.strided_desc();
          if (dy.numel() > 0)
            TCV_KERNEL(dy.device(), batch_norm_backward, gb, false, xvs, dys,
                       wv.defined() ? &wk2 : nullptr, mean.strided_desc(), var.strided_desc(),
                       nullptr, &sxk, &sdk);
          Tensor sums;  // (Σdy, Σdy·x̂), this rank's then the group's
          {
            NoGradGuard no_grad;
            const Tensor sdy64 = sum_dy.to(DType::f64);
            sums = ops::cat({sdy64, sum_dy_xm.to(DType::f64) - rest * invstd * sdy64})
                       .to(mean.dtype())
                       .contiguous();
          }
          Tensor dweight = need_dw ? sums.narrow(0, g.c, g.c).clone() : Tensor();
          Tensor dbias = need_db ? sums.narrow(0, 0, g.c).clone() : Tensor();
          // Every rank reduces here, needed or not, so the collectives stay matched.
          group.all_reduce_sum(sums);
          Tensor dx;
          if (need_dx) {
            const Tensor gdy = sums.narrow(0, 0, g.c).contiguous();
            const Tensor gdyx = sums.narrow(0, g.c, g.c).contiguous();
            const kernels::KTensor gdk = gdy.strided_desc(), gxk = gdyx.strided_desc(),
                                   rk = rest_x.strided_desc();
            dx = gb.blocked ? empty_blocked(xv.shape(), xv.dtype()) : empty(xv.shape(), o);
            const kernels::KTensor dxk = dx.desc_as_stored();
            const kernels::GroupGradSums gs{
                .sum_dy = &gdk, .sum_dy_xhat = &gxk, .mean_rest = &rk, .count = count};
            if (dy.numel() > 0)
              TCV_KERNEL(dy.device(), batch_norm_backward, gb, true, xvs, dys,
                         wv.defined() ? &wk2 : nullptr, mean.strided_desc(), var.strided_desc(),
                         &dxk, nullptr, nullptr, &gs);
          }
          return std::vector<Tensor>{dx, dweight, dbias};
        });
  }
  return y;
}

}  // namespace tcv::ops
