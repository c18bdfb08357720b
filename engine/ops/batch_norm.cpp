// batch_norm: batch statistics and running-stat update in training, running
// statistics in eval, and the backward of both; sync_batch_norm: the training
// statistics of a whole data-parallel group (through SyncBNGroup's all-reduce).
#include "kernels/cpu/batch_norm.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/batch_norm.h"

namespace tcv::ops {

namespace {

void check_param(const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  TCV_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "[batch_norm] ", what, " ", t.shape_str(),
            " must be (", x.size(1), ") for input ", x.shape_str());
  TCV_CHECK(t.device() == x.device(), "[batch_norm] ", what, " on ", t.device().str(),
            " but input on ", x.device().str());
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
  // as in PyTorch's autocast. The CUDA kernels read and write the 16-bit data
  // directly; the CPU loops, f32/f64 only, get widened copies (`widen`).
  const bool half_in = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  const DType cd = half_in ? DType::f32 : x.dtype();
  const bool widen = half_in && x.device().is_cpu();
  const DType kd = widen ? cd : x.dtype();  // the kernels' data dtype
  check_param("weight", weight, x);
  check_param("bias", bias, x);
  check_param("running_mean", running_mean, x);
  check_param("running_var", running_var, x);
  TCV_CHECK(running_mean.defined() == running_var.defined(),
            "[batch_norm] running_mean and running_var must be both defined or both undefined");
  for (const Tensor* t : {&weight, &bias})
    TCV_CHECK(!t->defined() || t->dtype() == cd, "[batch_norm] weight/bias are ",
              dtype_name(t->dtype()), " but input ", dtype_name(x.dtype()), " needs ",
              dtype_name(cd));
  TCV_CHECK(eps > 0, "[batch_norm] eps must be positive, got ", eps);
  backend::require_device("batch_norm", x.device(), {&weight, &bias, &running_mean, &running_var});

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
  Tensor y =
      g.blocked ? empty_blocked(x.shape()) : empty(x.shape(), {.dtype = kd, .device = x.device()});
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
          const auto op =
              g.act == kernels::BnAct::relu ? kernels::UnaryOp::relu : kernels::UnaryOp::relu6;
          Tensor dy =
              sy.defined() ? unary_grad_consume(op, grads[0], sy.get()) : std::move(grads[0]);
          dy = dy.to(kd).contiguous();
          const Tensor xv = widen ? sx.get().to(cd) : sx.get();
          const Tensor wv = sw.defined() ? sw.get() : Tensor();
          const TensorOptions o{.dtype = cd, .device = dy.device()};
          // x still blocked (nothing read it row-major since): dy and dx follow it.
          kernels::BatchNormGeom gb = g;
          const kernels::KTensor xvs = xv.desc_as_stored();
          gb.blocked = xvs.blocked;
          if (gb.blocked) dy = to_blocked(dy);
          Tensor dx = need_dx
                          ? (gb.blocked ? empty_blocked(xv.shape())
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
  const double momentum = p.momentum, eps = p.eps;
  TCV_CHECK(x.dim() == 4, "[sync_batch_norm] expects (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(group.all_reduce_sum != nullptr, "[sync_batch_norm] the group has no all-reduce");
  // f16/bf16 inputs (mixed precision): statistics and normalisation in f32, like batch_norm.
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16)
    return sync_batch_norm(x.to(DType::f32), weight, bias, running_mean, running_var, group, p)
        .to(x.dtype());
  const int64_t c = x.size(1);
  const Shape bc = {1, c, 1, 1};
  const Shape dims = {0, 2, 3};
  Tensor y, xhat, invstd, count;
  {
    NoGradGuard no_grad;
    const Tensor xd = x.detach();
    // (2C + 1): sum x, sum x², count, summed over the group in one collective.
    Tensor stats = ops::cat({ops::sum(xd, dims), ops::sum(ops::square(xd), dims),
                             full({1}, static_cast<double>(x.numel() / c),
                                  {.dtype = x.dtype(), .device = x.device()})})
                       .contiguous();
    group.all_reduce_sum(stats);
    count = stats.narrow(0, 2 * c, 1);
    const double m = count.item();
    TCV_CHECK(m > 1,
              "[sync_batch_norm] expected more than 1 value per channel over the group, "
              "got input ",
              x.shape_str());
    const Tensor mean = stats.narrow(0, 0, c) / m;
    const Tensor var = ops::clamp(stats.narrow(0, c, c) / m - ops::square(mean), 0.0, 1e300);
    invstd = ops::rsqrt(var + eps);
    xhat = (xd - mean.view(bc)) * invstd.view(bc);
    y = xhat;
    if (weight.defined()) y = y * weight.detach().view(bc);
    if (bias.defined()) y = y + bias.detach().view(bc);
    if (running_mean.defined()) {
      running_mean.mul_(1.0 - momentum);
      running_mean.add_(mean.to(running_mean.dtype()), momentum);
      running_var.mul_(1.0 - momentum);
      running_var.add_(var.to(running_var.dtype()), momentum * m / (m - 1));
    }
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const double m = count.item();
    autograd::record(
        "sync_batch_norm", {x, weight, bias}, {y},
        [xhat, invstd, m, bc, dims, group, w = weight.defined() ? weight.detach() : Tensor(),
         need_dw = weight.defined() && weight.requires_grad(),
         need_db = bias.defined() && bias.requires_grad()](std::vector<Tensor>& grads) {
          const Tensor dy = grads[0];
          const int64_t ch = xhat.size(1);
          const Tensor sum_dy = ops::sum(dy, dims);
          const Tensor sum_dy_xhat = ops::sum(dy * xhat, dims);
          Tensor dweight = need_dw ? sum_dy_xhat : Tensor();
          Tensor dbias = need_db ? sum_dy : Tensor();
          // Every rank reduces here, needed or not, so the collectives stay matched.
          Tensor g = ops::cat({sum_dy, sum_dy_xhat}).contiguous();
          group.all_reduce_sum(g);
          const Tensor mean_dy = g.narrow(0, 0, ch) / m;
          const Tensor mean_dy_xhat = g.narrow(0, ch, ch) / m;
          Tensor scale = invstd;
          if (w.defined()) scale = scale * w;
          Tensor dx = (dy - mean_dy.view(bc) - xhat * mean_dy_xhat.view(bc)) * scale.view(bc);
          return std::vector<Tensor>{dx, dweight, dbias};
        });
  }
  return y;
}

}  // namespace tcv::ops
