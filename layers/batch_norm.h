// Batch normalisation over (N, C, H, W), as torch.nn.BatchNorm2d.
#pragma once

#include "engine/ops/nn.h"
#include "layers/module.h"

namespace tcv::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  /// Weight of the new batch statistic in the running averages.
  double momentum = 0.1;
  /// Learnable per-channel weight (init 1) and bias (init 0).
  bool affine = true;
  /// Keep running_mean/running_var/num_batches_tracked and use them in eval mode.
  bool track_running_stats = true;
};

/// Parameters "weight", "bias" (C); buffers "running_mean" (C, init 0),
/// "running_var" (C, init 1) and "num_batches_tracked" (0-d i64), as torchvision
/// names them. Training normalises with batch statistics and updates the running
/// ones (unbiased variance); eval mode uses the running statistics.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions opts = {});

  Tensor forward(const Tensor& x) override;  // (N, C, H, W) -> (N, C, H, W)
  /// relu(forward(x)), fused into the batch-norm kernels where they can (not
  /// across a SyncBatchNorm group).
  Tensor forward_relu(const Tensor& x);
  /// relu6(forward(x)), fused the same way.
  Tensor forward_relu6(const Tensor& x);
  std::string type_name() const override { return sync_group ? "SyncBatchNorm" : "BatchNorm2d"; }
  std::string extra_repr() const override;
  /// Running statistics back to mean 0, var 1, zero batches.
  void reset_running_stats();
  /// Running statistics reset, weight 1, bias 0.
  void reset_parameters();

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;               // (C) or undefined without affine
  Tensor running_mean, running_var;  // (C) or undefined without tracking
  Tensor num_batches_tracked;        // () i64 or undefined without tracking
  /// Set by convert_sync_batchnorm (layers/sync_batch_norm.h): training
  /// statistics are then those of the whole group.
  std::shared_ptr<ops::SyncBNGroup> sync_group;

 private:
  /// The activation forward_relu/forward_relu6 fuse into the output.
  enum class Fused : uint8_t { none, relu, relu6 };
  Tensor apply(const Tensor& x, Fused act);
  /// 1 on num_batches_tracked's device, kept so that counting a batch is one
  /// kernel, not a new scalar tensor each step.
  Tensor one_;
};

}  // namespace tcv::nn
