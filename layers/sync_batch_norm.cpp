#include "layers/sync_batch_norm.h"

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::nn {

Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, double momentum, double eps,
                       const SyncBNGroup& group) {
  TCV_CHECK(x.dim() == 4, "[sync_batch_norm] expects (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(group.all_reduce_sum != nullptr, "[sync_batch_norm] the group has no all-reduce");
  // f16/bf16 inputs (mixed precision): statistics and normalisation in f32, like batch_norm.
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16)
    return sync_batch_norm(x.to(DType::f32), weight, bias, running_mean, running_var, momentum, eps,
                           group)
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

SyncBatchNorm::SyncBatchNorm(int64_t num_features, BatchNormOptions opts,
                             std::shared_ptr<SyncBNGroup> group)
    : BatchNorm2d(num_features, opts) {
  sync_group = std::move(group);
}

int64_t convert_sync_batchnorm(Module& module, std::shared_ptr<SyncBNGroup> group) {
  int64_t n = 0;
  for (auto& [name, m] : module.named_modules())
    if (auto* bn = dynamic_cast<BatchNorm2d*>(m)) {
      bn->sync_group = group;
      ++n;
    }
  return n;
}

}  // namespace tcv::nn
