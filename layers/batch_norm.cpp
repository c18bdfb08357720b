#include "layers/batch_norm.h"

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/nn.h"
#include "layers/init.h"
#include "layers/sync_batch_norm.h"

namespace tcv::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features_, BatchNormOptions opts)
    : num_features(num_features_), options(opts) {
  TCV_CHECK(num_features > 0, "[BatchNorm2d] num_features must be positive, got ", num_features);
  if (opts.affine) {
    weight = register_parameter("weight", empty({num_features}));
    bias = register_parameter("bias", empty({num_features}));
  }
  if (opts.track_running_stats) {
    running_mean = register_buffer("running_mean", empty({num_features}));
    running_var = register_buffer("running_var", empty({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", empty({}, {.dtype = DType::i64}));
  }
  reset_parameters();
}

void BatchNorm2d::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNorm2d::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  return apply(x, Fused::none);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x) {
  return apply(x, Fused::relu);
}

Tensor BatchNorm2d::forward_relu6(const Tensor& x) {
  return apply(x, Fused::relu6);
}

Tensor BatchNorm2d::apply(const Tensor& x, Fused act) {
  TCV_CHECK(x.dim() == 4, "[BatchNorm2d] expects 4-D input (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(x.size(1) == num_features, "[BatchNorm2d] expects ", num_features,
            " channels, got input ", x.shape_str());
  const bool track = options.track_running_stats;
  if (training_ && track) {
    NoGradGuard no_grad;
    if (!one_.defined() || one_.device() != num_batches_tracked.device())
      one_ = scalar_tensor(1.0, {.dtype = DType::i64, .device = num_batches_tracked.device()});
    num_batches_tracked.add_(one_);
  }
  if (training_ && sync_group && sync_group->size > 1) {
    using SyncAct = ops::SyncBatchNormParams::Act;
    return ops::sync_batch_norm(x, weight, bias, track ? running_mean : Tensor(),
                                track ? running_var : Tensor(), *sync_group,
                                {.momentum = options.momentum,
                                 .eps = options.eps,
                                 .act = act == Fused::relu    ? SyncAct::relu
                                        : act == Fused::relu6 ? SyncAct::relu6
                                                              : SyncAct::none});
  }
  // Without running statistics every forward normalises with the batch's own.
  return (act == Fused::relu    ? ops::batch_norm_relu
          : act == Fused::relu6 ? ops::batch_norm_relu6
                                : ops::batch_norm)(
      x, weight, bias, track ? running_mean : Tensor(), track ? running_var : Tensor(),
      {.training = training_ || !track, .momentum = options.momentum, .eps = options.eps});
}

std::string BatchNorm2d::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + repr_float(options.eps) +
         ", momentum=" + repr_float(options.momentum) +
         ", affine=" + (options.affine ? "True" : "False") +
         ", track_running_stats=" + (options.track_running_stats ? "True" : "False");
}

}  // namespace tcv::nn
