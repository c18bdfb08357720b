// In-memory image classification data: a dataset of u8 images with i64
// labels, an epoch-seeded sampler, and a batch loader that assembles
// normalised f32 batches, ahead of time on worker threads when asked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/transforms.h"
#include "engine/tensor.h"

namespace tcv::data {

/// One batch: x f32 (B, C, H, W), y i64 (B).
struct Batch {
  Tensor x;
  Tensor y;
  /// Moves x and y to page-locked memory (LoaderOptions::pin_memory).
  void pin_memory();
};

/// Images u8 (N, C, H, W) and labels i64 (N), all in memory.
class ImageClassificationDataset {
 public:
  /// images: u8 (N, C, H, W) or (N, H, W) (one channel); labels: integer (N), each in
  /// [0, num_classes). `name` appears in error messages.
  ImageClassificationDataset(Tensor images, Tensor labels, int64_t num_classes,
                             std::string name = "dataset");

  /// Loads an IDX pair (e.g. train-images-idx3-ubyte.gz + train-labels-idx1-ubyte.gz);
  /// errors name the file at fault.
  static ImageClassificationDataset from_idx(const std::string& images_path,
                                             const std::string& labels_path, int64_t num_classes);

  int64_t size() const { return images_.size(0); }
  int64_t channels() const { return images_.size(1); }
  int64_t height() const { return images_.size(2); }
  int64_t width() const { return images_.size(3); }
  int64_t num_classes() const { return num_classes_; }
  const std::string& name() const { return name_; }
  const Tensor& images() const { return images_; }  // u8 (N, C, H, W)
  const Tensor& labels() const { return labels_; }  // i64 (N)

  /// The first n samples (a view; n clipped to size()).
  ImageClassificationDataset head(int64_t n) const;

  /// Gathers samples `indices[0..n)` into a normalised batch.
  Batch get_batch(const int64_t* indices, int64_t n, const Normalize& norm) const;

 private:
  Tensor images_;
  Tensor labels_;
  int64_t num_classes_;
  std::string name_;
};

/// One decoded, transformed sample: image (C, H, W) u8 or f32 and its class.
/// An undefined image marks a sample that was skipped (a corrupt file, when the
/// dataset is told to skip those); the DataLoader leaves it out of the batch.
struct Sample {
  Tensor image;
  int64_t label = 0;
  /// From Dataset::get_for_batch only: the end of the transform left for the
  /// DataLoader to apply to this u8 image while it copies it into the batch.
  Deferred deferred;
};

/// A dataset that makes samples on demand (decode + transform), for the DataLoader.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t num_classes() const = 0;
  /// Sample i; random transforms draw from `rng` only. Must be safe to call from
  /// several threads at once.
  virtual Sample get(int64_t i, Rng& rng) const = 0;
  /// Sample i for a batch: as get(), except that a trailing flip / normalize of a
  /// u8 image may be left undone and described in Sample::deferred (see
  /// Compose::apply_deferring), for the DataLoader to fuse into its copy.
  virtual Sample get_for_batch(int64_t i, Rng& rng) const { return get(i, rng); }
  /// Samples skipped so far (corrupt files); 0 for datasets that never skip.
  virtual int64_t skipped() const { return 0; }
  virtual std::string name() const { return "dataset"; }
};

/// An in-memory dataset (e.g. CIFAR, IDX) seen through a per-sample transform.
class InMemoryDataset : public Dataset {
 public:
  InMemoryDataset(std::shared_ptr<const ImageClassificationDataset> data, Transform transform = {})
      : data_(std::move(data)), transform_(std::move(transform)) {}
  int64_t size() const override { return data_->size(); }
  int64_t num_classes() const override { return data_->num_classes(); }
  Sample get(int64_t i, Rng& rng) const override;
  Sample get_for_batch(int64_t i, Rng& rng) const override;
  std::string name() const override { return data_->name(); }

 private:
  Sample make(int64_t i, Rng& rng, bool defer) const;

  std::shared_ptr<const ImageClassificationDataset> data_;
  Transform transform_;
};

/// Where the files of a known IDX dataset live under `data_dir`:
/// "fashion_mnist" and "mnist" use the standard names, with or without ".gz".
struct IdxFiles {
  std::string train_images, train_labels, test_images, test_labels;
};
IdxFiles find_idx_files(const std::string& data_dir);

/// The order of the samples in one epoch: a permutation of [0, n) that depends
/// only on (seed, epoch), or the identity when not shuffling.
class EpochSampler {
 public:
  EpochSampler(int64_t n, uint64_t seed, bool shuffle) : n_(n), seed_(seed), shuffle_(shuffle) {}
  std::vector<int64_t> indices(int64_t epoch) const;
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
  bool shuffle_;
};

/// Iterates one epoch at a time over a dataset in batches, in sampler order,
/// delivering batches in order whatever the number of workers (a BatchLoader,
/// data/loader.h). Sample j of epoch e is transformed with Rng(seed', e * size
/// + j), so augmentation depends only on (seed, epoch, index).
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const ImageClassificationDataset> dataset, LoaderOptions opts);
  /// Over any Dataset: samples (all the same shape) are stacked into f32 (B, C, H, W).
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions opts);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch (the last partial one counts unless drop_last).
  int64_t num_batches() const { return batches_.num_batches(); }
  /// Starts `epoch`, skipping its first `skip` batches (to resume mid-epoch).
  /// Stops any epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip = 0) { batches_.start_epoch(epoch, skip); }
  /// The next batch of the current epoch; false once the epoch is done.
  bool next(Batch& out) { return batches_.next(out); }
  /// The in-memory dataset (the first constructor only).
  const ImageClassificationDataset& dataset() const;
  /// Samples left out of batches so far (the Dataset's skipped() count).
  int64_t skipped() const { return source_ ? source_->skipped() : 0; }
  /// Samples in the dataset.
  int64_t size() const { return batches_.size(); }
  const LoaderOptions& options() const { return batches_.options(); }

 private:
  Batch collate(const int64_t* indices, int64_t n, int64_t epoch) const;

  std::shared_ptr<const ImageClassificationDataset> dataset_;  // in-memory, or null
  std::shared_ptr<const Dataset> source_;                      // generic, or null
  SampleStreams streams_;
  BatchLoader<Batch> batches_;  // declared last: its workers stop before the rest goes
};

}  // namespace tcv::data
