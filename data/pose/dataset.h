// Person pose data: people with COCO's 17 keypoints, the regions the loss must
// ignore (crowds, people too small or too sparsely annotated to train on), a
// data set of images with their people, and the samples the pose transforms
// work on.
//
// Coordinates are continuous pixel coordinates, as for boxes (data/det/dataset.h):
// pixel (column c, row r) covers [c, c + 1) x [r, r + 1), its centre is
// (c + 0.5, r + 0.5), and a horizontal flip maps x to W - x. COCO's keypoint
// files give pixel indices (a keypoint on pixel c has x = c), so the reader adds
// 0.5 and the writer subtracts it, as detectron2 does.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "data/det/dataset.h"
#include "data/pose/skeleton.h"

namespace tcv::data {

/// One keypoint; `v` is COCO's visibility: 0 not labelled (x and y mean
/// nothing), 1 labelled but hidden, 2 labelled and visible.
struct Keypoint {
  double x = 0, y = 0;
  int v = 0;
  bool labelled() const { return v > 0; }
};

/// A region of an image as COCO stores a segmentation: polygons (x0, y0, x1,
/// y1, ...) in continuous coordinates, or a run-length mask (column-major runs
/// starting with a run of 0s, over an rle_height x rle_width image).
struct Segmentation {
  std::vector<std::vector<double>> polygons;
  std::vector<int64_t> rle;
  int64_t rle_height = 0, rle_width = 0;
  bool empty() const { return polygons.empty() && rle.empty(); }
};

/// height x width, checked: both positive and the product within int64 (sizes
/// come from files); otherwise an error naming `what`.
int64_t mask_pixels(int64_t height, int64_t width, const std::string& what);

/// Sets `value` on the pixels of `seg` in a u8 (height, width) row-major image:
/// for polygons the pixels whose centres lie inside (even-odd rule; coordinates
/// must be finite, any size), for a run-length mask its set pixels (its size
/// must be the image's, its runs at most the image's pixels in all). `what`
/// names the region in errors.
void paint_segmentation(const Segmentation& seg, uint8_t* image, int64_t height, int64_t width,
                        uint8_t value, const std::string& what);

/// Decodes COCO's compressed RLE string (the "counts" of pycocotools' encode:
/// 6-bit groups offset by 48, each count after the second as a difference to
/// the one two before) into run lengths. Errors name `what`: a character
/// outside '0'..'o', a string ending inside a count, a count of more than 12
/// characters, a negative run or one beyond int64.
std::vector<int64_t> decode_coco_rle(const std::string& counts, const std::string& what);

/// One annotated person.
struct PosePerson {
  std::array<Keypoint, kCocoKeypoints> keypoints{};
  /// OpenPose's neck: the midpoint of the shoulders as annotated, set when a
  /// sample is loaded (before any augmentation, as TorchCV derives it) and
  /// moved by the transforms like the other keypoints, so a crop that drops
  /// one shoulder keeps a neck that stays inside. Unlabelled: derived from
  /// the shoulders where the targets are made (a person built by hand).
  Keypoint neck{};
  /// The person's box [x1, y1, x2, y2]; from the labelled keypoints where the
  /// annotation has none.
  Box box{};
  /// COCO's area (the segment's pixel count).
  double area = 0;
  Segmentation segmentation;
  int64_t num_labelled() const;
};

/// The midpoint of the shoulders (COCO's 5 and 6), labelled when both are,
/// visible (2) when both are.
Keypoint shoulder_midpoint(const std::array<Keypoint, kCocoKeypoints>& kps);

/// The tight box around a person's labelled keypoints (all zeros when none is).
Box keypoint_box(const std::array<Keypoint, kCocoKeypoints>& kps);

/// One image of a pose data set, as its annotation describes it.
struct PoseRecord {
  std::string image_path;
  int64_t image_id = 0;
  int64_t height = 0, width = 0;
  /// The people the targets are made of.
  std::vector<PosePerson> people;
  /// People not trained on: their regions are left out of the loss.
  std::vector<Segmentation> ignored;
  /// Crowd regions: left out of the loss except where a trained person lies.
  std::vector<Segmentation> crowds;
  /// Where the annotation came from, for messages.
  std::string source;
};

/// The loss mask of a record at full resolution, u8 (height, width): 0 on
/// ignored people and on crowd regions outside every trained person's
/// segmentation, 1 elsewhere.
Tensor pose_loss_mask(const PoseRecord& r);

/// An image with its people, as the pose transforms pass it along.
struct PoseSample {
  /// u8 (3, H, W); undefined when the image was skipped as corrupt.
  Tensor image;
  /// u8 (H, W): 1 where the loss counts, 0 where it is ignored.
  Tensor mask;
  std::vector<PosePerson> people;
  int64_t index = -1;
  int64_t image_id = 0;
  int64_t orig_height = 0, orig_width = 0;
};

/// A pose data set: records read from COCO keypoint files (data/pose/coco.h),
/// images decoded and masks rasterised on demand.
class PoseDataset : public RecordSet<PoseRecord> {
 public:
  PoseDataset(std::vector<PoseRecord> records, OnCorrupt on_corrupt, std::string name,
              int64_t skipped_at_load = 0, std::string first_skipped = "", ImageLimits limits = {});
  PoseDataset(PoseDataset&& other) noexcept = default;
  PoseDataset& operator=(PoseDataset&&) = delete;
  PoseDataset(const PoseDataset&) = delete;

  /// What messages about image i name: its annotation file and image.
  const std::string& source(int64_t i) const { return record(i).source; }
  /// Its first n images (all of them when n >= size()) as a data set of their
  /// own, with no skips counted yet: val.max_images.
  PoseDataset head(int64_t n) const;

  /// Image i decoded to u8 RGB with its people and loss mask. An unreadable
  /// image, one above limits().max_pixels, or one whose size differs from its
  /// annotation's, is a tcv::Error naming the file; with OnCorrupt::skip it
  /// gives a sample without image, counted in skipped().
  PoseSample load(int64_t i) const;
};

/// A transform of a pose sample (image, mask and keypoints together); random
/// ones draw from rng only.
using PoseTransform = std::function<void(PoseSample&, Rng&)>;

}  // namespace tcv::data
