// SyncBatchNorm: batch norm whose training statistics are those of the union
// of the batches of a data-parallel group, as torch.nn.SyncBatchNorm.
//
// The op and its backward are ops::sync_batch_norm. Neither layers/ nor the
// engine depend on dist/: the group comes in as a SyncBNGroup (its size and an
// in-place sum all-reduce); dist/ddp.h makes one from a ProcessGroup
// (dist::sync_bn_group).
#pragma once

#include <memory>

#include "layers/batch_norm.h"

namespace tcv::nn {

/// The group SyncBatchNorm reduces over (declared with the op, engine/ops/nn.h).
using SyncBNGroup = ops::SyncBNGroup;

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
