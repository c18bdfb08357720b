#include "data/seg/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/det/voc.h"
#include "data/image.h"
#include "data/label_png.h"

namespace tcv::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Regular files directly in `dir` (following links), sorted by name.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> subdirs_of(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Records are kept, or on OnCorrupt::skip left out and counted, when a file is missing.
struct SkipCount {
  OnCorrupt on_corrupt;
  int64_t n = 0;
  std::string first{};
  // Runs f; a tcv::Error is rethrown or counted.
  template <typename F>
  void guard(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (on_corrupt == OnCorrupt::error) throw;
      if (n++ == 0) first = e.what();
    }
  }
};

// The file values a map allows, as ranges: "0-33, 255".
std::string allowed_values(const LabelMap& map) {
  std::string out;
  for (int v = 0; v < 256;) {
    if (map.lut[static_cast<size_t>(v)] < 0) {
      ++v;
      continue;
    }
    int e = v;
    while (e + 1 < 256 && map.lut[static_cast<size_t>(e + 1)] >= 0) ++e;
    out += (out.empty() ? "" : ", ") + std::to_string(v) + (e > v ? "-" + std::to_string(e) : "");
    v = e + 1;
  }
  return out;
}

}  // namespace

// ---- LabelMap ------------------------------------------------------------------------

LabelMap LabelMap::identity(int64_t num_classes) {
  TCV_CHECK(num_classes > 0 && num_classes <= 255,
            "[LabelMap] the number of classes must be in [1, 255], got ", num_classes);
  LabelMap m;
  m.lut.fill(-1);
  for (int64_t v = 0; v < num_classes; ++v) m.lut[static_cast<size_t>(v)] = static_cast<int16_t>(v);
  m.lut[kIgnoreLabel] = kIgnoreLabel;
  return m;
}

LabelMap LabelMap::reduce_zero(int64_t num_classes) {
  TCV_CHECK(num_classes > 0 && num_classes <= 254,
            "[LabelMap] the number of classes must be in [1, 254], got ", num_classes);
  LabelMap m;
  m.lut.fill(-1);
  m.lut[0] = kIgnoreLabel;
  for (int64_t v = 1; v <= num_classes; ++v)
    m.lut[static_cast<size_t>(v)] = static_cast<int16_t>(v - 1);
  m.lut[kIgnoreLabel] = kIgnoreLabel;
  return m;
}

Tensor map_labels(const Tensor& raw, const LabelMap& map, const std::string& name) {
  TCV_CHECK(raw.dtype() == DType::u8 && raw.dim() == 2, name,
            ": a label map must be u8 (H, W), got ", dtype_name(raw.dtype()), " ", raw.shape_str());
  const Tensor src = raw.contiguous();
  const int64_t H = src.size(0), W = src.size(1);
  Tensor out = empty({H, W}, {.dtype = DType::u8});
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  const int16_t* lut = map.lut.data();
  bool bad = false;
  for (int64_t k = 0; k < H * W; ++k) {
    const int16_t v = lut[s[k]];
    bad |= v < 0;
    d[k] = static_cast<uint8_t>(v);
  }
  if (bad) {
    int64_t k = 0;
    while (lut[s[k]] >= 0) ++k;
    TCV_THROW(name, ": label value ", int(s[k]), " at (row ", k / W, ", column ", k % W,
              ") is neither a class of this data set nor 255 (ignored); the values its label "
              "files may hold are ",
              allowed_values(map));
  }
  return out;
}

// ---- SegDataset ----------------------------------------------------------------------

SegDataset::SegDataset(std::vector<SegRecord> records, std::vector<std::string> class_names,
                       LabelMap map, SegReadOptions read, std::string name, int64_t skipped_at_load,
                       std::string first_skipped)
    : RecordSet(std::move(records), std::move(name), read.on_corrupt, read.limits, skipped_at_load,
                std::move(first_skipped)),
      class_names_(std::move(class_names)),
      map_(map),
      ground_truth_(read.ground_truth) {
  TCV_CHECK(!class_names_.empty() && class_names_.size() <= 255, name_,
            ": a segmentation data set needs 1 to 255 classes, got ", class_names_.size());
  for (int v = 0; v < 256; ++v) {
    const int16_t c = map_.lut[static_cast<size_t>(v)];
    TCV_CHECK(c == -1 || c == kIgnoreLabel || c < num_classes(), name_, ": the label map sends ", v,
              " to ", c, ", which is not a class (", num_classes(), " classes) nor 255");
  }
  if (has_labels())
    for (const SegRecord& r : records_)
      TCV_CHECK(!r.label_path.empty(), name_, ": ", r.image_path, " has no label file");
}

Tensor SegDataset::load_label(int64_t i) const {
  const SegRecord& r = record(i);
  TCV_CHECK(has_labels(), name_, ": read without ground truth");
  return map_labels(read_label_png(r.label_path, limits_).labels, map_, r.label_path);
}

SegSample SegDataset::load(int64_t i) const {
  const SegRecord& r = record(i);
  SegSample s;
  s.index = i;
  if (!attempt([&] {
        s.image = read_image(r.image_path, ImageMode::rgb, limits_);
        if (has_labels()) {
          s.label = load_label(i);
          TCV_CHECK(s.label.size(0) == s.image.size(1) && s.label.size(1) == s.image.size(2),
                    r.label_path, ": the label map is ", s.label.size(1), "x", s.label.size(0),
                    " (width x height) but its image ", r.image_path, " is ", s.image.size(2), "x",
                    s.image.size(1));
        }
      })) {
    SegSample skipped;  // neither image nor label: left out of the batch
    skipped.index = i;
    return skipped;
  }
  s.orig_height = s.image.size(1);
  s.orig_width = s.image.size(2);
  return s;
}

SegDataset SegDataset::head(int64_t n) const {
  return SegDataset(first_records(n), class_names_, map_,
                    {.ground_truth = ground_truth_, .on_corrupt = on_corrupt_, .limits = limits_},
                    name_);
}

// ---- Cityscapes ----------------------------------------------------------------------

const std::vector<std::string>& cityscapes_classes() {
  static const std::vector<std::string> names{
      "road",         "sidewalk",   "building", "wall",       "fence",  "pole",  "traffic light",
      "traffic sign", "vegetation", "terrain",  "sky",        "person", "rider", "car",
      "truck",        "bus",        "train",    "motorcycle", "bicycle"};
  return names;
}

const std::vector<std::string>& cityscapes_label_id_names() {
  static const std::vector<std::string> names{"unlabeled",  "ego vehicle",   "rectification border",
                                              "out of roi", "static",        "dynamic",
                                              "ground",     "road",          "sidewalk",
                                              "parking",    "rail track",    "building",
                                              "wall",       "fence",         "guard rail",
                                              "bridge",     "tunnel",        "pole",
                                              "polegroup",  "traffic light", "traffic sign",
                                              "vegetation", "terrain",       "sky",
                                              "person",     "rider",         "car",
                                              "truck",      "bus",           "caravan",
                                              "trailer",    "train",         "motorcycle",
                                              "bicycle"};
  return names;
}

const std::array<uint8_t, 19>& cityscapes_label_id_of_train_id() {
  static const std::array<uint8_t, 19> ids{7,  8,  11, 12, 13, 17, 19, 20, 21, 22,
                                           23, 24, 25, 26, 27, 28, 31, 32, 33};
  return ids;
}

LabelMap cityscapes_train_id_map() {
  LabelMap m;
  m.lut.fill(-1);
  for (size_t v = 0; v < 34; ++v) m.lut[v] = kIgnoreLabel;
  const auto& ids = cityscapes_label_id_of_train_id();
  for (size_t t = 0; t < ids.size(); ++t) m.lut[ids[t]] = static_cast<int16_t>(t);
  m.lut[kIgnoreLabel] = kIgnoreLabel;
  return m;
}

Tensor cityscapes_train_to_label_ids(const Tensor& train_ids) {
  TCV_CHECK(
      train_ids.dim() == 2 && (train_ids.dtype() == DType::u8 || train_ids.dtype() == DType::i64),
      "[cityscapes_train_to_label_ids] expects train ids u8 or i64 (H, W), got ",
      dtype_name(train_ids.dtype()), " ", train_ids.shape_str());
  const Tensor t = train_ids.dtype() == DType::i64 ? train_ids.contiguous()
                                                   : train_ids.to(DType::i64).contiguous();
  const auto& ids = cityscapes_label_id_of_train_id();
  Tensor out = empty(t.shape(), {.dtype = DType::u8});
  const int64_t* s = t.data<int64_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t k = 0; k < t.numel(); ++k) {
    const int64_t v = s[k];
    TCV_CHECK((v >= 0 && v < 19) || v == kIgnoreLabel, "[cityscapes_train_to_label_ids] value ", v,
              " at (row ", k / t.size(1), ", column ", k % t.size(1),
              ") is not a train id (0..18) nor 255");
    d[k] = v == kIgnoreLabel ? 0 : ids[static_cast<size_t>(v)];
  }
  return out;
}

SegDataset read_cityscapes(const CityscapesOptions& opts) {
  TCV_CHECK(!opts.root.empty(), "[read_cityscapes] no root directory given");
  const fs::path images = fs::path(opts.root) / "leftImg8bit" / opts.split;
  const fs::path labels = fs::path(opts.root) / "gtFine" / opts.split;
  TCV_CHECK(fs::is_directory(images), images.string(), ": no such directory (split '", opts.split,
            "' of Cityscapes root ", opts.root, ")");
  const bool with_gt = opts.read.ground_truth == GroundTruth::read;
  TCV_CHECK(!with_gt || fs::is_directory(labels), labels.string(),
            ": no such directory (the gtFine labels of split '", opts.split, "')");
  const std::string suffix = "_leftImg8bit.png";
  std::vector<SegRecord> records;
  SkipCount skip{opts.read.on_corrupt};
  for (const fs::path& city : subdirs_of(images)) {
    for (const fs::path& img : files_in(city)) {
      const std::string file = img.filename().string();
      if (!ends_with(file, suffix)) continue;
      const std::string stem = file.substr(0, file.size() - suffix.size());
      SegRecord r{img.string(), "", stem};
      if (with_gt)
        r.label_path = (labels / city.filename() / (stem + "_gtFine_labelIds.png")).string();
      skip.guard([&] {
        TCV_CHECK(!with_gt || path_exists(r.label_path), r.label_path,
                  ": label file not found (for ", r.image_path, ")");
        records.push_back(std::move(r));
      });
    }
  }
  TCV_CHECK(!records.empty() || skip.n > 0, images.string(),
            ": no *_leftImg8bit.png images in its city directories");
  const bool train_ids = opts.labels == CityscapesLabels::train_ids;
  return SegDataset(std::move(records),
                    train_ids ? cityscapes_classes() : cityscapes_label_id_names(),
                    train_ids ? cityscapes_train_id_map() : LabelMap::identity(34), opts.read,
                    "cityscapes " + opts.split, skip.n, skip.first);
}

// ---- Pascal VOC ----------------------------------------------------------------------

const std::vector<std::string>& voc_seg_classes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"background"};
    for (const auto& c : voc_classes()) n.push_back(c);
    return n;
  }();
  return names;
}

SegDataset read_voc_seg(const VocSegOptions& opts) {
  TCV_CHECK(!opts.root.empty(), "[read_voc_seg] no root directory given");
  const fs::path root(opts.root);
  std::vector<VocSegList> lists = opts.lists;
  if (lists.empty()) {
    const std::string sets = "ImageSets/Segmentation/";
    if (opts.split == "aug") {
      lists = {{sets + "aug.txt", "SegmentationClassAug"}};
    } else if (opts.split == "train_aug") {
      lists = {{sets + "train.txt", "SegmentationClass"},
               {sets + "aug.txt", "SegmentationClassAug"}};
    } else {
      TCV_CHECK(!opts.split.empty(), "[read_voc_seg] empty split name");
      lists = {{sets + opts.split + ".txt", "SegmentationClass"}};
    }
  }
  std::vector<std::string> classes = opts.class_names;
  if (classes.empty()) {
    const fs::path names = root / "classes.txt";
    if (fs::exists(names)) {
      classes = {"background"};
      for (const auto& c : read_class_names(names.string())) classes.push_back(c);
    } else {
      classes = voc_seg_classes();
    }
  }
  const bool with_gt = opts.read.ground_truth == GroundTruth::read;
  std::vector<SegRecord> records;
  SkipCount skip{opts.read.on_corrupt};
  std::string name = opts.root + " (";
  for (size_t li = 0; li < lists.size(); ++li) {
    const VocSegList& l = lists[li];
    const fs::path list = root / l.list;
    name += (li ? "+" : "") + fs::path(l.list).stem().string();
    std::ifstream in(list);
    TCV_CHECK(in.good(), list.string(), ": no such image list (of VOC root ", opts.root, ")");
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      if (f.empty()) continue;
      TCV_CHECK(f.size() <= 2, list.string(), ":", line_no,
                ": expected an image id, or an image path and a label path, got '", trim(line),
                "'");
      SegRecord r;
      if (f.size() == 1) {
        r.id = f[0];
        r.image_path = (root / opts.image_dir / (f[0] + opts.image_ext)).string();
        if (with_gt) r.label_path = (root / l.label_dir / (f[0] + ".png")).string();
      } else {
        auto rel = [&](std::string p) {
          while (!p.empty() && p.front() == '/') p.erase(0, 1);
          return (root / p).string();
        };
        r.image_path = rel(f[0]);
        r.id = fs::path(f[0]).stem().string();
        if (with_gt) r.label_path = rel(f[1]);
      }
      skip.guard([&] {
        TCV_CHECK(path_exists(r.image_path), r.image_path, ": image file not found (listed in ",
                  list.string(), ":", line_no, ")");
        TCV_CHECK(!with_gt || path_exists(r.label_path), r.label_path,
                  ": label file not found (listed in ", list.string(), ":", line_no, ")");
        records.push_back(std::move(r));
      });
    }
  }
  const auto K = static_cast<int64_t>(classes.size());
  return SegDataset(std::move(records), std::move(classes), LabelMap::identity(K), opts.read,
                    name + ")", skip.n, skip.first);
}

// ---- ADE20K --------------------------------------------------------------------------

const std::vector<std::string>& ade20k_classes() {
  static const std::vector<std::string> names{"wall",
                                              "building",
                                              "sky",
                                              "floor",
                                              "tree",
                                              "ceiling",
                                              "road",
                                              "bed",
                                              "windowpane",
                                              "grass",
                                              "cabinet",
                                              "sidewalk",
                                              "person",
                                              "earth",
                                              "door",
                                              "table",
                                              "mountain",
                                              "plant",
                                              "curtain",
                                              "chair",
                                              "car",
                                              "water",
                                              "painting",
                                              "sofa",
                                              "shelf",
                                              "house",
                                              "sea",
                                              "mirror",
                                              "rug",
                                              "field",
                                              "armchair",
                                              "seat",
                                              "fence",
                                              "desk",
                                              "rock",
                                              "wardrobe",
                                              "lamp",
                                              "bathtub",
                                              "railing",
                                              "cushion",
                                              "base",
                                              "box",
                                              "column",
                                              "signboard",
                                              "chest of drawers",
                                              "counter",
                                              "sand",
                                              "sink",
                                              "skyscraper",
                                              "fireplace",
                                              "refrigerator",
                                              "grandstand",
                                              "path",
                                              "stairs",
                                              "runway",
                                              "case",
                                              "pool table",
                                              "pillow",
                                              "screen door",
                                              "stairway",
                                              "river",
                                              "bridge",
                                              "bookcase",
                                              "blind",
                                              "coffee table",
                                              "toilet",
                                              "flower",
                                              "book",
                                              "hill",
                                              "bench",
                                              "countertop",
                                              "stove",
                                              "palm",
                                              "kitchen island",
                                              "computer",
                                              "swivel chair",
                                              "boat",
                                              "bar",
                                              "arcade machine",
                                              "hovel",
                                              "bus",
                                              "towel",
                                              "light",
                                              "truck",
                                              "tower",
                                              "chandelier",
                                              "awning",
                                              "streetlight",
                                              "booth",
                                              "television receiver",
                                              "airplane",
                                              "dirt track",
                                              "apparel",
                                              "pole",
                                              "land",
                                              "bannister",
                                              "escalator",
                                              "ottoman",
                                              "bottle",
                                              "buffet",
                                              "poster",
                                              "stage",
                                              "van",
                                              "ship",
                                              "fountain",
                                              "conveyer belt",
                                              "canopy",
                                              "washer",
                                              "plaything",
                                              "swimming pool",
                                              "stool",
                                              "barrel",
                                              "basket",
                                              "waterfall",
                                              "tent",
                                              "bag",
                                              "minibike",
                                              "cradle",
                                              "oven",
                                              "ball",
                                              "food",
                                              "step",
                                              "tank",
                                              "trade name",
                                              "microwave",
                                              "pot",
                                              "animal",
                                              "bicycle",
                                              "lake",
                                              "dishwasher",
                                              "screen",
                                              "blanket",
                                              "sculpture",
                                              "hood",
                                              "sconce",
                                              "vase",
                                              "traffic light",
                                              "tray",
                                              "ashcan",
                                              "fan",
                                              "pier",
                                              "crt screen",
                                              "plate",
                                              "monitor",
                                              "bulletin board",
                                              "shower",
                                              "radiator",
                                              "glass",
                                              "clock",
                                              "flag"};
  return names;
}

SegDataset read_ade20k(const Ade20kOptions& opts) {
  TCV_CHECK(!opts.root.empty(), "[read_ade20k] no root directory given");
  std::string split = opts.split;
  if (split == "train") split = "training";
  if (split == "val") split = "validation";
  const fs::path images = fs::path(opts.root) / "images" / split;
  const fs::path labels = fs::path(opts.root) / "annotations" / split;
  TCV_CHECK(fs::is_directory(images), images.string(), ": no such directory (split '", opts.split,
            "' of ADE20K root ", opts.root, ")");
  const bool with_gt = opts.read.ground_truth == GroundTruth::read;
  TCV_CHECK(!with_gt || fs::is_directory(labels), labels.string(),
            ": no such directory (the annotations of split '", opts.split, "')");
  std::vector<SegRecord> records;
  SkipCount skip{opts.read.on_corrupt};
  for (const fs::path& img : files_in(images)) {
    if (lower(img.extension().string()) != ".jpg") continue;
    SegRecord r{img.string(), "", img.stem().string()};
    if (with_gt) r.label_path = (labels / (r.id + ".png")).string();
    skip.guard([&] {
      TCV_CHECK(!with_gt || path_exists(r.label_path), r.label_path, ": label file not found (for ",
                r.image_path, ")");
      records.push_back(std::move(r));
    });
  }
  TCV_CHECK(!records.empty() || skip.n > 0, images.string(), ": no .jpg images");
  const bool reduce = opts.reduce_zero_label == ReduceZeroLabel::on;
  std::vector<std::string> classes = ade20k_classes();
  if (!reduce) classes.insert(classes.begin(), "other");
  return SegDataset(std::move(records), std::move(classes),
                    reduce ? LabelMap::reduce_zero(150) : LabelMap::identity(151), opts.read,
                    "ade20k " + split, skip.n, skip.first);
}

}  // namespace tcv::data
