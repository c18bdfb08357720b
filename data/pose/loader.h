// Batches of pose samples with their OpenPose targets, made on worker threads
// like the detection loader's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
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
  /// Moves the images and targets to page-locked memory (LoaderOptions::pin_memory).
  void pin_memory();
};

/// Collates transformed samples as PoseDataLoader does: images normalised and
/// stacked (all must have the first one's size) with their OpenPose targets at
/// `targets`' stride, and each trained person's COCO keypoints. Errors name the
/// data set `name` and the sample.
PoseBatch collate_pose(SampleSource<PoseSample>& samples, const PoseTargetOptions& targets,
                       const Normalize& norm, const std::string& name);

/// Iterates a PoseDataset in batches through a PoseTransform, with the
/// sampling, sharding, worker and pinning behaviour of DataLoader
/// (LoaderOptions; the transform must leave every image of a batch at the same
/// size): the SampleLoader of data/loader.h with collate_pose. Sample j of
/// epoch e draws from Rng(seed', e * size + j), so a batch depends only on
/// (seed, epoch, indices). Images the data set skips (corrupt, with
/// OnCorrupt::skip) are left out of their batch.
class PoseDataLoader : public SampleLoader<PoseDataset, PoseBatch> {
 public:
  PoseDataLoader(std::shared_ptr<const PoseDataset> dataset, PoseTransform transform,
                 PoseTargetOptions targets, LoaderOptions opts);
  const PoseTargetOptions& target_options() const { return targets_; }

 private:
  PoseTargetOptions targets_;
};

}  // namespace tcv::data
