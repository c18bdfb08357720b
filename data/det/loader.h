// Batches of detection samples: images stacked, a variable number of objects
// per image, assembled on worker threads like the classification DataLoader.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/det/dataset.h"
#include "data/epoch_batches.h"

namespace tcv::data {

/// One batch of B images. Object tensors are per image (image i has n_i
/// objects, possibly 0), all on the CPU:
///
///   images     f32 (B, 3, S, S), normalised as LoaderOptions::normalize says
///   boxes[i]   f32 (n_i, 4): x1, y1, x2, y2 as fractions of the image's width
///              and height, in [0, 1] (multiply by S for network-input pixels)
///   labels[i]  i64 (n_i): classes in [1, num_classes] (0 is the background)
///   difficult[i], iscrowd[i]  u8 (n_i): flags for evaluation
///
/// and per image its data-set index, its image id (VOC: the index, COCO: the
/// image id) and its size as read, (height, width): a detection at normalised
/// [x1, y1, x2, y2] is at [x1 W, y1 H, x2 W, y2 H] in the original image.
struct DetBatch {
  Tensor images;
  std::vector<Tensor> boxes, labels, difficult, iscrowd;
  std::vector<int64_t> indices, image_ids;
  std::vector<std::array<int64_t, 2>> sizes;

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

/// Iterates a DetDataset in batches through a DetTransform, with the sampling,
/// sharding, worker and pinning behaviour of DataLoader (LoaderOptions; the
/// transform must leave every image of a batch at the same size). Sample j of
/// epoch e draws from Rng(seed', e * size + j). Images the data set skips
/// (corrupt, with OnCorrupt::skip) are left out of their batch.
class DetDataLoader {
 public:
  DetDataLoader(std::shared_ptr<const DetDataset> dataset, DetTransform transform,
                LoaderOptions opts);
  ~DetDataLoader();
  DetDataLoader(const DetDataLoader&) = delete;
  DetDataLoader& operator=(const DetDataLoader&) = delete;

  int64_t num_batches() const;
  /// Starts `epoch`, skipping its first `skip` batches. Stops any epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip = 0);
  /// The next batch of the current epoch; false once the epoch is done.
  bool next(DetBatch& out);
  /// The samples of batch positions [0, n) of `indices`, transformed and collated
  /// (what a worker does), with epoch e's random streams.
  DetBatch collate(const int64_t* indices, int64_t n, int64_t epoch) const;

  const DetDataset& dataset() const { return *dataset_; }
  int64_t size() const { return dataset_->size(); }
  int64_t skipped() const { return dataset_->skipped(); }
  const LoaderOptions& options() const { return opts_; }

 private:
  DetBatch make_batch(const int64_t* indices, int64_t n, int64_t epoch) const;

  std::shared_ptr<const DetDataset> dataset_;
  DetTransform transform_;
  LoaderOptions opts_;
  EpochBatches<DetBatch> batches_;  // last: its workers stop before the rest goes
};

}  // namespace tcv::data
