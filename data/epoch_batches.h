// The epoch loop every data loader shares: which samples each batch of an
// epoch holds (the epoch's shuffled order, or this rank's share of a
// DistributedSampler), assembled ahead on worker threads and handed out in
// order. A loader supplies only how a batch is made from its samples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "data/prefetch.h"

namespace tcv::data {

struct LoaderOptions;  // data/dataset.h

/// The samples of each batch of an epoch.
class EpochOrder {
 public:
  /// Over `size` samples with `opts`' batch size, shuffling, seed, drop_last
  /// and (world_size, rank); errors about the options name `loader`.
  EpochOrder(int64_t size, const LoaderOptions& opts, const char* loader);

  /// Batches per epoch (the last partial one counts unless drop_last); with
  /// several ranks, of this rank's share, which DistributedSampler pads so
  /// every rank runs the same number.
  int64_t num_batches() const;
  /// Draws the order of `epoch`.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  /// Batch b of the current epoch: its first sample index and its length.
  std::pair<const int64_t*, int64_t> batch(int64_t b) const;
  /// The options' worker threads and how many batches they may make ahead.
  int workers() const { return workers_; }
  int64_t depth() const { return depth_; }

 private:
  int64_t size_, batch_size_, world_size_, rank_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  int workers_;
  int64_t depth_;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0;
};

/// Batches of an epoch made by `make(indices, n, epoch)`, on opts.workers
/// threads at most opts.prefetch·workers ahead (or on the calling thread with
/// none), returned in order.
template <typename Batch>
class EpochBatches {
 public:
  using Make = std::function<Batch(const int64_t* indices, int64_t n, int64_t epoch)>;

  EpochBatches(int64_t size, const LoaderOptions& opts, const char* loader, Make make)
      : order_(size, opts, loader), make_(std::move(make)) {}

  int64_t num_batches() const { return order_.num_batches(); }

  /// Starts `epoch` at its batch `skip` (to resume mid-epoch), stopping any
  /// epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip) {
    prefetch_.stop();
    order_.set_epoch(epoch);
    const int64_t end = order_.num_batches();
    prefetch_.start(std::clamp<int64_t>(skip, 0, end), end, order_.workers(), order_.depth(),
                    [this](int64_t b) {
                      const auto [indices, n] = order_.batch(b);
                      return make_(indices, n, order_.epoch());
                    });
  }

  /// The next batch of the epoch; false once it is done.
  bool next(Batch& out) { return prefetch_.next(out); }

 private:
  EpochOrder order_;
  Make make_;
  OrderedPrefetcher<Batch> prefetch_;  // last: its workers stop before the rest goes
};

}  // namespace tcv::data
