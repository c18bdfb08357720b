// Batches of detection samples: images stacked, a variable number of objects
// per image, assembled on worker threads like the classification DataLoader.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/det/dataset.h"
#include "data/loader.h"

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
  /// Moves the images to page-locked memory (LoaderOptions::pin_memory).
  void pin_memory();
};

/// Collates transformed samples as DetDataLoader does: images normalised and
/// stacked (all must have the first one's size), boxes divided by the image's
/// width and height. Errors name the data set `name` and the sample.
DetBatch collate_det(SampleSource<DetSample>& samples, const Normalize& norm,
                     const std::string& name);

/// Iterates a DetDataset in batches through a DetTransform, with the sampling,
/// sharding, worker and pinning behaviour of DataLoader (LoaderOptions; the
/// transform must leave every image of a batch at the same size): the
/// SampleLoader of data/loader.h with collate_det. Sample j of epoch e draws
/// from Rng(seed', e * size + j). Images the data set skips (corrupt, with
/// OnCorrupt::skip) are left out of their batch.
class DetDataLoader : public SampleLoader<DetDataset, DetBatch> {
 public:
  DetDataLoader(std::shared_ptr<const DetDataset> dataset, DetTransform transform,
                LoaderOptions opts);
};

}  // namespace tcv::data
