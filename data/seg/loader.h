// Batches of segmentation samples, assembled on worker threads like the
// classification DataLoader: images normalised to f32, label maps widened to
// i64 (what cross_entropy takes), both padded to the largest of the batch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/seg/dataset.h"
#include "data/seg/transforms.h"

namespace tcv::data {

/// One batch of B samples, on the CPU:
///
///   images  f32 (B, 3, H, W): (pixel / div - mean) / std (LoaderOptions::normalize)
///   labels  i64 (B, Hl, Wl): classes in [0, num_classes) and 255 (ignored);
///           undefined when the data set has no ground truth
///
/// Training crops give every sample the same size. Where sizes differ (an
/// evaluation batch of images as read), each image sits at the top left of
/// the batch tensor with the rest 0 (the mean colour once normalised), each
/// label map likewise with the rest 255, and sizes / label_sizes say which
/// part is the sample's own. Label maps are usually the images' size; an
/// evaluation pipeline may keep them at the original size (EvalLabels::keep).
/// Label maps are u8 through the transforms and become i64 here.
struct SegBatch {
  Tensor images;
  Tensor labels;
  std::vector<int64_t> indices;                     ///< data-set positions
  std::vector<std::array<int64_t, 2>> sizes;        ///< (h, w) of image i in `images`
  std::vector<std::array<int64_t, 2>> label_sizes;  ///< (h, w) of label map i in `labels`
  std::vector<std::array<int64_t, 2>> orig_sizes;   ///< (h, w) of image i as read

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  /// Whether every image fills the batch tensor (no padding).
  bool uniform() const;
  /// Moves images and labels to page-locked memory (LoaderOptions::pin_memory).
  void pin_memory();
};

/// Collates transformed samples (images u8 (3, h, w), label maps u8 or
/// undefined) into a batch as SegDataLoader does; skipped samples (no image)
/// are left out. Errors name `name`.
SegBatch collate_seg(std::vector<SegSample>& samples, const Normalize& norm,
                     const std::string& name);

/// Iterates a SegDataset in batches through a SegTransform, with the sampling,
/// sharding, worker and pinning behaviour of DataLoader (LoaderOptions): the
/// SampleLoader of data/loader.h with collate_seg. Sample j of epoch e draws
/// from Rng(seed', e * size + j), so a batch depends only on (seed, epoch,
/// indices), never on the number of workers. Images the data set skips
/// (corrupt, with OnCorrupt::skip) are left out of their batch.
class SegDataLoader : public SampleLoader<SegDataset, SegBatch> {
 public:
  SegDataLoader(std::shared_ptr<const SegDataset> dataset, SegTransform transform,
                LoaderOptions opts);
};

}  // namespace tcv::data
