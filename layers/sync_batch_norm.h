// SyncBatchNorm: batch norm whose training statistics are those of the union
// of the batches of a data-parallel group, as torch.nn.SyncBatchNorm.
//
// layers/ does not depend on dist/: the group comes in as a SyncBNGroup (its
// size and an in-place sum all-reduce); dist/ddp.h makes one from a
// ProcessGroup (dist::sync_bn_group).
#pragma once

#include <functional>
#include <memory>

#include "layers/batch_norm.h"

namespace tcv::nn {

/// The data-parallel group SyncBatchNorm reduces over.
struct SyncBNGroup {
  int size = 1;
  /// Sums `t` (contiguous) in place across the group and returns once done. Every
  /// rank calls it in the same order (forward, then backward, layer by layer).
  std::function<void(const Tensor& t)> all_reduce_sum;
};

/// Batch norm over (N, C, H, W) with statistics over the whole group: the sums
/// of x, x² and the element count are all-reduced in forward, the sums of dy and
/// dy·x̂ in backward (so dx is the gradient of the union-batch normalisation).
/// weight/bias gradients are the local ones (DDP averages them). Running stats
/// are updated with the group's mean and unbiased variance.
Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, double momentum, double eps,
                       const SyncBNGroup& group);

/// A BatchNorm2d that syncs its training statistics over `group`; with no
/// group, a group of size 1, or in eval mode, exactly BatchNorm2d.
class SyncBatchNorm : public BatchNorm2d {
 public:
  explicit SyncBatchNorm(int64_t num_features, BatchNormOptions opts = {},
                         std::shared_ptr<SyncBNGroup> group = nullptr);
};

/// torch's convert_sync_batchnorm: every BatchNorm2d below (and including)
/// `module` syncs over `group` from now on, keeping its parameters, buffers and
/// the handles models hold to it. Returns the number of layers converted.
int64_t convert_sync_batchnorm(Module& module, std::shared_ptr<SyncBNGroup> group);

}  // namespace tcv::nn
