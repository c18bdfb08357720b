// The data side of classification: datasets, transforms and DataLoaders built
// from the config's data.* keys and classification's own (ClsConfig: data.*,
// train.aug.*, val.aug.*).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/folder.h"
#include "data/image.h"
#include "data/transforms.h"
#include "train/config.h"
#include "train/task.h"
#include "train/tasks/cls.h"

namespace tcv::train {

/// The directory of the dataset files for a config: data.data_dir, or for IDX data
/// with data.data_dir "" the Debian dataset package's directory for data.dataset.
std::string resolve_data_dir(const Config& cfg);

/// What the image decoders accept: data.max_pixels.
data::ImageLimits image_limits(const Config& cfg);

/// The model's input: data.channels and data.input_size, or the dataset's own
/// (1 x 28 x 28 for IDX, 3 x 32 x 32 for CIFAR).
struct InputSpec {
  int64_t channels = 1, height = 28, width = 28;
};
InputSpec input_spec(const Config& cfg, const ClsConfig& cls);

/// Training augmentation on u8 (C, H, W): train.aug.resize_shorter, then
/// random_resized_crop or random_crop (to data.input_size), a resize to the input
/// size if the image still differs, hflip, color_jitter. Resizes are antialiased
/// (data::Antialias::on), as torchvision's on PIL images.
data::Transform train_transform(const Config& cfg, const ClsConfig& cls);
/// Evaluation (and tcv-predict) preprocessing on u8 (C, H, W): val.aug.resize_shorter,
/// val.aug.center_crop, then a resize to the input size if the image still differs
/// (antialiased, as training).
data::Transform eval_transform(const Config& cfg, const ClsConfig& cls);

/// Class names for reports and tcv-predict: the class directories of data.train_dir
/// (image_folder), the dataset's names (Fashion-MNIST, CIFAR-10), or "0", "1", ...
std::vector<std::string> config_class_names(const Config& cfg, const ClsConfig& cls);

/// The loaders for a run. IDX and CIFAR data without augmentation at their own size
/// take the fast in-memory path; everything else goes through a generic Dataset.
struct DataSources {
  std::unique_ptr<data::DataLoader> train, val;
  InputSpec input;
  int64_t train_size = 0, val_size = 0;
  bool val_in_memory = false;  ///< val reads an ImageClassificationDataset directly
  /// Image-file datasets (null otherwise), for the count of skipped corrupt files.
  std::shared_ptr<const data::Dataset> train_files, val_files;
};

/// Builds the datasets and loaders; errors name the key at fault and its line.
/// With world_size > 1 the training loader iterates rank `rank`'s share of each
/// epoch (data::DistributedSampler).
DataSources make_data(const Config& cfg, const ClsConfig& cls, int64_t rank = 0,
                      int64_t world_size = 1);

/// How classification reads a data set (its DatasetInfo::source): images held
/// in memory (IDX, CIFAR) or image files (ImageFolder, list files).
struct ClsSource {
  /// The images' channels where data.channels is 0, and whether they are the
  /// only ones the files hold (`fixed_channels` then says so in errors).
  int64_t channels = 3;
  std::string fixed_channels = {};
  /// The images' side where data.input_size is [] (0: data.input_size is required).
  int64_t side = 0;
  /// The number of classes the files hold (0: any).
  int64_t classes = 0;
  /// The class names known without reading the images (the first
  /// data.num_classes of them, then "0", "1", ...).
  std::function<std::vector<std::string>(const Config& cfg, const ClsConfig& cls)> class_names = {};
  /// The directory of the files where data.data_dir is "" (Debian's dataset package).
  std::string default_dir = {};
  /// A split held in memory (or empty for image files).
  std::function<data::ImageClassificationDataset(const Config& cfg, bool train)> load = {};
  /// Both splits of image files, read with `fo` (or empty for data in memory).
  struct Files {
    std::shared_ptr<data::ImageFileDataset> train, val;
  };
  std::function<Files(const Config& cfg, const ClsConfig& cls, const data::ImageFileOptions& fo)>
      open = {};
};
/// The source of the config's data.dataset.
const ClsSource& cls_source(const Config& cfg);

/// Classification's data sets (fashion_mnist, mnist, cifar10, cifar100,
/// image_folder, list) as the cls task registers them (TaskInfo::datasets):
/// names, descriptions, the keys each requires and how make_data reads it.
std::vector<DatasetInfo> cls_datasets();

}  // namespace tcv::train
