#include "train/tasks/common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "engine/device.h"
#include "engine/ops.h"

namespace tcv::train {

namespace {

double channel(const std::vector<double>& v, int64_t c) {
  return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
}

uint8_t to_pixel(double v) {
  return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
}

}  // namespace

SplitLoaderOptions split_loader_options(const Config& cfg, int64_t world, int64_t rank) {
  const Settings& st = cfg.settings();
  SplitLoaderOptions o;
  o.train = {.batch_size = st.train.batch_size,
             .shuffle = true,
             .drop_last = st.train.drop_last,
             .workers = static_cast<int>(st.data.workers),
             .seed = st.seed,
             .normalize = normalize_of(cfg),
             .world_size = world,
             .rank = rank,
             .pin_memory = st.device != DeviceChoice::cpu && cuda_is_available()};
  o.val = o.train;
  o.val.batch_size = st.val.batch_size;
  o.val.shuffle = false;
  o.val.drop_last = false;
  return o;
}

data::Normalize normalize_of(const Config& cfg) {
  const NormalizeConfig& n = cfg.settings().data.normalize;
  return {n.div_value, n.mean, n.std};
}

void check_three_channel_normalize(const Config& cfg, const std::string& what) {
  const NormalizeConfig& n = cfg.settings().data.normalize;
  for (const auto& [key, v] :
       {std::pair{"data.normalize.mean", &n.mean}, std::pair{"data.normalize.std", &n.std}})
    if (v->size() != 1 && v->size() != 3)
      cfg.fail(key, what + " images have 3 channels; give 1 or 3 values");
}

data::OnCorrupt on_corrupt_of(const Settings& st) {
  return st.data.skip_corrupt ? data::OnCorrupt::skip : data::OnCorrupt::error;
}

std::string RgbPredictor::picture_path(const std::string& name, const std::string& suffix) const {
  if (out_dir_.empty()) return "";
  std::filesystem::create_directories(out_dir_);
  return (std::filesystem::path(out_dir_) / (std::filesystem::path(name).stem().string() + suffix))
      .string();
}

std::vector<KeySpec> coco_file_keys() {
  using namespace key_types;
  return {
      {"data.train_ann", VT::string, std::string(""),
       "COCO: annotation file under data.data_dir (det: annotations/instances_train2017.json, "
       "pose: annotations/person_keypoints_train2017.json)"},
      {"data.val_ann", VT::string, std::string(""), "COCO: annotation file for evaluation"},
      {"data.train_images", VT::string, std::string(""),
       "COCO: image directory under data.data_dir (train2017)"},
      {"data.val_images", VT::string, std::string(""), "COCO: image directory (val2017)"},
  };
}

KeySpec shared_key(const std::string& key) {
  using namespace key_types;
  static const std::vector<KeySpec> keys = {
      {"data.input_size", VT::int_array, Ints{},
       "[h, w] the model sees; [] = the data set's own (cls: 28 x 28 IDX, 32 x 32 CIFAR) or the "
       "detector's (det: 300, 512 for ssd512)"},
      {"data.train_split", VT::string, std::string("train"),
       "VOC layout and scenes: the image list of each root, ImageSets/Main/<split>.txt (det; "
       "trainval for VOC07+12) or ImageSets/Segmentation/<split>.txt (seg; aug and train_aug "
       "add SBD's masks)"},
      {"data.val_split", VT::string, std::string("val"),
       "VOC layout and scenes: as data.train_split (det: test for VOC2007)"},
      {"network.stride", VT::integer, int64_t{8},
       "the backbone's output stride: 8 (layer3 and layer4 dilated) | 16 (layer4); pose: 8"},
      {"test.mode", VT::string, std::string("ss_test"),
       "evaluation and tcv-predict: ss_test (whole image) | sscrop_test (sliding window) | "
       "ms_test (scales x flip, whole) | mscrop_test (scales x flip, sliding); pose: ss_test "
       "(test.input_size) | ms_test (test.scale_search x its height)"},
      {"test.scale_search", VT::float_array, Doubles{0.75, 1.0, 1.25},
       "ms_test, mscrop_test: the image scales averaged"},
      {"train.aug_trans.random_resize.scale_range", VT::float_array, Doubles{0.5, 2.0},
       "random scale of image and label map, relative to base_size (or the image as read); "
       "pose: of the person-focused scale"},
      {"train.aug_trans.random_hflip.ratio", VT::floating, 0.5, "horizontal flip probability"},
  };
  for (const KeySpec& k : keys)
    if (k.key == key) return k;
  throw Error("shared_key: \"" + key + "\" is not a key several tasks read");
}

std::vector<int64_t> parse_size(const Config& cfg, const std::string& key,
                                const std::function<bool(int64_t h, int64_t w)>& valid,
                                const std::string& expected, EmptySize empty) {
  std::vector<int64_t> size = cfg.get_ints(key);
  if (size.empty() && empty == EmptySize::allowed) return size;
  if (size.size() != 2 || !valid(size[0], size[1]))
    cfg.fail(key, "expected " + expected + ", got " + format_value(size));
  return size;
}

std::vector<KeySpec> voc_split_keys() {
  return {shared_key("data.train_split"), shared_key("data.val_split")};
}

CocoFiles parse_coco_files(const Config& cfg, bool required) {
  const ConfigChecks check(cfg);
  const std::string why = "with data.dataset \"" + cfg.settings().data.dataset + "\"";
  if (required)
    for (const char* k : {"data.data_dir", "data.train_ann", "data.val_ann", "data.train_images",
                          "data.val_images"})
      check.required(k, why);
  const std::filesystem::path dir = cfg.settings().data.data_dir;
  const auto path = [&](const char* key) { return (dir / cfg.get_string(key)).string(); };
  return {path("data.train_ann"), path("data.val_ann"), path("data.train_images"),
          path("data.val_images")};
}

Tensor normalized_image(const Tensor& u8, const data::Normalize& n) {
  const Tensor img = u8.contiguous();
  const int64_t hw = img.size(1) * img.size(2);
  const auto* src = static_cast<const uint8_t*>(img.data_ptr());
  std::vector<float> x(static_cast<size_t>(3 * hw));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t k = 0; k < hw; ++k)
      x[c * hw + k] = static_cast<float>((src[c * hw + k] / n.div_value - channel(n.mean, c)) /
                                         channel(n.std, c));
  return from_vector(x, {1, 3, img.size(1), img.size(2)});
}

Tensor denormalized_image(const Tensor& images, int64_t i, std::array<int64_t, 2> hw,
                          const data::Normalize& n) {
  const Tensor x = images.select(0, i).contiguous().to(kCPU);  // f32 (3, H, W)
  const int64_t H = x.size(1), W = x.size(2), h = hw[0], w = hw[1];
  const float* src = x.data<float>();
  std::vector<uint8_t> px(static_cast<size_t>(3 * h * w));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx)
        px[(c * h + y) * w + xx] = to_pixel(
            (src[(c * H + y) * W + xx] * channel(n.std, c) + channel(n.mean, c)) * n.div_value);
  return from_vector(px, {3, h, w});
}

std::array<uint8_t, 3> mean_color(const data::Normalize& n) {
  std::array<uint8_t, 3> fill{};
  for (int64_t c = 0; c < 3; ++c) fill[c] = to_pixel(channel(n.mean, c) * n.div_value);
  return fill;
}

ReportPicture picture_of(const Tensor& u8) {
  const Tensor c = u8.contiguous();
  const auto* px = static_cast<const uint8_t*>(c.data_ptr());
  return {std::vector<uint8_t>(px, px + c.numel()), c.size(0), c.size(1), c.size(2)};
}

DatasetInfo coco_dataset(const std::string& what) {
  return {.name = "coco",
          .description = "COCO " + what + " JSON (data.train_ann, data.val_ann) and image folders",
          .required = {"data.data_dir", "data.train_ann", "data.val_ann", "data.train_images",
                       "data.val_images"}};
}

}  // namespace tcv::train
