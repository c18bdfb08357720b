// Batches of pose samples with their OpenPose targets, made on worker threads
// like the detection loader's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/epoch_batches.h"
#include "data/pose/dataset.h"
#include "data/pose/targets.h"

namespace tcv::data {

/// One batch of B images of S x S pixels, targets at stride s (h = S / s, w = S / s):
///
///   images     f32 (B, 3, S, S), normalised as LoaderOptions::normalize says
///   heatmaps   f32 (B, 19, h, w): OpenPose's 18 keypoints, then the background
///   pafs       f32 (B, 38, h, w): (x, y) of each of the 19 limbs
///   masks      f32 (B, 1, h, w): 1 where the loss counts, 0 where it is ignored
///              (a masked L2 loss: sum of masks * (prediction - target)^2)
///
/// (data/pose/targets.h says how the targets are made), and per image
///
///   keypoints[i]  f32 (n_i, 17, 3): each trained person's COCO keypoints as
///                 (x, y, v) in network-input pixels (continuous coordinates)
///
/// with its data-set index, image id and size as read, (height, width).
struct PoseBatch {
  Tensor images, heatmaps, pafs, masks;
  std::vector<Tensor> keypoints;
  std::vector<int64_t> indices, image_ids;
  std::vector<std::array<int64_t, 2>> sizes;

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

/// Iterates a PoseDataset in batches through a PoseTransform, with the
/// sampling, sharding, worker and pinning behaviour of DataLoader
/// (LoaderOptions; the transform must leave every image of a batch at the same
/// size). Sample j of epoch e draws from Rng(seed', e * size + j), so a batch
/// depends only on (seed, epoch, indices). Images the data set skips (corrupt,
/// with OnCorrupt::skip) are left out of their batch.
class PoseDataLoader {
 public:
  PoseDataLoader(std::shared_ptr<const PoseDataset> dataset, PoseTransform transform,
                 PoseTargetOptions targets, LoaderOptions opts);
  ~PoseDataLoader();
  PoseDataLoader(const PoseDataLoader&) = delete;
  PoseDataLoader& operator=(const PoseDataLoader&) = delete;

  int64_t num_batches() const;
  /// Starts `epoch`, skipping its first `skip` batches. Stops any epoch in progress.
  void start_epoch(int64_t epoch, int64_t skip = 0);
  /// The next batch of the current epoch; false once the epoch is done.
  bool next(PoseBatch& out);
  /// The samples of `indices` [0, n), transformed, with their targets, collated
  /// (what a worker does), with epoch e's random streams.
  PoseBatch collate(const int64_t* indices, int64_t n, int64_t epoch) const;

  const PoseDataset& dataset() const { return *dataset_; }
  int64_t size() const { return dataset_->size(); }
  int64_t skipped() const { return dataset_->skipped(); }
  const LoaderOptions& options() const { return opts_; }
  const PoseTargetOptions& target_options() const { return targets_; }

 private:
  PoseBatch make_batch(const int64_t* indices, int64_t n, int64_t epoch) const;

  std::shared_ptr<const PoseDataset> dataset_;
  PoseTransform transform_;
  PoseTargetOptions targets_;
  LoaderOptions opts_;
  EpochBatches<PoseBatch> batches_;  // last: its workers stop before the rest goes
};

}  // namespace tcv::data
