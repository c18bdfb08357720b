#include "data/distributed_sampler.h"

#include <algorithm>

#include "data/dataset.h"
#include "engine/error.h"

namespace tcv::data {

DistributedSampler::DistributedSampler(DistributedSamplerOptions opts) : opts_(opts) {
  TCV_CHECK(opts_.size >= 0, "[DistributedSampler] dataset size must be >= 0, got ", opts_.size);
  TCV_CHECK(opts_.world_size >= 1, "[DistributedSampler] world_size must be >= 1, got ",
            opts_.world_size);
  TCV_CHECK(opts_.rank >= 0 && opts_.rank < opts_.world_size, "[DistributedSampler] rank ",
            opts_.rank, " is not in [0, world_size=", opts_.world_size, ")");
  num_samples_ = opts_.drop_last ? opts_.size / opts_.world_size
                                 : (opts_.size + opts_.world_size - 1) / opts_.world_size;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  TCV_CHECK(epoch >= 0, "[DistributedSampler] epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

int64_t DistributedSampler::num_batches(int64_t batch_size, bool drop_last_batch) const {
  TCV_CHECK(batch_size > 0, "[DistributedSampler] batch_size must be positive, got ", batch_size);
  return drop_last_batch ? num_samples_ / batch_size : (num_samples_ + batch_size - 1) / batch_size;
}

std::vector<int64_t> DistributedSampler::global_indices() const {
  // EpochSampler's permutation, so one process sees the same order as without DDP.
  const std::vector<int64_t> perm =
      EpochSampler(opts_.size, opts_.seed, opts_.shuffle).indices(epoch_);
  const int64_t total = total_size();
  std::vector<int64_t> g(static_cast<size_t>(total));
  for (int64_t k = 0; k < total; ++k) g[k] = perm[k % opts_.size];  // repeats the start as padding
  return g;
}

std::vector<int64_t> DistributedSampler::indices() const {
  const std::vector<int64_t> g = global_indices();
  std::vector<int64_t> mine(static_cast<size_t>(num_samples_));
  for (int64_t j = 0; j < num_samples_; ++j) mine[j] = g[j * opts_.world_size + opts_.rank];
  return mine;
}

std::vector<int64_t> DistributedSampler::indices_from(int64_t iteration, int64_t batch_size) const {
  TCV_CHECK(batch_size > 0, "[DistributedSampler] batch_size must be positive, got ", batch_size);
  TCV_CHECK(iteration >= 0 && iteration <= num_batches(batch_size),
            "[DistributedSampler] cannot resume at iteration ", iteration, ": an epoch has ",
            num_batches(batch_size), " batches of ", batch_size, " on rank ", opts_.rank);
  std::vector<int64_t> mine = indices();
  const int64_t skip = std::min(iteration * batch_size, num_samples_);
  mine.erase(mine.begin(), mine.begin() + skip);
  return mine;
}

}  // namespace tcv::data
