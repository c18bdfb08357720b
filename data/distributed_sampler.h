// The order of one rank's samples in data-parallel training, with the
// semantics of PyTorch's DistributedSampler.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tcv::data {

/// How a DistributedSampler splits a dataset.
struct DistributedSamplerOptions {
  int64_t size = 0;        // samples in the dataset
  int64_t world_size = 1;  // processes taking part
  int64_t rank = 0;        // this process, in [0, world_size)
  uint64_t seed = 0;       // the same on every rank
  bool shuffle = true;     // false: the global order is 0, 1, 2, ...
  /// false: the global order is padded by repeating its start until its length
  /// divides by world_size; true: its tail is dropped instead.
  bool drop_last = false;
};

/// One permutation of [0, size) per epoch, seeded by (seed, epoch) exactly as
/// EpochSampler does (so world_size 1 yields EpochSampler's order), the same on
/// every rank whatever the world size. It is made divisible by world_size
/// (padded from its start, or truncated with drop_last) into the global order
/// G of total_size() = num_samples() * world_size entries, and rank r takes
/// G[r], G[r + world], G[r + 2 world], ...: its j-th sample is G[j * world + r].
///
/// Batches: with b samples per rank per batch, the i-th batches of all ranks
/// together hold exactly G[i b world, (i+1) b world) (clipped to total_size()
/// for the last, partial batch): the i-th batch of one process with the global
/// batch size b * world iterating G. Before the padded tail, G is the
/// single-process permutation itself. Every rank runs the same number of
/// samples, hence the same number of steps.
class DistributedSampler {
 public:
  explicit DistributedSampler(DistributedSamplerOptions opts);

  /// Selects the epoch whose permutation indices() returns (PyTorch's set_epoch).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  /// Samples per rank per epoch: ceil(size / world), or floor with drop_last.
  int64_t num_samples() const { return num_samples_; }
  /// num_samples() * world_size: the length of the global order.
  int64_t total_size() const { return num_samples_ * opts_.world_size; }
  /// Padding entries in the global order (0 with drop_last).
  int64_t padding() const { return std::max<int64_t>(total_size() - opts_.size, 0); }
  /// Batches per epoch for b samples per batch (the last partial one counts
  /// unless drop_last_batch); the same on every rank.
  int64_t num_batches(int64_t batch_size, bool drop_last_batch = false) const;
  const DistributedSamplerOptions& options() const { return opts_; }

  /// The global order G of the current epoch (total_size() entries), the same on every rank.
  std::vector<int64_t> global_indices() const;
  /// This rank's samples for the current epoch, in order (num_samples() entries).
  std::vector<int64_t> indices() const;
  /// This rank's samples from batch `iteration` on, for batches of batch_size:
  /// indices() without its first iteration * batch_size entries, for a resume
  /// mid-epoch that sees exactly the batches an uninterrupted run would.
  std::vector<int64_t> indices_from(int64_t iteration, int64_t batch_size) const;

 private:
  DistributedSamplerOptions opts_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace tcv::data
