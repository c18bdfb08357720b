#include "train/data_setup.h"

#include "engine/device.h"

#include <algorithm>
#include <filesystem>

#include "data/cifar.h"
#include "data/folder.h"
#include "train/report.h"
#include "train/task.h"
#include "train/tasks/common.h"

namespace tcv::train {

namespace fs = std::filesystem;

std::string resolve_data_dir(const Config& cfg) {
  const DataConfig& data = cfg.settings().data;
  if (data.dataset != "fashion_mnist" && data.dataset != "mnist") return data.data_dir;
  if (!data.data_dir.empty()) return data.data_dir;
  return data.dataset == "mnist" ? "/usr/share/datasets/mnist"
                                 : "/usr/share/datasets/fashion-mnist";
}

namespace {

bool is_idx(const std::string& dataset) {
  return dataset == "fashion_mnist" || dataset == "mnist";
}

bool is_cifar(const std::string& dataset) {
  return dataset == "cifar10" || dataset == "cifar100";
}

bool has_eval_aug(const ClsConfig& cls) {
  return cls.val_resize_shorter > 0 || cls.val_center_crop;
}

}  // namespace

data::ImageLimits image_limits(const Config& cfg) {
  return {.max_pixels = cfg.settings().data.max_pixels};
}

InputSpec input_spec(const Config& cfg, const ClsConfig& cls) {
  const std::string& dataset = cfg.settings().data.dataset;
  InputSpec s;
  s.channels = is_idx(dataset) ? 1 : 3;
  if (cls.channels > 0) s.channels = cls.channels;
  const auto& size = cls.input_size;
  if (size.size() == 2) {
    s.height = size[0];
    s.width = size[1];
  } else {
    s.height = s.width = is_cifar(dataset) ? 32 : 28;
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
  const std::string& dataset = cfg.settings().data.dataset;
  const int64_t n = cfg.settings().data.num_classes;
  if (dataset == "image_folder") {
    // ImageFolder's classes: the sub-directories, sorted by name.
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cls.train_dir, ec))
      if (e.is_directory(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    if (static_cast<int64_t>(names.size()) == n) return names;
  }
  return dataset_class_names(dataset, n);
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
  if (is_idx(dataset) || is_cifar(dataset)) {
    if (is_cifar(dataset)) {
      const int64_t classes = dataset == "cifar10" ? 10 : 100;
      if (num_classes != classes)
        throw ConfigError(at_key(cfg, "data.num_classes") + ": " + dataset + " has " +
                          std::to_string(classes) + " classes, got " + std::to_string(num_classes));
    }
    auto load = [&](bool train) {
      if (is_cifar(dataset))
        return for_key(cfg, "data.data_dir", [&] {
          return data::load_cifar(
              st.data.data_dir,
              dataset == "cifar10" ? data::CifarKind::cifar10 : data::CifarKind::cifar100, train);
        });
      const data::IdxFiles files = for_key(
          cfg, "data.data_dir", [&] { return data::find_idx_files(resolve_data_dir(cfg)); });
      return data::ImageClassificationDataset::from_idx(
          train ? files.train_images : files.test_images,
          train ? files.train_labels : files.test_labels, num_classes);
    };
    data::ImageClassificationDataset tr = load(true), va = load(false);
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
    fo.on_corrupt = st.data.skip_corrupt ? data::OnCorrupt::skip : data::OnCorrupt::error;
    fo.limits = image_limits(cfg);
    std::shared_ptr<data::ImageFileDataset> tr, va;
    if (dataset == "image_folder") {
      auto tf = for_key(cfg, "data.train_dir", [&] {
        return std::make_shared<data::ImageFolder>(cls.train_dir, train_transform(cfg, cls), fo);
      });
      auto vf = for_key(cfg, "data.val_dir", [&] {
        return std::make_shared<data::ImageFolder>(cls.val_dir, eval_transform(cfg, cls), fo);
      });
      if (static_cast<int64_t>(tf->classes().size()) != num_classes)
        throw ConfigError(at_key(cfg, "data.num_classes") + ": " + std::to_string(num_classes) +
                          ", but data.train_dir " + cls.train_dir + " has " +
                          std::to_string(tf->classes().size()) + " class directories");
      if (vf->classes() != tf->classes())
        throw ConfigError(at_key(cfg, "data.val_dir") + ": its class directories differ from " +
                          "those of data.train_dir (" + std::to_string(vf->classes().size()) +
                          " vs " + std::to_string(tf->classes().size()) + ")");
      tr = tf;
      va = vf;
    } else {
      const std::string& root = cls.image_root;
      tr = for_key(cfg, "data.train_list", [&] {
        return std::make_shared<data::ListFileDataset>(cls.train_list, root, num_classes,
                                                       train_transform(cfg, cls), fo);
      });
      va = for_key(cfg, "data.val_list", [&] {
        return std::make_shared<data::ListFileDataset>(cls.val_list, root, num_classes,
                                                       eval_transform(cfg, cls), fo);
      });
    }
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

std::vector<DatasetInfo> cls_datasets() {
  return {
      {.name = "fashion_mnist",
       .description = "Fashion-MNIST IDX files (28x28 gray, 10 classes); data.data_dir \"\": "
                      "Debian's dataset-fashion-mnist"},
      {.name = "mnist",
       .description = "MNIST IDX files (28x28 gray, 10 classes); data.data_dir \"\": "
                      "/usr/share/datasets/mnist"},
      {.name = "cifar10",
       .description = "CIFAR-10 binary files in data.data_dir (32x32 RGB, 10 classes)",
       .required = {"data.data_dir"}},
      {.name = "cifar100",
       .description = "CIFAR-100 binary files in data.data_dir (32x32 RGB, 100 classes)",
       .required = {"data.data_dir"}},
      {.name = "image_folder",
       .description = "torchvision's ImageFolder: data.train_dir and data.val_dir hold one "
                      "directory of images per class",
       .required = {"data.train_dir", "data.val_dir"}},
      {.name = "list",
       .description = "list files (data.train_list, data.val_list: \"path label\" per line, "
                      "paths under data.image_root)",
       .required = {"data.train_list", "data.val_list"}},
  };
}

}  // namespace tcv::train
