// What the detection and segmentation tasks (and any task that trains on
// images with targets of its own) share: the adapter from a data/ loader to the
// trainer's TaskLoader, and the image conversions between the u8 pictures of
// the data sets and reports and the normalised f32 inputs of the models.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/folder.h"
#include "data/transforms.h"
#include "engine/tensor.h"
#include "train/config.h"
#include "train/report.h"
#include "train/task.h"

namespace tcv::train {

/// The trainer's batch around a loader's own batch type.
template <class Batch>
struct TaskBatchOf final : TaskBatch {
  Batch b;
  int64_t images() const override { return b.size(); }
};

/// The batch of `batch`, which a TaskLoaderOf<..., Batch> produced.
template <class Batch>
const Batch& batch_of(const TaskBatch& batch) {
  return static_cast<const TaskBatchOf<Batch>&>(batch).b;
}

/// A TaskLoader over a data/ loader (DetDataLoader, SegDataLoader, ...) of a
/// data set that can name the first sample it skipped.
template <class Dataset, class Loader, class Batch>
class TaskLoaderOf final : public TaskLoader {
 public:
  /// The loader of `dataset`, made with the rest of its constructor's
  /// arguments (transform, options, ...).
  template <class... LoaderArgs>
  explicit TaskLoaderOf(std::shared_ptr<const Dataset> dataset, LoaderArgs&&... args)
      : dataset_(dataset), loader_(std::move(dataset), std::forward<LoaderArgs>(args)...) {}
  int64_t num_batches() const override { return loader_.num_batches(); }
  int64_t size() const override { return loader_.size(); }
  std::string name() const override { return dataset_->name(); }
  int64_t skipped() const override { return loader_.skipped(); }
  std::string first_skipped() const override { return dataset_->first_skipped(); }
  void start_epoch(int64_t epoch, int64_t skip) override { loader_.start_epoch(epoch, skip); }
  const TaskBatch* next() override { return loader_.next(batch_.b) ? &batch_ : nullptr; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  Loader loader_;
  TaskBatchOf<Batch> batch_;
};

/// data.normalize.{div_value, mean, std} of the config.
data::Normalize normalize_of(const Config& cfg);

/// Checks that data.normalize.mean and .std hold 1 or 3 values (images of 3
/// channels); `what` names the task's images in the error ("detection").
void check_three_channel_normalize(const Config& cfg, const std::string& what);

/// A predictor of RGB images, restored from the checkpoint `stem`, that draws
/// what it found into `out_dir` when one is given (det, seg, pose).
class RgbPredictor : public TaskPredictor {
 public:
  RgbPredictor(std::string stem, std::string out_dir)
      : stem_(std::move(stem)), out_dir_(std::move(out_dir)) {}
  data::ImageMode image_mode() const final { return data::ImageMode::rgb; }
  const std::string& checkpoint() const final { return stem_; }

 protected:
  /// Where a picture of image `name` goes: out_dir/<the name's stem><suffix>,
  /// the directory made; "" when no out_dir was given.
  std::string picture_path(const std::string& name, const std::string& suffix) const;

 private:
  std::string stem_;
  std::string out_dir_;
};

/// A COCO data set's files (detection and pose): data.train_ann, data.val_ann,
/// data.train_images, data.val_images, as paths under data.data_dir.
struct CocoFiles {
  std::string train_ann, val_ann, train_images, val_images;
};

/// Their keys, for the task's key table.
std::vector<KeySpec> coco_file_keys();

/// A key that several tasks read, for their key tables: data.input_size (cls,
/// det), data.train_split and data.val_split (det, seg: the VOC layout's image
/// lists), network.stride, test.mode, test.scale_search and
/// train.aug_trans.random_resize.scale_range (seg, pose),
/// train.aug_trans.random_hflip.ratio (det, seg, pose). The schema holds one
/// entry per key, so each is declared once, here, with help that speaks for
/// every task reading it. Another key is an error.
KeySpec shared_key(const std::string& key);

/// Whether a size key may hold [] (the data set's or the model's own size).
enum class EmptySize : uint8_t { rejected, allowed };

/// Reads `key`, a size [h, w] for which `valid(h, w)` holds (or [] where
/// `empty` allows it); another value is an error naming the key, "expected
/// <expected>, got <the value>".
std::vector<int64_t> parse_size(const Config& cfg, const std::string& key,
                                const std::function<bool(int64_t h, int64_t w)>& valid,
                                const std::string& expected, EmptySize empty = EmptySize::rejected);

/// data.train_split and data.val_split: the image lists of the VOC layout
/// (detection and segmentation), for the task's key table.
std::vector<KeySpec> voc_split_keys();

/// Reads them; with `required` (data.dataset "coco"), data.data_dir and each of
/// them must be set, an error ending "with data.dataset \"coco\"" otherwise.
CocoFiles parse_coco_files(const Config& cfg, bool required);

/// What a corrupt sample does (data.skip_corrupt): skipped, or an error.
data::OnCorrupt on_corrupt_of(const Settings& st);

/// A task's train and val data sets: read(train, on_corrupt_of(st)) for each
/// split, val cut to its first val.max_images images where that is set.
template <class Dataset, class Read>
std::pair<std::shared_ptr<const Dataset>, std::shared_ptr<const Dataset>> read_splits(
    const Settings& st, Read read) {
  const data::OnCorrupt on_corrupt = on_corrupt_of(st);
  std::shared_ptr<const Dataset> train = read(true, on_corrupt);
  std::shared_ptr<const Dataset> val = read(false, on_corrupt);
  if (const int64_t n = st.val.max_images; n > 0 && n < val->size())
    val = std::make_shared<const Dataset>(val->head(n));
  return {std::move(train), std::move(val)};
}

/// The loader options of a task's two splits: train.batch_size, shuffled,
/// train.drop_last; val.batch_size, in order, every image; both with
/// data.workers, seed, data.normalize, this rank's share of world, and pinned
/// host memory when the run may use a GPU.
struct SplitLoaderOptions {
  data::LoaderOptions train, val;
};
SplitLoaderOptions split_loader_options(const Config& cfg, int64_t world, int64_t rank);

/// The model input for one u8 (3, H, W) image: f32 (1, 3, H, W) holding
/// (pixel / div_value - mean[c]) / std[c].
Tensor normalized_image(const Tensor& u8, const data::Normalize& n);

/// The u8 (3, h, w) picture of the top-left (h, w) of row i of a normalised
/// batch (B, 3, H, W) on any device, rounded and clamped to [0, 255].
Tensor denormalized_image(const Tensor& images, int64_t i, std::array<int64_t, 2> hw,
                          const data::Normalize& n);

/// The mean colour in pixels (the fill of canvases that padding adds).
std::array<uint8_t, 3> mean_color(const data::Normalize& n);

/// A report picture of a u8 (C, H, W) image.
ReportPicture picture_of(const Tensor& u8);

/// A COCO data set of `what` ("instances", "person keypoints"): its JSON files
/// and image folders under data.data_dir, all required.
DatasetInfo coco_dataset(const std::string& what);

}  // namespace tcv::train
