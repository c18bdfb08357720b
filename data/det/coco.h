// COCO detection data: instances_*.json files (read and written with
// nlohmann-json) and the images they list.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "data/det/dataset.h"

namespace tcv::data {

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int64_t width = 0, height = 0;
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
};

/// One entry of "annotations".
struct CocoObject {
  int64_t id = 0, image_id = 0, category_id = 0;
  /// [x, y, w, h] in pixels.
  std::array<double, 4> bbox{};
  double area = 0;
  bool iscrowd = false;
  /// The object's mask as uncompressed RLE (column-major run lengths starting
  /// with background, COCO's {"counts": [...], "size": [h, w]}); may be empty.
  /// Written when present; not read back (detection needs the boxes only).
  std::vector<int64_t> rle_counts;
};

/// The parts of an instances file that detection uses.
struct CocoFile {
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;
  std::vector<CocoObject> annotations;
};

/// Parses an instances file's JSON; `name` (the file) appears in errors. Errors:
/// JSON that does not parse (with its byte offset), a missing "images" or
/// "categories" array, an entry without a required key or with a value of the
/// wrong type (naming the entry and the key), a repeated image or category id,
/// an annotation of an unknown image or category, a bbox that is not four
/// finite numbers or has a negative size. "area" defaults to w x h, "iscrowd"
/// to 0; a file without "annotations" has none.
CocoFile parse_coco(const std::string& json, const std::string& name);

/// The file as COCO JSON (images, annotations, categories).
std::string format_coco(const CocoFile& f);

/// COCO's categories as labels: in increasing id order, label k + 1 is
/// category_ids[k] (read_coco numbers them so, and evaluators count from 1).
struct CocoLabels {
  std::vector<int64_t> category_ids;
  std::vector<std::string> names;
  int64_t size() const { return static_cast<int64_t>(category_ids.size()); }
  /// The label of a category id; an unknown id is an error naming `what`.
  int64_t label_of(int64_t category_id, const std::string& what) const;
};
/// `file` names the annotation file in errors (no categories).
CocoLabels coco_labels(const CocoFile& f, const std::string& file);

/// The ground truth of an instances file without its images, for evaluation:
/// per image (in the file's order) its id and objects, as read_coco has them
/// (boxes [x, y, x + w, y + h], COCO's areas and crowd flags).
struct CocoTruth {
  CocoLabels labels;
  std::vector<int64_t> image_ids;
  std::vector<DetTarget> targets;
  /// The position of an image id in image_ids, or -1.
  int64_t index_of(int64_t image_id) const;
};
CocoTruth coco_truth(const CocoFile& f, const std::string& file);

/// What read_coco does with images that have no usable box (none, or only
/// crowd regions and empty boxes).
enum class EmptyImages {
  keep,  ///< keep them (evaluation must see them: their detections are false positives)
  skip,  ///< leave them out (training; torchvision's reference scripts do)
};

struct CocoOptions {
  std::string annotation_file{};  ///< e.g. annotations/instances_val2017.json
  std::string image_dir{};        ///< where each image's file_name is found
  EmptyImages empty_images = EmptyImages::keep;
  OnCorrupt on_corrupt = OnCorrupt::error;
  /// Images above limits.max_pixels are refused when loaded.
  ImageLimits limits{};
};

/// Reads a COCO data set. Labels 1..K are the categories in increasing id order
/// (label_ids() maps them back); image ids are COCO's. Boxes become
/// [x, y, x + w, y + h]; crowd regions and COCO's areas are kept for
/// evaluation. Errors (or, with OnCorrupt::skip, images left out and counted)
/// name the file: a missing image, a box reaching more than one pixel outside
/// its image.
DetDataset read_coco(const CocoOptions& opts);

}  // namespace tcv::data
