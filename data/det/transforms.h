// Detection transforms: image and boxes move together, on u8 (3, H, W) images
// and boxes in pixels (data/det/dataset.h), on the loader's threads. The
// training pipeline is TorchCV's SSD recipe (configs/det/voc/ssd300_vgg16_voc_det.conf):
//
//   photometric distortion (contrast, hue, saturation, brightness, channel
//   swap, each with probability p, in a random order) -> horizontal flip ->
//   expand (zoom out onto a canvas of the mean colour) -> random IoU crop ->
//   resize to size x size (bilinear) -> [the loader normalises]
//
// Random transforms draw only from the sample's Rng.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "data/det/dataset.h"

namespace tcv::data {

// ---- deterministic ops on a sample ------------------------------------------------

/// Mirrors image and boxes left to right (x -> W - x).
void det_hflip(DetSample& s);

/// Places the image at (left, top) of a canvas of (height, width) filled with
/// `fill` (one value per channel); boxes move by (left, top).
void det_expand(DetSample& s, int64_t top, int64_t left, int64_t height, int64_t width,
                const std::array<uint8_t, 3>& fill);

/// Crops the window [x1, x2) x [y1, y2) (integer pixels, inside the image). An
/// object is kept when its box centre lies strictly inside the window; its box
/// is then clipped to the window and shifted to the window's origin. The
/// others are dropped.
void det_crop(DetSample& s, int64_t x1, int64_t y1, int64_t x2, int64_t y2);

/// Resizes the image to (height, width) bilinearly (half-pixel centres, as
/// OpenCV's INTER_LINEAR and torch's interpolate(align_corners=False)); boxes
/// scale with it.
void det_resize(DetSample& s, int64_t height, int64_t width);

/// Drops objects: difficult ones unless keep_difficult, crowd regions unless
/// keep_crowd, and always boxes without area (x2 <= x1 or y2 <= y1).
void det_drop_objects(DetSample& s, bool keep_difficult, bool keep_crowd);

/// The IoU of each box with one rectangle.
std::vector<double> box_iou_with(const std::vector<Box>& boxes, const Box& rect);

/// SSD's crop window for an (height, width) image: up to `trials` windows of
/// scale s uniform in [min_scale, 1] and aspect ratio r with r^2 uniform in
/// [max(1/2, s^2), min(2, 1/s^2)] (width s r W, height s H / r, truncated to
/// integers), at uniformly random integer offsets; the first whose IoU with at
/// least one box reaches min_iou and that holds at least one box centre
/// strictly inside is returned as {x1, y1, x2, y2}; none: an empty optional.
std::optional<std::array<int64_t, 4>> iou_crop_window(const std::vector<Box>& boxes, int64_t height,
                                                      int64_t width, double min_iou,
                                                      double min_scale, int trials, Rng& rng);

// ---- photometric ops on u8 (3, H, W) images, in place --------------------------

/// x * alpha, clipped to [0, 255] and truncated (TorchCV's RandomContrast).
void scale_intensity(Tensor& image, double alpha);
/// x + shift, clipped to [0, 255] (TorchCV's RandomBrightness: an integer shift).
void shift_intensity(Tensor& image, int64_t shift);
/// In OpenCV's float HSV (H in degrees): H += delta (wrapping), S *= factor; back
/// to RGB, clipped and truncated (TorchCV's RandomHue / RandomSaturation).
void shift_hue(Tensor& image, double delta_degrees);
void scale_saturation(Tensor& image, double factor);
/// Channel c of the result is channel perm[c] of the input.
void permute_channels(Tensor& image, const std::array<int, 3>& perm);

// ---- random transforms --------------------------------------------------------------

/// TorchCV's photometric distortion: its five ops in a random order, each
/// applied with probability p.
struct PhotometricDistort {
  double p = 0.5;
  std::array<double, 2> contrast{0.5, 1.5};
  double hue_delta = 18.0;  ///< degrees, uniform in [-hue_delta, hue_delta]
  std::array<double, 2> saturation{0.5, 1.5};
  int64_t brightness_shift = 32;  ///< integer shift uniform in [-b, b]
  bool channel_swap = true;       ///< one of the six channel orders, uniformly
  void operator()(DetSample& s, Rng& rng) const;
};

/// Flips with probability p.
struct DetRandomFlip {
  double p = 0.5;
  void operator()(DetSample& s, Rng& rng) const;
};

/// TorchCV's RandomPad (SSD's zoom out), with probability p: a canvas of
/// scale s in [1, max_scale] times the image, its aspect jittered within
/// [1/2, 2] (never below the image's size), filled with `fill`, the image at a
/// uniformly random integer offset. The canvas holds at most max_pixels
/// pixels (data.max_pixels): a larger draw shrinks to it, keeping its aspect as
/// far as the image allows; an image already above it is left as it is.
struct DetRandomExpand {
  double p = 0.6;
  double max_scale = 4.0;
  std::array<uint8_t, 3> fill{123, 117, 104};
  int64_t max_pixels = kDefaultMaxPixels;
  void operator()(DetSample& s, Rng& rng) const;
};

/// SSD's random crop: picks uniformly one of {the whole image, min IoU 0.1,
/// 0.3, 0.5, 0.7, 0.9, any window} (the list is `min_ious`, plus whole and
/// any); for a min IoU, looks for a window with iou_crop_window (TorchCV's
/// sampling; the IoU with at least one box must reach it, as in SSD's Caffe
/// implementation and torchvision's RandomIoUCrop, where TorchCV asks it of
/// every box) and crops to it (det_crop); when none is found, picks again.
/// Images without boxes are left as they are.
struct DetRandomIouCrop {
  std::vector<double> min_ious{0.1, 0.3, 0.5, 0.7, 0.9};
  double min_scale = 0.3;
  int trials = 50;
  void operator()(DetSample& s, Rng& rng) const;
};

struct SsdAugmentOptions {
  int64_t size = 300;  ///< output size x size
  bool photometric = true;
  PhotometricDistort distort{};
  DetRandomFlip flip{};
  bool expand = true;
  DetRandomExpand expand_opts{};
  bool crop = true;
  DetRandomIouCrop crop_opts{};
  /// TorchCV's data.keep_difficult (false: difficult objects are not trained on).
  bool keep_difficult = false;
  /// Crowd regions are not trained on by default (torchvision's reference scripts).
  bool keep_crowd = false;
};

/// The training pipeline above.
DetTransform ssd_train_transform(const SsdAugmentOptions& opts);

/// Evaluation: resize to size x size, every object kept.
DetTransform det_eval_transform(int64_t size);

}  // namespace tcv::data
