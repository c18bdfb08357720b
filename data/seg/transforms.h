// Segmentation transforms: image and label map move together, on u8 (3, H, W)
// images and u8 (H, W) label maps, on the loader's threads. Images are
// resampled bilinearly, label maps always by nearest neighbour; pixels a crop
// adds outside the image are the mean colour in the image and 255 (ignored)
// in the label map.
//
// The training pipeline (TorchCV's and mmsegmentation's recipe):
//
//   random scale (ratio 0.5 - 2.0 of the image, or of a base size) -> random crop
//   (padding: mean colour / 255) -> horizontal flip -> photometric distortion
//   -> [the loader normalises]
//
// Random transforms draw only from the sample's Rng.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "data/seg/dataset.h"

namespace tcv::data {

/// A transform of a segmentation sample; random ones draw from rng only.
using SegTransform = std::function<void(SegSample&, Rng&)>;

// ---- deterministic ops ------------------------------------------------------------------

/// Label map u8 (H, W) resized to (h, w) by nearest neighbour: output pixel o
/// takes input floor((o + 0.5) * in / out), the input pixel whose centre is
/// nearest to the point the bilinear image resize samples (half-pixel centres;
/// torch's "nearest-exact", PIL's NEAREST), so labels stay on their pixels.
Tensor resize_labels(const Tensor& label, int64_t h, int64_t w);

/// Resizes the image to (h, w) bilinearly (half-pixel centres, no antialias:
/// torch's interpolate(align_corners=False), OpenCV's INTER_LINEAR) and the
/// label map, when it has the image's size, by nearest neighbour. A label map
/// of another size (kept at the original size for evaluation) is left alone.
void seg_resize(SegSample& s, int64_t h, int64_t w);

/// The (h, w) window at (top, left) of image and label map; the parts of the
/// window outside the image are `fill` in the image and 255 in the label map.
void seg_crop(SegSample& s, int64_t top, int64_t left, int64_t h, int64_t w,
              const std::array<uint8_t, 3>& fill);

/// Mirrors image and label map left to right.
void seg_hflip(SegSample& s);

/// The size (h, w) that fits an (H, W) image into scale = (long, short) sides
/// keeping its aspect ratio, as mmsegmentation's Resize(keep_ratio=True):
/// factor min(long / max(H, W), short / min(H, W)), sides int(side * factor + 0.5).
std::array<int64_t, 2> fit_size(int64_t H, int64_t W, std::array<int64_t, 2> scale);

// ---- photometric ops on u8 (3, H, W) images -------------------------------------------------

/// x * alpha + beta, clipped to [0, 255] and truncated (mmsegmentation's convert).
Tensor scale_shift_pixels(const Tensor& image, double alpha, double beta);
/// In HSV (hue in degrees): saturation times `saturation` (clipped to [0, 1]), hue
/// plus `hue_degrees` (wrapping); back to RGB, rounded.
Tensor adjust_hsv(const Tensor& image, double saturation, double hue_degrees);

// ---- random transforms -------------------------------------------------------------------

/// Scales image and label map by a factor uniform in `ratio`, times the factor
/// that fits the image into `base` = (long, short) when given (mmsegmentation's
/// RandomResize(scale, ratio_range, keep_ratio=True)); with base {0, 0} the
/// ratio scales the image as read (TorchCV's random resize). Sides: int(side *
/// factor + 0.5), at least 1.
struct RandomScale {
  std::array<double, 2> ratio{0.5, 2.0};
  std::array<int64_t, 2> base{0, 0};
  void operator()(SegSample& s, Rng& rng) const;
};

/// A (h, w) window at a uniformly random position within the image (or at the
/// origin along a side the image is shorter than the crop, the rest padded
/// with `fill` / 255). With cat_max_ratio < 1, up to 10 windows are drawn until
/// one holds at least two classes and no class covers cat_max_ratio of its
/// labelled pixels (mmsegmentation's RandomCrop); the last one drawn is used.
struct RandomCropSeg {
  std::array<int64_t, 2> size{512, 512};
  double cat_max_ratio = 1.0;
  std::array<uint8_t, 3> fill{0, 0, 0};
  void operator()(SegSample& s, Rng& rng) const;
};

/// Mirrors image and label map with probability p.
struct RandomFlipSeg {
  double p = 0.5;
  void operator()(SegSample& s, Rng& rng) const;
};

/// mmsegmentation's PhotoMetricDistortion: each step with probability 1/2 --
/// brightness (+ uniform(-brightness_delta, brightness_delta)), contrast
/// (x uniform(contrast)) before or after the HSV steps (a coin decides),
/// saturation (x uniform(saturation)), hue (+ 2 * randint(-hue_delta, hue_delta)
/// degrees: OpenCV's 8-bit hue counts in steps of 2 degrees). Saturation and hue
/// share one trip through HSV, kept in floating point.
struct PhotoMetricDistortion {
  double brightness_delta = 32;
  std::array<double, 2> contrast{0.5, 1.5};
  std::array<double, 2> saturation{0.5, 1.5};
  int hue_delta = 18;
  void operator()(SegSample& s, Rng& rng) const;
};

/// Applies transforms in order.
class SegCompose {
 public:
  SegCompose() = default;
  SegCompose(std::vector<SegTransform> ts) : ts_(std::move(ts)) {}
  SegCompose& add(SegTransform t) {
    ts_.push_back(std::move(t));
    return *this;
  }
  void operator()(SegSample& s, Rng& rng) const {
    for (const auto& t : ts_) t(s, rng);
  }
  size_t size() const { return ts_.size(); }

 private:
  std::vector<SegTransform> ts_;
};

// ---- pipelines ------------------------------------------------------------------------------

/// Whether the training pipeline distorts colours (PhotoMetricDistortion).
enum class Photometric { on, off };

struct SegTrainAugOptions {
  /// RandomScale's ratio range and base (long, short) size ({0, 0}: the image as read).
  std::array<double, 2> scale_ratio{0.5, 2.0};
  std::array<int64_t, 2> base_size{0, 0};
  /// Crop (h, w); {0, 0}: no crop (then images of a batch must agree in size).
  std::array<int64_t, 2> crop{512, 512};
  double cat_max_ratio = 1.0;
  double flip_prob = 0.5;
  Photometric photometric = Photometric::on;
  /// The mean colour crops pad with, 0..255 per channel (from the loader's Normalize).
  std::array<uint8_t, 3> fill{0, 0, 0};
};

/// RandomScale -> RandomCropSeg -> RandomFlipSeg -> PhotoMetricDistortion, as configured.
SegTransform seg_train_transform(const SegTrainAugOptions& o);

/// What an evaluation pipeline does with the label map when it resizes the image.
enum class EvalLabels {
  resize,  ///< nearest-neighbour to the image's new size
  keep,    ///< left at the original size (the metric compares there; the logits are resized back)
};

struct SegEvalOptions {
  /// Resize to exactly (h, w); {0, 0}: see fit.
  std::array<int64_t, 2> size{0, 0};
  /// Resize keeping the aspect ratio to fit (long, short) (mmsegmentation's
  /// test Resize); {0, 0} with size {0, 0}: the image as read.
  std::array<int64_t, 2> fit{0, 0};
  EvalLabels labels = EvalLabels::keep;
};

/// The evaluation (and prediction) pipeline: one resize, or nothing.
SegTransform seg_eval_transform(const SegEvalOptions& o);

/// The mean colour, 0..255 per channel, of a loader normalisation ((pixel / div
/// - mean) / std): round(mean * div), clamped; one value or one per channel.
std::array<uint8_t, 3> mean_fill(const std::vector<double>& mean, double div_value);

}  // namespace tcv::data
