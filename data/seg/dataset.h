// Semantic segmentation data: images with per-pixel class maps, read from
// Cityscapes, Pascal VOC 2012 (with SBD's augmented lists), ADE20K, and the
// VOC-style trees of generated scenes (data/det/scenes.h).
//
// A label map is u8 (H, W): a class in [0, num_classes) per pixel, or 255
// where the pixel is ignored (object outlines in VOC, void in Cityscapes,
// "other" in ADE20K). The files' own values are turned into these by the data
// set's LabelMap (Cityscapes' 34 label ids to its 19 train ids, ADE20K's
// reduce_zero_label); a file value the map does not allow is an error naming
// the file and the value.
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

/// The value every label map uses for ignored pixels.
inline constexpr uint8_t kIgnoreLabel = 255;

/// File value -> label value. lut[v] is a class index, 255 (ignored) or -1 (a
/// value the files must not hold).
struct LabelMap {
  std::array<int16_t, 256> lut{};

  /// Values 0..num_classes-1 are classes, 255 is ignored, the rest are errors.
  static LabelMap identity(int64_t num_classes);
  /// mmsegmentation's reduce_zero_label: 0 becomes 255, v in 1..num_classes becomes
  /// v - 1, 255 stays ignored, the rest are errors.
  static LabelMap reduce_zero(int64_t num_classes);
};

/// One image of a segmentation data set.
struct SegRecord {
  std::string image_path;
  /// Empty: no ground truth (a test split).
  std::string label_path;
  /// The name outputs take (VOC id, Cityscapes "<city>_<seq>_<frame>", ADE20K file stem).
  std::string id;
};

/// An image with its label map, as the segmentation transforms pass it along.
struct SegSample {
  /// u8 (3, H, W); undefined when the image was skipped as corrupt.
  Tensor image;
  /// u8 (H, W) classes and 255; undefined without ground truth. Usually the
  /// image's size; evaluation pipelines may leave it at the original size while
  /// the image is resized (see data/seg/transforms.h).
  Tensor label;
  /// Position in the data set and the size of the image as read.
  int64_t index = -1;
  int64_t orig_height = 0, orig_width = 0;
};

/// Whether a data set reads its label files.
enum class GroundTruth {
  read,  ///< every record has a label file, read with its image
  none,  ///< images only (test splits; labels of records are ignored)
};

/// How a segmentation reader treats label files, corrupt files and large
/// images; every reader's options hold one (`.read = {.on_corrupt = ...}`).
struct SegReadOptions {
  /// Test splits have no usable ground truth: read images only.
  GroundTruth ground_truth = GroundTruth::read;
  /// A corrupt image or label file: an error, or the sample left out and counted.
  OnCorrupt on_corrupt = OnCorrupt::error;
  /// Images and label maps above limits.max_pixels are refused when loaded.
  ImageLimits limits{};
};

/// A segmentation data set: records, class names and the map from file values
/// to labels; images and label maps decoded on demand (thread-safe).
class SegDataset : public RecordSet<SegRecord> {
 public:
  /// Records must have label files unless read.ground_truth is none.
  /// `skipped_at_load` records were left out while reading the lists (the first
  /// because of `first_skipped`); they count in skipped().
  SegDataset(std::vector<SegRecord> records, std::vector<std::string> class_names, LabelMap map,
             SegReadOptions read, std::string name, int64_t skipped_at_load = 0,
             std::string first_skipped = "");
  /// Moves records, names and counts (not while another thread loads from `o`).
  SegDataset(SegDataset&& other) noexcept = default;
  SegDataset& operator=(SegDataset&&) = delete;

  int64_t num_classes() const { return static_cast<int64_t>(class_names_.size()); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  /// What messages about image i name: its image file.
  const std::string& source(int64_t i) const { return record(i).image_path; }
  /// Its first n images (all of them when n >= size()) as a data set of their
  /// own, with no skips counted yet: val.max_images.
  SegDataset head(int64_t n) const;
  const LabelMap& label_map() const { return map_; }
  bool has_labels() const { return ground_truth_ == GroundTruth::read; }

  /// Image i as u8 RGB with its label map (mapped through label_map()).
  /// Errors name the file: an unreadable image or label file, either above
  /// limits().max_pixels, a label map of
  /// another size than its image, a label value the map does not allow (with
  /// the value and where it is). With OnCorrupt::skip the sample comes back
  /// without image and is counted in skipped().
  SegSample load(int64_t i) const;

  /// The label map of record i alone, mapped (errors as load()).
  Tensor load_label(int64_t i) const;

 private:
  std::vector<std::string> class_names_;
  LabelMap map_;
  GroundTruth ground_truth_;  // the policy and limits are the RecordSet's
};

/// Maps a label file's values through `map` into a new u8 (H, W); a value the
/// map does not allow is an error naming `name`, the value and its position.
Tensor map_labels(const Tensor& raw, const LabelMap& map, const std::string& name);

// ---- Cityscapes ------------------------------------------------------------------

/// Which label values a Cityscapes data set gives.
enum class CityscapesLabels {
  train_ids,  ///< the 19 training classes (the official labelIds -> trainIds map; others 255)
  label_ids,  ///< the 34 label ids as they are (0..33), e.g. to compare with submissions
};

/// The 19 train-id class names (road, sidewalk, ..., bicycle).
const std::vector<std::string>& cityscapes_classes();
/// The 34 label-id names (unlabeled, ego vehicle, ..., bicycle).
const std::vector<std::string>& cityscapes_label_id_names();
/// The official map from label ids (0..33) to train ids (0..18, or 255).
LabelMap cityscapes_train_id_map();
/// The label id of each train id (7 road, 8 sidewalk, ..., 33 bicycle), for submissions.
const std::array<uint8_t, 19>& cityscapes_label_id_of_train_id();
/// Train ids (u8 or i64 (H, W), values 0..18 or 255) to label ids, u8 (H, W);
/// 255 becomes 0 (unlabeled). Other values are an error.
Tensor cityscapes_train_to_label_ids(const Tensor& train_ids);

struct CityscapesOptions {
  /// The directory holding leftImg8bit/ and gtFine/.
  std::string root;
  /// train, val or test (any directory under leftImg8bit/).
  std::string split = "train";
  CityscapesLabels labels = CityscapesLabels::train_ids;
  SegReadOptions read{};
};

/// Cityscapes: leftImg8bit/<split>/<city>/<stem>_leftImg8bit.png with
/// gtFine/<split>/<city>/<stem>_gtFine_labelIds.png, cities and files sorted.
/// Errors name the directory or file: a missing split, no images, an image
/// without its label file (unless ground_truth is none).
SegDataset read_cityscapes(const CityscapesOptions& opts);

// ---- Pascal VOC 2012 and trees in its layout ------------------------------------

/// One image list and the directory its label maps are in.
struct VocSegList {
  /// Relative to the root. A line holds an image id ("2007_000032"), or an image
  /// path and a label path relative to the root ("/JPEGImages/x.jpg
  /// /SegmentationClassAug/x.png", as DeepLab's train_aug.txt).
  std::string list;
  /// Relative to the root: where <id>.png is for lines holding an id.
  std::string label_dir = "SegmentationClass";
};

struct VocSegOptions {
  /// VOCdevkit/VOC2012, or a tree in its layout (a generated scene set).
  std::string root;
  /// A named split, used when `lists` is empty:
  ///   "aug"       ImageSets/Segmentation/aug.txt with SegmentationClassAug (SBD's
  ///               masks as mmsegmentation's voc_aug converter writes them)
  ///   "train_aug" train.txt with SegmentationClass, then aug.txt with
  ///               SegmentationClassAug (mmsegmentation's voc12aug training set)
  ///   any other   ImageSets/Segmentation/<split>.txt with SegmentationClass
  std::string split = "train";
  /// Lists read in order instead of `split`.
  std::vector<VocSegList> lists{};
  /// Class k is class_names[k], 0 the background. Empty: "background" and the
  /// names in ROOT/classes.txt when there is one (generated scenes), else VOC's 21.
  std::vector<std::string> class_names{};
  std::string image_dir = "JPEGImages";
  std::string image_ext = ".jpg";
  SegReadOptions read{};
};

/// The 21 classes of VOC segmentation: background, then VOC's 20 in the devkit's order.
const std::vector<std::string>& voc_seg_classes();

/// Reads the lists; errors name the list file and line (a missing list, a line
/// with more than two fields) or the file (a missing image or label file:
/// an error, or with OnCorrupt::skip left out and counted).
SegDataset read_voc_seg(const VocSegOptions& opts);

// ---- ADE20K ------------------------------------------------------------------------

/// Whether ADE20K's 0 ("other") is dropped (mmsegmentation's reduce_zero_label).
enum class ReduceZeroLabel { on, off };

/// ADE20K's 150 class names (SceneParsing's objectInfo150 order).
const std::vector<std::string>& ade20k_classes();

struct Ade20kOptions {
  /// The directory holding images/ and annotations/ (ADEChallengeData2016).
  std::string root;
  /// training or validation (train and val are accepted too).
  std::string split = "training";
  /// on: 150 classes, file value v becomes v - 1 and 0 is ignored; off: 151
  /// classes, 0 being "other".
  ReduceZeroLabel reduce_zero_label = ReduceZeroLabel::on;
  SegReadOptions read{};
};

/// ADE20K: images/<split>/*.jpg with annotations/<split>/<stem>.png, sorted by name.
SegDataset read_ade20k(const Ade20kOptions& opts);

}  // namespace tcv::data
