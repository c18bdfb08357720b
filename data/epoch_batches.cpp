#include "data/epoch_batches.h"

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "engine/error.h"

namespace tcv::data {

EpochOrder::EpochOrder(int64_t size, const LoaderOptions& opts, const char* loader)
    : size_(size),
      batch_size_(opts.batch_size),
      world_size_(std::max<int64_t>(opts.world_size, 1)),
      rank_(opts.rank),
      seed_(opts.seed),
      shuffle_(opts.shuffle),
      drop_last_(opts.drop_last),
      workers_(opts.workers),
      depth_(static_cast<int64_t>(opts.prefetch) * opts.workers) {
  TCV_CHECK(opts.batch_size > 0, "[", loader, "] batch_size must be positive, got ",
            opts.batch_size);
  TCV_CHECK(opts.workers >= 0, "[", loader, "] workers must be >= 0, got ", opts.workers);
  TCV_CHECK(opts.prefetch >= 1, "[", loader, "] prefetch must be >= 1, got ", opts.prefetch);
}

int64_t EpochOrder::num_batches() const {
  const int64_t n = (size_ + world_size_ - 1) / world_size_;
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void EpochOrder::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  if (world_size_ > 1) {
    DistributedSampler ds({size_, world_size_, rank_, seed_, shuffle_});
    ds.set_epoch(epoch);
    order_ = ds.indices();
  } else {
    order_ = EpochSampler(size_, seed_, shuffle_).indices(epoch);
  }
}

std::pair<const int64_t*, int64_t> EpochOrder::batch(int64_t b) const {
  const int64_t start = b * batch_size_;
  return {order_.data() + start,
          std::min<int64_t>(batch_size_, static_cast<int64_t>(order_.size()) - start)};
}

}  // namespace tcv::data
