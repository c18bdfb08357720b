// Multi-object scenes drawn from Fashion-MNIST items: a detection and
// segmentation data set that needs no download, with boxes and masks known
// exactly.
//
// A scene is a textured, noisy background (a colour gradient under stripes, a
// rotated checkerboard or smooth blobs, plus per-pixel noise) with a few
// Fashion-MNIST items drawn over it at random sizes, aspect ratios and
// positions, each tinted with a random colour and shaded by the item's own
// grey levels. Items are drawn in order, so later ones occlude earlier ones.
//
// What an object is, exactly: the pixels where the item, scaled bilinearly to
// its size, reaches `coverage` (out of 255) belong to it; they are painted and
// nothing else is. Its visible pixels are those it still owns after the later
// items were drawn. Its box is the tight box of its visible pixels (a modal
// box, as VOC and COCO annotate: occlusion and the image border shrink it),
// in the coordinates of data/det/dataset.h. Occlusion is bounded: an item is
// only placed where every earlier object keeps at least `min_visible` of its
// in-image pixels (else it is tried elsewhere, then left out), and at most
// `max_outside` of an item may lie outside the image. An object with less than
// `difficult_below` of its in-image pixels visible is marked difficult;
// one cut by the image border is marked truncated.
//
// Masks: the class map holds each pixel's class (1..10, 0 background), the
// instance map each pixel's object (k + 1 for the k-th object drawn, 0
// background); both hold 255 ("void", as Pascal VOC marks object outlines) on
// every pixel within `border` pixels (Chebyshev distance) of a pixel of another
// object or of the background.
//
// Everything a scene draws comes from its Rng, so a scene depends only on
// (seed, index): write_scene_set gives the same files for the same options on
// any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/det/dataset.h"
#include "data/transforms.h"
#include "engine/tensor.h"

namespace tcv::data {

/// Fashion-MNIST's ten classes as tcv names them in annotations (label k + 1).
const std::vector<std::string>& fashion_mnist_classes();

struct SceneOptions {
  int64_t width = 300, height = 300;
  /// Items tried per scene: uniform in [min_objects, max_objects].
  int64_t min_objects = 2, max_objects = 6;
  /// An item's longer side, as a fraction of the image's shorter side.
  double min_scale = 0.18, max_scale = 0.6;
  /// Items are stretched by an aspect ratio log-uniform in [1/max_aspect, max_aspect].
  double max_aspect = 1.35;
  /// Grey level (0..255) of the scaled item from which a pixel belongs to it.
  int coverage = 64;
  double min_visible = 0.4;
  double difficult_below = 0.6;
  double max_outside = 0.3;
  /// Per-pixel noise: uniform in [-a, a] with a drawn per scene from [0, noise].
  int noise = 16;
  /// Width of the void band around object outlines in the masks (0: none).
  int border = 1;
  /// Placements tried per item before it is left out.
  int tries = 12;
};

/// One drawn object.
struct SceneObject {
  int64_t label = 0;    ///< 1..10
  Box box{};            ///< tight box of the visible pixels
  int64_t visible = 0;  ///< pixels it owns in the final image
  int64_t inside = 0;   ///< pixels of the item inside the image before occlusion
  bool truncated = false, difficult = false;
  int64_t item = 0;  ///< index of the Fashion-MNIST item drawn
};

struct Scene {
  Tensor image;      ///< u8 (3, H, W)
  Tensor classes;    ///< u8 (H, W): class per pixel, 0 background, 255 void
  Tensor instances;  ///< u8 (H, W): object k + 1 per pixel, 0 background, 255 void
  /// u8 (H, W): object k + 1 per pixel, 0 background, without the void band.
  Tensor owner;
  std::vector<SceneObject> objects;
  /// u8 (3, H, W): the image before any item was drawn (kept when asked).
  Tensor background;
};

/// Draws scenes from a set of items.
class SceneRenderer {
 public:
  /// items: u8 (N, 28, 28) (any square size works) grey items; labels: integer
  /// (N) in [0, 10).
  SceneRenderer(Tensor items, Tensor labels, SceneOptions opts);
  /// One scene; draws only from rng. `keep_background` fills Scene::background.
  Scene render(Rng& rng, bool keep_background = false) const;
  const SceneOptions& options() const { return opts_; }

 private:
  Tensor items_, labels_;
  SceneOptions opts_;
};

/// Sets 255 on every pixel of `ids` (u8 (H, W)) within `radius` (Chebyshev) of
/// a pixel with another value; the rest as is.
Tensor mark_borders(const Tensor& ids, int radius);

/// Column-major run lengths of (ids == value) over u8 (H, W), starting with a
/// run of other pixels: COCO's uncompressed RLE.
std::vector<int64_t> rle_of(const Tensor& ids, uint8_t value);

struct SceneSetOptions {
  SceneOptions scene{};
  /// Directory with Fashion-MNIST's IDX files (train items draw the train
  /// split's scenes, test items the val and test splits').
  std::string fmnist_dir = "/usr/share/datasets/fashion-mnist";
  int64_t train = 2000, val = 500, test = 0;
  uint64_t seed = 0;
  int jpeg_quality = 95;
};

struct SceneSetSummary {
  int64_t images = 0, objects = 0, difficult = 0, truncated = 0;
};

/// Writes a scene data set under `out_dir` (created if needed):
///
///   JPEGImages/<id>.jpg, Annotations/<id>.xml (Pascal VOC),
///   SegmentationClass/<id>.png, SegmentationObject/<id>.png (palette PNGs, VOC colours),
///   ImageSets/Main/{train,val,trainval,test}.txt and <class>_<split>.txt (1 present,
///     0 only difficult, -1 absent), ImageSets/Segmentation/{train,val,trainval,test}.txt,
///   annotations/instances_{train,val,test}.json (COCO; file_name relative to
///     JPEGImages/, image id = the number in <id>, category id = label),
///   classes.txt (one class name per line, label 1 first).
///
/// Ids are 000001, 000002, ...: the train split first, then val, then test.
/// Scene i is drawn from Rng(seed, i). Runs on OpenMP's threads.
SceneSetSummary write_scene_set(const SceneSetOptions& opts, const std::string& out_dir);

}  // namespace tcv::data
