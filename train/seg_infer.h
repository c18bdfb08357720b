// Segmentation inference around any model: whole-image, sliding-window
// (mmsegmentation's "slide" mode) and multi-scale + flip (TorchCV's "ms"
// test). The model is a function from normalised images to logits; the work
// stays on the images' device (resizes through the upsample op, flips through
// index_select), with autograd off.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "data/seg/loader.h"
#include "engine/tensor.h"

namespace tcv::train {

/// The model: logits (B, K, h', w') for images (B, C, h, w), on the images'
/// device. Logits of another spatial size than their input are resized to it
/// bilinearly (align_corners false), as the models' own heads do.
using SegForward = std::function<Tensor(const Tensor& images)>;

/// How one (scaled, maybe flipped) image becomes logits.
enum class SegInferMode {
  whole,  ///< one forward of the whole image
  slide,  ///< crop windows on a grid; overlapping logits averaged
};

/// Whether the mirrored image is inferred too (its logits mirrored back and averaged in).
enum class FlipTest { off, on };

/// What multi-scale and flip passes average.
enum class SegAverage {
  logits,         ///< the logits (TorchCV's ms_test and mscrop_test sum them)
  probabilities,  ///< the softmax probabilities (mmsegmentation's aug_test); log taken after
};

struct SegInferOptions {
  SegInferMode mode = SegInferMode::whole;
  /// Sliding window (h, w) and its stride (h, w).
  std::array<int64_t, 2> crop{512, 512};
  std::array<int64_t, 2> stride{341, 341};
  /// Multi-scale: the image resized by each factor (sides int(side * s + 0.5)),
  /// its logits resized back; {1.0}: the image as given.
  std::vector<double> scales{1.0};
  FlipTest flip = FlipTest::off;
  SegAverage average = SegAverage::logits;
};

/// A window [y1, y2) x [x1, x2) of the sliding grid.
struct SlideWindow {
  int64_t y1 = 0, y2 = 0, x1 = 0, x2 = 0;
  bool operator==(const SlideWindow&) const = default;
};

/// mmsegmentation's grid for an (H, W) image: max(H - crop + stride - 1, 0) /
/// stride + 1 rows of windows (columns alike); window (i, j) starts at
/// (i stride, j stride), ends at most at the image's edge, and is moved back
/// to be `crop` long where the image allows. Row-major order.
std::vector<SlideWindow> slide_windows(int64_t H, int64_t W, std::array<int64_t, 2> crop,
                                       std::array<int64_t, 2> stride);

/// Logits f32 (B, K, oh, ow) for images (B, C, H, W) (f32, any device):
/// the average over scales (and flips) of each pass's logits, resized
/// bilinearly to out_size ({0, 0}: (H, W)); with SegAverage::probabilities
/// the log of the average of each pass's softmax (log-probabilities: their
/// argmax and cross-entropy are those of the averaged probabilities). With
/// one scale of 1, no flip and mode whole, exactly the model's logits.
Tensor seg_logits(const SegForward& forward, const Tensor& images, const SegInferOptions& opts,
                  std::array<int64_t, 2> out_size = {0, 0});

/// Logits for a batch from data::SegDataLoader, aligned with its label maps:
/// f32 (B, K, Hl, Wl) where sample i's logits, inferred on its own part of
/// `images` (batch.sizes[i]), fill [0, label_sizes[i]) and the padding is 0.
/// Without labels, aligned with the images. `images` is batch.images, or its
/// copy on the device the model runs on.
Tensor seg_batch_logits(const SegForward& forward, const Tensor& images,
                        const data::SegBatch& batch, const SegInferOptions& opts);

/// The class of each pixel: argmax over dim 1 of logits (B, K, H, W), i64 (B, H, W).
Tensor seg_predict(const Tensor& logits);

}  // namespace tcv::train
