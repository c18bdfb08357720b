#include "layers/sync_batch_norm.h"

namespace tcv::nn {

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
