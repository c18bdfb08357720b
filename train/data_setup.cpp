#include "train/data_setup.h"

#include "engine/device.h"

#include <algorithm>
#include <any>
#include <filesystem>

#include "data/cifar.h"
#include "data/folder.h"
#include "train/report.h"
#include "train/task.h"
#include "train/tasks/common.h"

namespace tcv::train {

namespace fs = std::filesystem;

const ClsSource& cls_source(const Config& cfg) {
  return std::any_cast<const ClsSource&>(dataset_info(cfg).source);
}

std::string resolve_data_dir(const Config& cfg) {
  const DataConfig& data = cfg.settings().data;
  const std::string& fallback = cls_source(cfg).default_dir;
  return data.data_dir.empty() && !fallback.empty() ? fallback : data.data_dir;
}

namespace {

bool has_eval_aug(const ClsConfig& cls) {
  return cls.val_resize_shorter > 0 || cls.val_center_crop;
}

// The first `n` of `names`, then "0", "1", ... up to `n` classes.
std::vector<std::string> padded_names(std::vector<std::string> names, int64_t n) {
  names.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) names[i] = std::to_string(i);
  return names;
}

}  // namespace

data::ImageLimits image_limits(const Config& cfg) {
  return {.max_pixels = cfg.settings().data.max_pixels};
}

InputSpec input_spec(const Config& cfg, const ClsConfig& cls) {
  const ClsSource& src = cls_source(cfg);
  InputSpec s;
  s.channels = cls.channels > 0 ? cls.channels : src.channels;
  const auto& size = cls.input_size;
  if (size.size() == 2) {
    s.height = size[0];
    s.width = size[1];
  } else {
    s.height = s.width = src.side;  // parse_cls_config requires data.input_size where 0
  }
  return s;
}

// Every resize filters when it shrinks, as torchvision's transforms do on PIL
// images (TorchCV's pipeline): evaluating pretrained weights on aliased
// downscales costs accuracy.
constexpr data::Antialias kAntialias = data::Antialias::on;

data::Transform train_transform(const Config& cfg, const ClsConfig& cls) {
  const InputSpec in = input_spec(cfg, cls);
  const int64_t h = in.height, w = in.width;
  const ClsTrainAug& aug = cls.aug;
  const int64_t shorter = aug.resize_shorter;
  const bool rrc = aug.random_resized_crop;
  const auto& scale = aug.rrc_scale;
  const auto& ratio = aug.rrc_ratio;
  const data::RandomResizedCrop rrc_op{h, {scale[0], scale[1]}, {ratio[0], ratio[1]}};
  const bool rcrop = aug.random_crop;
  const int64_t padding = aug.random_crop_padding;
  const double flip = aug.hflip;
  const auto& j = aug.color_jitter;
  const bool jitter = std::any_of(j.begin(), j.end(), [](double v) { return v > 0; });
  const data::ColorJitter jitter_op{j[0], j[1], j[2], j[3]};
  return [=](const Tensor& img, data::Rng& rng) {
    Tensor x = img;  // u8 (C, H, W)
    if (shorter > 0) x = data::resize_shorter(x, shorter, 0, kAntialias);
    if (rrc) {
      const auto [top, left, ch, cw] = rrc_op.params(x.size(1), x.size(2), rng);
      x = data::resized_crop(x, top, left, ch, cw, h, w, kAntialias);
    } else if (rcrop) {
      // torchvision's RandomCrop for an (h, w) window: pad, pad up to the size, place.
      if (padding > 0) x = data::pad(x, padding, padding, padding, padding);
      const int64_t ph = std::max<int64_t>(h - x.size(1), 0),
                    pw = std::max<int64_t>(w - x.size(2), 0);
      if (ph > 0 || pw > 0) x = data::pad(x, pw, ph, pw, ph);
      const int64_t top = rng.randint(0, x.size(1) - h + 1);
      const int64_t left = rng.randint(0, x.size(2) - w + 1);
      x = data::crop(x, top, left, h, w);
    }
    if (x.size(1) != h || x.size(2) != w) x = data::resize(x, h, w, kAntialias);
    if (flip > 0) x = data::RandomHorizontalFlip{flip}(x, rng);
    if (jitter) x = jitter_op(x, rng);
    return x;
  };
}

data::Transform eval_transform(const Config& cfg, const ClsConfig& cls) {
  const InputSpec in = input_spec(cfg, cls);
  const int64_t h = in.height, w = in.width;
  const int64_t shorter = cls.val_resize_shorter;
  const bool center = cls.val_center_crop;
  return [=](const Tensor& img, data::Rng&) {
    Tensor x = img;  // u8 (C, H, W)
    if (shorter > 0) x = data::resize_shorter(x, shorter, 0, kAntialias);
    if (center) x = data::center_crop(x, h, w);
    if (x.size(1) != h || x.size(2) != w) x = data::resize(x, h, w, kAntialias);
    return x;
  };
}

std::vector<std::string> config_class_names(const Config& cfg, const ClsConfig& cls) {
  const ClsSource& src = cls_source(cfg);
  return padded_names(src.class_names ? src.class_names(cfg, cls) : std::vector<std::string>{},
                      cfg.settings().data.num_classes);
}

DataSources make_data(const Config& cfg, const ClsConfig& cls, int64_t rank, int64_t world_size) {
  const Settings& st = cfg.settings();
  const std::string& dataset = st.data.dataset;
  const int64_t num_classes = st.data.num_classes;
  const int64_t max_val = st.val.max_images;
  DataSources out;
  out.input = input_spec(cfg, cls);
  const InputSpec& in = out.input;
  const auto& jitter = cls.aug.color_jitter;
  if (in.channels == 1 && (jitter[2] > 0 || jitter[3] > 0))
    throw ConfigError(at_key(cfg, "train.aug.color_jitter") +
                      ": saturation and hue need 3 channels (data.channels is 1)");
  for (const auto& [k, v] : {std::pair{"data.normalize.mean", &st.data.normalize.mean},
                             std::pair{"data.normalize.std", &st.data.normalize.std}}) {
    const size_t n = v->size();
    if (n != 1 && static_cast<int64_t>(n) != in.channels)
      throw ConfigError(at_key(cfg, k) + ": " + std::to_string(n) + " values for " +
                        std::to_string(in.channels) + " channels (give 1 or " +
                        std::to_string(in.channels) + ")");
  }

  std::shared_ptr<const data::Dataset> train_src, val_src;
  std::shared_ptr<const data::ImageClassificationDataset> train_mem, val_mem;
  const ClsSource& src = cls_source(cfg);
  if (src.classes > 0 && num_classes != src.classes)
    throw ConfigError(at_key(cfg, "data.num_classes") + ": " + dataset + " has " +
                      std::to_string(src.classes) + " classes, got " + std::to_string(num_classes));
  if (src.load) {
    data::ImageClassificationDataset tr = src.load(cfg, true), va = src.load(cfg, false);
    if (max_val > 0) va = va.head(max_val);
    const bool native = in.height == tr.height() && in.width == tr.width();
    train_mem = std::make_shared<const data::ImageClassificationDataset>(std::move(tr));
    val_mem = std::make_shared<const data::ImageClassificationDataset>(std::move(va));
    if (!native || cls.aug.any())
      train_src = std::make_shared<data::InMemoryDataset>(train_mem, train_transform(cfg, cls));
    if (!native || has_eval_aug(cls))
      val_src = std::make_shared<data::InMemoryDataset>(val_mem, eval_transform(cfg, cls));
    out.train_size = train_mem->size();
    out.val_size = val_mem->size();
  } else {
    data::ImageFileOptions fo;
    fo.mode = in.channels == 1 ? data::ImageMode::gray : data::ImageMode::rgb;
    fo.on_corrupt = on_corrupt_of(st);
    fo.limits = image_limits(cfg);
    auto [tr, va] = src.open(cfg, cls, fo);
    if (max_val > 0 && max_val < va->size()) {
      auto head = va->samples();
      head.resize(static_cast<size_t>(max_val));
      va = std::make_shared<data::ImageFileDataset>(std::move(head), num_classes,
                                                    eval_transform(cfg, cls), fo, va->name());
    }
    out.train_files = tr;
    out.val_files = va;
    train_src = tr;
    val_src = va;
    out.train_size = tr->size();
    out.val_size = va->size();
  }

  // The loaders of tasks/common.h, with the fast in-memory path's sources.
  const auto [train_opts, val_opts] = split_loader_options(cfg, world_size, rank);
  out.train = train_src ? std::make_unique<data::DataLoader>(train_src, train_opts)
                        : std::make_unique<data::DataLoader>(train_mem, train_opts);
  out.val_in_memory = !val_src;
  out.val = val_src ? std::make_unique<data::DataLoader>(val_src, val_opts)
                    : std::make_unique<data::DataLoader>(val_mem, val_opts);
  return out;
}

namespace {

// IDX files (data.data_dir, or Debian's package where it is "").
data::ImageClassificationDataset load_idx(const Config& cfg, bool train) {
  const data::IdxFiles files =
      for_key(cfg, "data.data_dir", [&] { return data::find_idx_files(resolve_data_dir(cfg)); });
  return data::ImageClassificationDataset::from_idx(train ? files.train_images : files.test_images,
                                                    train ? files.train_labels : files.test_labels,
                                                    cfg.settings().data.num_classes);
}

ClsSource idx_source(std::string dir, std::vector<std::string> names) {
  return {.channels = 1,
          .fixed_channels = "IDX datasets have 1 channel",
          .side = 28,
          .class_names = [names](const Config&, const ClsConfig&) { return names; },
          .default_dir = std::move(dir),
          .load = load_idx};
}

ClsSource cifar_source(data::CifarKind kind, int64_t classes, std::vector<std::string> names) {
  return {.channels = 3,
          .fixed_channels = "CIFAR has 3 channels",
          .side = 32,
          .classes = classes,
          .class_names = [names](const Config&, const ClsConfig&) { return names; },
          .load =
              [kind](const Config& cfg, bool train) {
                return for_key(cfg, "data.data_dir", [&] {
                  return data::load_cifar(cfg.settings().data.data_dir, kind, train);
                });
              }};
}

// torchvision's ImageFolder: one directory of images per class, the same in both splits.
ClsSource::Files open_folder(const Config& cfg, const ClsConfig& cls,
                             const data::ImageFileOptions& fo) {
  auto tf = for_key(cfg, "data.train_dir", [&] {
    return std::make_shared<data::ImageFolder>(cls.train_dir, train_transform(cfg, cls), fo);
  });
  auto vf = for_key(cfg, "data.val_dir", [&] {
    return std::make_shared<data::ImageFolder>(cls.val_dir, eval_transform(cfg, cls), fo);
  });
  const int64_t n = cfg.settings().data.num_classes;
  if (static_cast<int64_t>(tf->classes().size()) != n)
    throw ConfigError(at_key(cfg, "data.num_classes") + ": " + std::to_string(n) +
                      ", but data.train_dir " + cls.train_dir + " has " +
                      std::to_string(tf->classes().size()) + " class directories");
  if (vf->classes() != tf->classes())
    throw ConfigError(at_key(cfg, "data.val_dir") + ": its class directories differ from " +
                      "those of data.train_dir (" + std::to_string(vf->classes().size()) + " vs " +
                      std::to_string(tf->classes().size()) + ")");
  return {tf, vf};
}

// ImageFolder's classes without reading the images: the sub-directories of
// data.train_dir, sorted by name, where they are data.num_classes.
std::vector<std::string> folder_class_names(const Config& cfg, const ClsConfig& cls) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cls.train_dir, ec))
    if (e.is_directory(ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  if (static_cast<int64_t>(names.size()) != cfg.settings().data.num_classes) names.clear();
  return names;
}

ClsSource::Files open_lists(const Config& cfg, const ClsConfig& cls,
                            const data::ImageFileOptions& fo) {
  const auto open = [&](bool train) -> std::shared_ptr<data::ImageFileDataset> {
    return for_key(cfg, train ? "data.train_list" : "data.val_list", [&] {
      return std::make_shared<data::ListFileDataset>(
          train ? cls.train_list : cls.val_list, cls.image_root, cfg.settings().data.num_classes,
          train ? train_transform(cfg, cls) : eval_transform(cfg, cls), fo);
    });
  };
  return {open(true), open(false)};
}

}  // namespace

std::vector<DatasetInfo> cls_datasets() {
  const ClsSource folder{.class_names = folder_class_names, .open = open_folder};
  const ClsSource list{.open = open_lists};
  std::vector<std::string> digits;
  for (int i = 0; i < 10; ++i) digits.push_back(std::to_string(i));
  return {
      {.name = "fashion_mnist",
       .description = "Fashion-MNIST IDX files (28x28 gray, 10 classes); data.data_dir \"\": "
                      "Debian's dataset-fashion-mnist",
       .source = idx_source("/usr/share/datasets/fashion-mnist",
                            {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                             "Shirt", "Sneaker", "Bag", "Ankle boot"})},
      {.name = "mnist",
       .description = "MNIST IDX files (28x28 gray, 10 classes); data.data_dir \"\": "
                      "/usr/share/datasets/mnist",
       .source = idx_source("/usr/share/datasets/mnist", digits)},
      {.name = "cifar10",
       .description = "CIFAR-10 binary files in data.data_dir (32x32 RGB, 10 classes)",
       .required = {"data.data_dir"},
       .source = cifar_source(data::CifarKind::cifar10, 10, data::cifar10_classes())},
      {.name = "cifar100",
       .description = "CIFAR-100 binary files in data.data_dir (32x32 RGB, 100 classes)",
       .required = {"data.data_dir"},
       .source = cifar_source(data::CifarKind::cifar100, 100, {})},
      {.name = "image_folder",
       .description = "torchvision's ImageFolder: data.train_dir and data.val_dir hold one "
                      "directory of images per class",
       .required = {"data.train_dir", "data.val_dir"},
       .source = folder},
      {.name = "list",
       .description = "list files (data.train_list, data.val_list: \"path label\" per line, "
                      "paths under data.image_root)",
       .required = {"data.train_list", "data.val_list"},
       .source = list},
  };
}

}  // namespace tcv::train
