// Object detection data: ground truth of an image, a dataset of images with
// their ground truth (filled by the Pascal VOC and COCO readers), and the
// samples the detection transforms work on.
//
// Coordinates: a box is [x1, y1, x2, y2] in continuous pixel coordinates of the
// image it belongs to. Pixel (column c, row r) covers [c, c + 1) x [r, r + 1),
// so a box around columns 10..19 has x1 = 10, x2 = 20, and its width is
// x2 - x1. Pascal VOC's 1-based inclusive corners (xmin..xmax) become
// x1 = xmin - 1, x2 = xmax; COCO's [x, y, w, h] becomes x1 = x, x2 = x + w.
// A horizontal flip maps x to W - x exactly.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "data/folder.h"
#include "data/record_set.h"
#include "data/transforms.h"
#include "engine/tensor.h"

namespace tcv::data {

/// A box [x1, y1, x2, y2] (see the coordinates above).
using Box = std::array<double, 4>;

/// The ground-truth objects of one image, one entry per object in every vector.
struct DetTarget {
  std::vector<Box> boxes;
  /// Class labels in [1, num_classes]; 0 is the background and never appears.
  std::vector<int64_t> labels;
  /// Pascal VOC's `difficult`: kept for evaluation, which ignores these objects.
  std::vector<uint8_t> difficult;
  /// COCO's `iscrowd`: a region of many objects; evaluation matches it without penalty.
  std::vector<uint8_t> iscrowd;
  /// The object's area as COCO evaluation ranks it (COCO's `area`: the segment's
  /// pixel count); box area where the data set has none.
  std::vector<double> area;

  int64_t size() const { return static_cast<int64_t>(boxes.size()); }
  /// Appends one object.
  void add(const Box& box, int64_t label, bool is_difficult = false, bool is_crowd = false,
           double object_area = -1.0);
  /// Keeps the objects whose `keep` entry is non-zero, in order.
  void filter(const std::vector<uint8_t>& keep);
};

/// One image of a detection data set, as its annotation describes it.
struct DetRecord {
  std::string image_path;
  /// VOC: the image's index in the data set; COCO: the image's `id`.
  int64_t image_id = 0;
  /// The image's size per its annotation (checked against the decoded image).
  int64_t height = 0, width = 0;
  DetTarget target;
  /// Where the annotation came from (file, or file + image), for messages.
  std::string source;
};

/// An image with its objects, as the detection transforms pass it along.
struct DetSample {
  /// u8 (3, H, W); undefined when the image was skipped as corrupt.
  Tensor image;
  /// Objects in pixel coordinates of `image`.
  DetTarget target;
  /// Position in the data set, COCO/VOC image id, size of the image as read.
  int64_t index = -1;
  int64_t image_id = 0;
  int64_t orig_height = 0, orig_width = 0;
};

/// A detection data set: records read from VOC or COCO annotations (see
/// data/det/voc.h, data/det/coco.h), images decoded on demand.
class DetDataset : public RecordSet<DetRecord> {
 public:
  /// `class_names[k]` names label k + 1. `label_ids[k]` is the id label k + 1
  /// has in the annotation files (COCO category ids; empty for VOC). Records are
  /// checked: labels in [1, K], one flag of each kind per box.
  DetDataset(std::vector<DetRecord> records, std::vector<std::string> class_names,
             std::vector<int64_t> label_ids, OnCorrupt on_corrupt, std::string name,
             int64_t skipped_at_load = 0, std::string first_skipped = "", ImageLimits limits = {});
  DetDataset(DetDataset&& other) noexcept = default;
  DetDataset& operator=(DetDataset&&) = delete;
  DetDataset(const DetDataset&) = delete;

  /// Object classes, without the background.
  int64_t num_classes() const { return static_cast<int64_t>(class_names_.size()); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const std::vector<int64_t>& label_ids() const { return label_ids_; }
  /// What messages about image i name: its annotation.
  const std::string& source(int64_t i) const { return record(i).source; }
  /// Its first n images (all of them when n >= size()) as a data set of their
  /// own, with no skips counted yet: val.max_images.
  DetDataset head(int64_t n) const;

  /// Image i decoded to u8 RGB with its ground truth. An unreadable image, one
  /// above limits().max_pixels, or one whose size differs from its annotation's,
  /// is a tcv::Error naming the file; with OnCorrupt::skip it gives a sample
  /// without image, counted in skipped().
  DetSample load(int64_t i) const;

 private:
  std::vector<std::string> class_names_;
  std::vector<int64_t> label_ids_;
};

/// A transform of a detection sample: image and boxes together; random ones draw
/// from rng only.
using DetTransform = std::function<void(DetSample&, Rng&)>;

}  // namespace tcv::data
