// Image transforms for classification, on u8 or f32 (C, H, W) tensors, with
// torchvision's semantics: the functional ops (resize, crops, flips, colour
// adjustments, normalize) follow torchvision.transforms.functional on tensors,
// the random transforms follow torchvision's parameter sampling. Random
// transforms draw from an explicit per-sample stream (Rng), so a sample's
// augmentation depends only on (seed, epoch, index), never on thread count.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "data/rng.h"
#include "engine/tensor.h"

namespace tcv::data {

/// A transform: image (C, H, W) u8 or f32 in, image out; random ones draw from rng.
using Transform = std::function<Tensor(const Tensor&, Rng&)>;

// ---- functional ops (deterministic) ----------------------------------------

/// Whether bilinear resizing filters the image when it shrinks it.
enum class Antialias {
  /// torch's interpolate(mode="bilinear", align_corners=False, antialias=False):
  /// two taps per output; u8 images are computed in f32 and rounded back.
  off,
  /// PIL's Image.resize(BILINEAR) (what torchvision does on PIL images): the
  /// triangle filter widened by the scale factor when shrinking; u8 images in
  /// PIL's fixed point, so u8 results equal PIL's.
  on,
};

/// Bilinear resize to (h, w); see Antialias.
Tensor resize(const Tensor& img, int64_t h, int64_t w, Antialias antialias = Antialias::off);
/// The (h, w) window at (top, left) resized to (oh, ow), as torchvision's
/// resized_crop (crop, then resize), without copying the window out first.
Tensor resized_crop(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w, int64_t oh,
                    int64_t ow, Antialias antialias = Antialias::on);
/// Resizes so the shorter side is `size`, keeping the aspect ratio the way
/// torchvision does (the longer side is int(size * long / short)); `max_size`
/// (0 = none) caps the longer side.
Tensor resize_shorter(const Tensor& img, int64_t size, int64_t max_size = 0,
                      Antialias antialias = Antialias::off);
/// The (h, w) window at (top, left); parts outside the image are zero (as torchvision's crop).
Tensor crop(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w);
/// The central (h, w) window, offsets rounded like torchvision (half to even);
/// zero-padded when the image is smaller than the crop.
Tensor center_crop(const Tensor& img, int64_t h, int64_t w);
/// Pads each side with a constant: left, top, right, bottom.
Tensor pad(const Tensor& img, int64_t left, int64_t top, int64_t right, int64_t bottom,
           double fill = 0.0);
/// Mirrors left to right.
Tensor hflip(const Tensor& img);
/// torchvision's rgb_to_grayscale: 0.2989 R + 0.587 G + 0.114 B (u8 truncated), (1, H, W).
Tensor rgb_to_grayscale(const Tensor& img);
/// torchvision's adjust_brightness / adjust_contrast / adjust_saturation / adjust_hue.
/// u8 results are truncated as torchvision's _blend does; hue_factor in [-0.5, 0.5].
Tensor adjust_brightness(const Tensor& img, double factor);
Tensor adjust_contrast(const Tensor& img, double factor);
Tensor adjust_saturation(const Tensor& img, double factor);
Tensor adjust_hue(const Tensor& img, double hue_factor);
/// u8 -> f32 in [0, 1] (pixel / 255), like ToTensor; f32 is returned as is.
Tensor to_float(const Tensor& img);
/// (x - mean[c]) / std[c] on f32 images (u8 are first scaled to [0, 1]);
/// one value, or one per channel. Returns f32.
Tensor normalize(const Tensor& img, const std::vector<double>& mean,
                 const std::vector<double>& std);

// ---- transforms -------------------------------------------------------------

/// Resize: shorter side to `size` (h == 0), or exactly to (h, w).
struct Resize {
  int64_t size = 0;
  int64_t w = 0;  // with size as h: resize to (size, w)
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

struct CenterCrop {
  int64_t size;
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

/// torchvision's RandomResizedCrop: 10 tries of (scale, log-uniform ratio), then
/// the central crop clamped to the ratio range; the crop is resized to size x size
/// (by default as torchvision does on PIL images: antialiased, see Antialias).
struct RandomResizedCrop {
  int64_t size;
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
  Antialias antialias = Antialias::on;
  /// The window (top, left, h, w) for an (H, W) image.
  std::array<int64_t, 4> params(int64_t H, int64_t W, Rng& rng) const;
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

/// torchvision's RandomCrop: pad `padding` on every side with `fill`, then a uniformly
/// placed size x size window (pad_if_needed pads a smaller image up to the size).
struct RandomCrop {
  int64_t size;
  int64_t padding = 0;
  bool pad_if_needed = false;
  double fill = 0.0;
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

struct RandomHorizontalFlip {
  double p = 0.5;
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

/// torchvision's ColorJitter: factors uniform in [max(0, 1 - b), 1 + b] (hue in
/// [-h, h]); the four adjustments are applied in a random order.
struct ColorJitter {
  double brightness = 0.0, contrast = 0.0, saturation = 0.0, hue = 0.0;
  Tensor operator()(const Tensor& img, Rng& rng) const;
};

/// Normalize as a transform (see normalize()).
struct NormalizeImage {
  std::vector<double> mean, std;
  Tensor operator()(const Tensor& img, Rng&) const { return normalize(img, mean, std); }
};

/// u8 -> f32 in [0, 1].
struct ToFloat {
  Tensor operator()(const Tensor& img, Rng&) const { return to_float(img); }
};

/// The end of a pipeline left undone for the consumer of a u8 image, which
/// applies it as it copies the pixels out (the DataLoader, into the batch):
/// mirror left to right when `flip`, then, when `normalize`, produce f32
/// (pixel / 255 - mean[c]) / std[c], exactly as normalize() on the u8 image.
struct Deferred {
  bool flip = false;
  bool normalize = false;
  std::vector<double> mean, std;
};

/// Per-channel (mean, std) for C channels from one value or one per channel, as
/// normalize() reads them; errors name the op `op`.
std::vector<std::pair<float, float>> normalize_coeffs(const std::vector<double>& mean,
                                                      const std::vector<double>& std, int64_t C,
                                                      const char* op);

/// Applies transforms in order; an empty Compose is the identity.
class Compose {
 public:
  Compose() = default;
  Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {}
  Compose& add(Transform t) {
    transforms_.push_back(std::move(t));
    return *this;
  }
  Tensor operator()(const Tensor& img, Rng& rng) const;
  /// Like operator(), but when the pipeline ends in [RandomHorizontalFlip]
  /// [ToFloat] [NormalizeImage | ToFloat] (each optional, at least one) and the
  /// image reaching that tail is u8, the tail is not run: it is described in
  /// `deferred` (the flip drawn from rng as RandomHorizontalFlip would) and the
  /// u8 image is returned. Otherwise the same as operator() with nothing deferred.
  Tensor apply_deferring(const Tensor& img, Rng& rng, Deferred& deferred) const;
  size_t size() const { return transforms_.size(); }

 private:
  std::vector<Transform> transforms_;
};

/// Runs `t` on img, deferring the tail as Compose::apply_deferring when t is a
/// Compose (else: t(img, rng), nothing deferred).
Tensor apply_deferring(const Transform& t, const Tensor& img, Rng& rng, Deferred& deferred);

// ---- batch transforms ---------------------------------------------------------

/// Soft targets f32 (B, num_classes) from integer labels (B): 1 - smoothing on the
/// label plus smoothing / num_classes everywhere (PyTorch's label_smoothing).
Tensor one_hot(const Tensor& labels, int64_t num_classes, double smoothing = 0.0);

/// Mixup like torchvision.transforms.v2.MixUp: lambda ~ Beta(alpha, alpha),
/// x = lambda x + (1 - lambda) x.roll(1, 0); y becomes soft targets f32
/// (B, num_classes) mixed the same way (after label smoothing). Returns lambda.
double mixup(Tensor& x, Tensor& y, int64_t num_classes, double alpha, Rng& rng,
             double smoothing = 0.0);

}  // namespace tcv::data
