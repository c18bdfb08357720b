// The one data loader of every task: the epoch loop (the epoch's shuffled
// order, or this rank's share of a DistributedSampler), worker threads that
// make batches ahead of the consumer and hand them out in order, pinned host
// memory, and one random stream per sample. A task supplies only its collate
// hook: how a batch is made from its samples.
//
//   BatchLoader<Batch>     the loop around any hook collate(indices, n, epoch)
//                          (classification's DataLoader in memory uses it so)
//   SampleLoader<Dataset, Batch>  a BatchLoader over a data set of samples
//                          that a transform augments, handed to the task's
//                          collate one sample at a time (detection,
//                          segmentation, pose: data/det/loader.h,
//                          data/seg/loader.h, data/pose/loader.h)
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "data/prefetch.h"
#include "data/rng.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace tcv::data {

/// x = (pixel / div_value - mean[c]) / std[c]; one mean/std entry, or one per channel.
struct Normalize {
  double div_value = 255.0;
  std::vector<double> mean{0.0};
  std::vector<double> std{1.0};
};

/// Per channel of C, the (scale, shift) with pixel · scale + shift equal to
/// (pixel / div_value - mean[c]) / std[c], from one mean/std value or one per
/// channel. Errors: "normalize.mean has 2 values for 3 channels (give 1 or 3)".
std::vector<std::pair<float, float>> pixel_affine(const Normalize& norm, int64_t C);

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  /// 0: batches are assembled on the calling thread. N > 0: N worker threads
  /// assemble up to prefetch·N batches ahead of the consumer.
  int workers = 0;
  uint64_t seed = 0;
  /// In-memory datasets, and u8 samples of a Dataset: how pixels become f32.
  /// f32 samples (already normalised by their transform) are copied as they are.
  Normalize normalize{};
  /// Batches each worker may assemble ahead of the consumer (queue bound = workers x this).
  int prefetch = 2;
  /// Data-parallel: with world_size > 1 each epoch iterates this rank's share of
  /// a DistributedSampler (padded, so every rank runs the same number of batches).
  int64_t world_size = 1;
  int64_t rank = 0;
  /// Batches land in page-locked memory (copied there on the worker thread), so
  /// their copy to a GPU runs asynchronously; a no-op without a GPU.
  bool pin_memory = false;
};

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

/// Batches of an epoch over `size` samples, each made by the collate hook
/// `collate(indices, n, epoch)` from the samples indices[0, n), on opts.workers
/// threads at most opts.prefetch·workers ahead (or on the calling thread with
/// none), returned in order; with opts.pin_memory each batch's `pin_memory()`
/// moves its tensors to page-locked memory on the thread that made it.
/// The first error a hook throws comes out of next() with its message.
template <class Batch>
class BatchLoader {
 public:
  using Collate = std::function<Batch(const int64_t* indices, int64_t n, int64_t epoch)>;

  /// Errors about the options name the loader `name` ("[DetDataLoader] ...").
  BatchLoader(int64_t size, LoaderOptions opts, const char* name, Collate collate)
      : size_(size),
        opts_(std::move(opts)),
        collate_(std::move(collate)),
        order_(size, opts_, name) {}
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  /// Batches per epoch (the last partial one counts unless drop_last).
  int64_t num_batches() const { return order_.num_batches(); }

  /// Starts `epoch` at its batch `skip` (to resume mid-epoch), stopping any
  /// epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip = 0) {
    prefetch_.stop();
    order_.set_epoch(epoch);
    const int64_t end = order_.num_batches();
    prefetch_.start(std::clamp<int64_t>(skip, 0, end), end, order_.workers(), order_.depth(),
                    [this](int64_t b) {
                      const auto [indices, n] = order_.batch(b);
                      Batch batch = collate_(indices, n, order_.epoch());
                      if (opts_.pin_memory) batch.pin_memory();
                      return batch;
                    });
  }

  /// The next batch of the current epoch; false once it is done.
  bool next(Batch& out) { return prefetch_.next(out); }

  /// The hook's batch of indices[0, n) in `epoch` (what a worker makes, unpinned).
  Batch collate(const int64_t* indices, int64_t n, int64_t epoch) const {
    return collate_(indices, n, epoch);
  }

  /// Samples in the data set.
  int64_t size() const { return size_; }
  const LoaderOptions& options() const { return opts_; }

 private:
  int64_t size_;
  LoaderOptions opts_;
  Collate collate_;
  EpochOrder order_;
  OrderedPrefetcher<Batch> prefetch_;  // last: its workers stop before the rest goes
};

/// The random stream of each sample: sample `index` of epoch `epoch` draws
/// from Rng(seed ^ key, epoch · size + index), so augmentation depends only on
/// (seed, epoch, index), never on the order, the rank or the number of
/// workers. Each task's streams have their own key.
class SampleStreams {
 public:
  SampleStreams(uint64_t seed, uint64_t key, int64_t size)
      : seed_(seed ^ key), size_(static_cast<uint64_t>(size)) {}
  Rng operator()(int64_t epoch, int64_t index) const {
    return Rng(seed_, static_cast<uint64_t>(epoch) * size_ + static_cast<uint64_t>(index));
  }

 private:
  uint64_t seed_, size_;
};

/// Images of one size stacked into a batch as they come: each a u8 (3, H, W)
/// image, normalised to f32 (B, 3, H, W) as (pixel / div_value - mean[c]) /
/// std[c] with mean and std rounded to f32 as normalize() reads them (the
/// detection and pose batches). Errors name the data set `name` and the sample.
class ImageStack {
 public:
  /// Room for `capacity` images; errors about `norm` name the op "normalize".
  ImageStack(const Normalize& norm, int64_t capacity, std::string name);
  /// Checks `norm` as the constructor does, without a batch.
  static void check(const Normalize& norm);
  /// Appends the transformed image of sample `index`; every image must have the
  /// first one's size.
  void add(const Tensor& image, int64_t index);
  /// Images added so far, and their height and width (0 before the first).
  int64_t size() const { return count_; }
  int64_t height() const { return H_; }
  int64_t width() const { return W_; }
  /// The batch: f32 (B, 3, H, W), or (0, 3, 0, 0) without images.
  Tensor take();

 private:
  std::vector<std::pair<float, float>> affine_;  // (scale, shift) per channel
  int64_t capacity_;
  std::string name_;
  Tensor images_;  // (capacity, 3, H, W) once the first image came
  int64_t count_ = 0, H_ = 0, W_ = 0;
};

/// The samples of one batch as a collate hook receives them: one at a time,
/// each loaded and transformed just before it is handed out (so the hook
/// copies it into the batch while it is still in cache), samples the data set
/// skipped left out.
template <class Sample>
class SampleSource {
 public:
  SampleSource(int64_t capacity, std::function<bool(Sample&)> next)
      : capacity_(capacity), next_(std::move(next)) {}
  /// The next sample; false after the last.
  bool next(Sample& out) { return next_(out); }
  /// The rest of the samples.
  std::vector<Sample> rest() {
    std::vector<Sample> out;
    out.reserve(static_cast<size_t>(capacity_));
    for (Sample s; next(s);) out.push_back(std::move(s));
    return out;
  }
  /// Samples asked for: at least as many as next() gives.
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  std::function<bool(Sample&)> next_;
};

/// A loader over a data set of samples (records decoded by `load(i)`; an
/// undefined image marks one the data set skipped as corrupt), each augmented
/// by a transform that draws from the sample's stream (SampleStreams with the
/// task's key), then collated by the task's hook. Skipped samples are left out
/// of their batch; a transform's error is rethrown naming the sample's file
/// (the data set's `source(i)`).
template <class Dataset, class Batch>
class SampleLoader {
 public:
  using Sample = std::decay_t<decltype(std::declval<const Dataset&>().load(0))>;
  using Transform = std::function<void(Sample&, Rng&)>;

  /// What a task gives the loader.
  struct Hooks {
    /// The loader's name in option errors ("[DetDataLoader] ...").
    const char* name;
    /// The key of the samples' random streams.
    uint64_t augment_key;
    /// The batch of the samples of `source`.
    std::function<Batch(SampleSource<Sample>& source)> collate;
  };

  SampleLoader(std::shared_ptr<const Dataset> dataset, Transform transform, LoaderOptions opts,
               Hooks hooks)
      : dataset_(std::move(dataset)),
        transform_(std::move(transform)),
        hooks_(std::move(hooks)),
        streams_(opts.seed, hooks_.augment_key, dataset_->size()),
        batches_(dataset_->size(), std::move(opts), hooks_.name,
                 [this](const int64_t* indices, int64_t n, int64_t epoch) {
                   return this->collate(indices, n, epoch);
                 }) {}
  SampleLoader(const SampleLoader&) = delete;
  SampleLoader& operator=(const SampleLoader&) = delete;

  /// Batches per epoch (the last partial one counts unless drop_last).
  int64_t num_batches() const { return batches_.num_batches(); }
  /// Starts `epoch`, skipping its first `skip` batches. Stops any epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip = 0) { batches_.start_epoch(epoch, skip); }
  /// The next batch of the current epoch; false once the epoch is done.
  bool next(Batch& out) { return batches_.next(out); }

  /// The samples indices[0, n), transformed with epoch `epoch`'s random
  /// streams and collated (what a worker does, before pinning).
  Batch collate(const int64_t* indices, int64_t n, int64_t epoch) const {
    int64_t i = 0;
    SampleSource<Sample> source(n, [&](Sample& out) {
      while (i < n) {
        const int64_t index = indices[i++];
        out = dataset_->load(index);
        if (!out.image.defined()) continue;  // skipped (corrupt)
        if (transform_) {
          Rng rng = streams_(epoch, index);
          // A transform's error names no file: say whose sample it was.
          try {
            transform_(out, rng);
          } catch (const Error& e) {
            TCV_THROW(dataset_->source(index), ": ", e.what());
          }
        }
        return true;
      }
      return false;
    });
    return hooks_.collate(source);
  }

  const Dataset& dataset() const { return *dataset_; }
  int64_t size() const { return dataset_->size(); }
  /// Samples the data set skipped so far (corrupt files).
  int64_t skipped() const { return dataset_->skipped(); }
  const LoaderOptions& options() const { return batches_.options(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  Transform transform_;
  Hooks hooks_;
  SampleStreams streams_;
  BatchLoader<Batch> batches_;  // last: its workers stop before the rest goes
};

}  // namespace tcv::data
