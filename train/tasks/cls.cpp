#include "train/tasks/cls.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>

#include "data/dataset.h"
#include "data/folder.h"
#include "data/transforms.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "train/data_setup.h"
#include "train/metrics.h"
#include "train/predict.h"
#include "train/report.h"
#include "train/tasks/common.h"

namespace tcv::train {

Tensor soft_target_cross_entropy(const Tensor& logits, const Tensor& target) {
  TCV_CHECK(logits.dim() == 2 && target.shape() == logits.shape(),
            "[soft_target_cross_entropy] expects logits (N, C) and targets of the same shape, got ",
            logits.shape_str(), " and ", target.shape_str());
  return ops::neg(ops::mean(ops::sum(ops::mul(target, ops::log_softmax(logits, 1)), {1})));
}

namespace {

using namespace key_types;

std::vector<KeySpec> cls_keys() {
  return {
      {"data.train_dir", VT::string, std::string(""), "image_folder: root/<class>/<image>"},
      {"data.val_dir", VT::string, std::string(""), "image_folder: root/<class>/<image>"},
      {"data.train_list", VT::string, std::string(""), "list: \"relative/path label\" per line"},
      {"data.val_list", VT::string, std::string(""), "list: \"relative/path label\" per line"},
      {"data.image_root", VT::string, std::string(""),
       "list: paths are relative to this; \"\" = the list file's directory"},
      shared_key("data.input_size"),
      {"data.channels", VT::integer, int64_t{0}, "1 | 3; 0 = the dataset's own (1 IDX, 3 else)"},
      {"train.mixup_alpha", VT::floating, 0.0, "mixup with lambda ~ Beta(a, a); 0 = off"},
      {"train.aug.resize_shorter", VT::integer, int64_t{0},
       "resize the shorter side to N first; 0 = off"},
      {"train.aug.random_resized_crop.enable", VT::boolean, false,
       "RandomResizedCrop to data.input_size"},
      {"train.aug.random_resized_crop.scale", VT::float_array, Doubles{0.08, 1.0}, ""},
      {"train.aug.random_resized_crop.ratio", VT::float_array, Doubles{3.0 / 4.0, 4.0 / 3.0}, ""},
      {"train.aug.random_crop.enable", VT::boolean, false, "RandomCrop to data.input_size"},
      {"train.aug.random_crop.padding", VT::integer, int64_t{0}, "zeros on every side first"},
      {"train.aug.hflip", VT::floating, 0.0, "horizontal flip probability; 0 = off"},
      {"train.aug.color_jitter", VT::float_array, Doubles{0.0, 0.0, 0.0, 0.0},
       "[brightness, contrast, saturation, hue]; zeros = off"},
      {"val.aug.resize_shorter", VT::integer, int64_t{0},
       "resize the shorter side to N first; 0 = off"},
      {"val.aug.center_crop", VT::boolean, false, "central crop of data.input_size"},
      {"loss.label_smoothing", VT::floating, 0.0, "in [0, 1)"},
  };
}

}  // namespace

bool ClsTrainAug::any() const {
  return resize_shorter > 0 || random_resized_crop || random_crop || hflip > 0 ||
         std::any_of(color_jitter.begin(), color_jitter.end(), [](double v) { return v > 0; });
}

ClsConfig parse_cls_config(const Config& c) {
  const ConfigChecks check(c);
  ClsConfig o;
  check_dataset(c);
  const std::string& dataset = c.settings().data.dataset;
  const std::string with = "with data.dataset \"" + dataset + "\"";
  o.train_dir = c.get_string("data.train_dir");
  o.val_dir = c.get_string("data.val_dir");
  o.train_list = c.get_string("data.train_list");
  o.val_list = c.get_string("data.val_list");
  o.image_root = c.get_string("data.image_root");
  o.input_size = parse_size(
      c, "data.input_size", [](int64_t h, int64_t w) { return h > 0 && w > 0; },
      "[h, w] with positive values", EmptySize::allowed);
  const auto& size = o.input_size;
  const ClsSource& src = cls_source(c);
  if (size.empty() && src.side == 0) check.fail("data.input_size", "must be set ([h, w]) " + with);
  o.channels = c.get_int("data.channels");
  const int64_t channels = o.channels;
  if (channels != 0 && channels != 1 && channels != 3)
    check.fail("data.channels",
               "must be 0 (the dataset's own), 1 or 3, got " + std::to_string(channels));
  if (!src.fixed_channels.empty() && channels != 0 && channels != src.channels)
    check.fail("data.channels", src.fixed_channels + ", got " + std::to_string(channels));
  check.non_negative("train.mixup_alpha");
  o.mixup_alpha = c.get_double("train.mixup_alpha");
  check.at_least("train.aug.resize_shorter", 0);
  check.at_least("val.aug.resize_shorter", 0);
  ClsTrainAug& aug = o.aug;
  aug.resize_shorter = c.get_int("train.aug.resize_shorter");
  o.val_resize_shorter = c.get_int("val.aug.resize_shorter");
  for (const std::string k : {"scale", "ratio"}) {
    const std::string key = "train.aug.random_resized_crop." + k;
    const auto v = c.get_doubles(key);
    if (v.size() != 2 || !(v[0] > 0) || !(v[0] <= v[1]) || (k == "scale" && v[1] > 1))
      check.fail(key, "expected [low, high] with 0 < low <= high" +
                          std::string(k == "scale" ? " <= 1" : "") + ", got " + format_value(v));
    (k == "scale" ? aug.rrc_scale : aug.rrc_ratio) = v;
  }
  aug.random_resized_crop = c.get_bool("train.aug.random_resized_crop.enable");
  aug.random_crop = c.get_bool("train.aug.random_crop.enable");
  if (aug.random_resized_crop && aug.random_crop)
    check.fail("train.aug.random_crop.enable",
               "set only one of train.aug.random_crop and train.aug.random_resized_crop");
  check.at_least("train.aug.random_crop.padding", 0);
  aug.random_crop_padding = c.get_int("train.aug.random_crop.padding");
  check.probability("train.aug.hflip");
  aug.hflip = c.get_double("train.aug.hflip");
  aug.color_jitter = c.get_doubles("train.aug.color_jitter");
  const auto& jitter = aug.color_jitter;
  if (jitter.size() != 4)
    check.fail("train.aug.color_jitter",
               "expected [brightness, contrast, saturation, hue], got " + format_value(jitter));
  for (double v : jitter)
    if (!(v >= 0))
      check.fail("train.aug.color_jitter", "values must be >= 0, got " + format_value(jitter));
  if (jitter[3] > 0.5) check.fail("train.aug.color_jitter", "hue must be in [0, 0.5]");
  o.val_center_crop = c.get_bool("val.aug.center_crop");
  check.in_unit("loss.label_smoothing");
  o.label_smoothing = c.get_double("loss.label_smoothing");
  return o;
}

namespace {

// ---- data --------------------------------------------------------------------------

struct ClsBatch final : TaskBatch {
  data::Batch b;  // x f32 (B, C, H, W), y i64 (B)
  int64_t images() const override { return b.y.defined() ? b.y.size(0) : 0; }
};

class ClsLoader final : public TaskLoader {
 public:
  ClsLoader(std::unique_ptr<data::DataLoader> loader, std::shared_ptr<const data::Dataset> files)
      : loader_(std::move(loader)), files_(std::move(files)) {}
  int64_t num_batches() const override { return loader_->num_batches(); }
  int64_t size() const override { return loader_->size(); }
  std::string name() const override { return files_ ? files_->name() : ""; }
  int64_t skipped() const override { return loader_->skipped(); }
  std::string first_skipped() const override {
    const auto* d = dynamic_cast<const data::ImageFileDataset*>(files_.get());
    return d ? d->first_skipped() : "";
  }
  void start_epoch(int64_t epoch, int64_t skip) override { loader_->start_epoch(epoch, skip); }
  const TaskBatch* next() override { return loader_->next(batch_.b) ? &batch_ : nullptr; }
  data::DataLoader& loader() { return *loader_; }

 private:
  std::unique_ptr<data::DataLoader> loader_;
  std::shared_ptr<const data::Dataset> files_;  // image files, or null
  ClsBatch batch_;
};

// ---- evaluation ----------------------------------------------------------------------

constexpr int64_t kReportSamples = 24;

class ClsEvaluator final : public TaskEvaluator {
 public:
  // `val` is the loader the batches come from; samples are kept when it is not sharded.
  ClsEvaluator(ClsLoader& val, bool in_memory, bool sharded, std::vector<std::string> names)
      : TaskEvaluator("classification evaluator"),
        val_(val),
        in_memory_(in_memory),
        sharded_(sharded),
        names_(std::move(names)) {}

  void add(nn::Module& model, const TaskBatch& batch, Device device) override {
    const data::Batch& b = static_cast<const ClsBatch&>(batch).b;
    const Tensor x = b.x.to(device), y = b.y.to(device);  // (B, C, H, W), (B)
    const Tensor logits = model.forward(x);               // (B, classes)
    if (!sharded_ && static_cast<int64_t>(samples_.size()) < kReportSamples)
      add_samples(seen_, ops::argmax(logits, 1).to(kCPU), b);
    seen_ += b.y.size(0);  // the val loader does not shuffle: row i is image seen_ + i
    const Tensor loss = ops::cross_entropy(logits, y);
    loss_meter().update(loss.item(), y.size(0));
    acc_.update(logits, y);
  }

  Metrics finish() const override {
    return {{"top1", acc_.top1()}, {"top5", acc_.top5()}, {"loss", loss_meter().mean()}};
  }

  std::string describe(const Value& row) const override {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "top1 %.2f%% top5 %.2f%% loss %.4f", row.at("top1").as_double(),
                  row.at("top5").as_double(), row.at("loss").as_double());
    return buf;
  }

 private:
  void reset_metric() override {
    acc_.reset();
    samples_.clear();
    seen_ = 0;
  }

  void write_metric(ByteWriter& w) const override {
    w.put<int64_t>(acc_.correct1());
    w.put<int64_t>(acc_.correct5());
    w.put<int64_t>(acc_.count());
  }

  void read_metric(ByteReader& r) override {
    const auto c1 = r.get<int64_t>(), c5 = r.get<int64_t>(), n = r.get<int64_t>();
    TCV_CHECK(c1 >= 0 && c5 >= c1 && n >= c5, "classification evaluator: malformed state");
    acc_.add_counts(c1, c5, n);
  }

  void fill_row(Value& metrics, Value& /*details*/) const override {
    metrics["top1"] = acc_.top1();
    metrics["top5"] = acc_.top5();
  }

  int64_t images() const override { return acc_.count(); }

  void report_metric(ReportInputs& report) const override {
    report.headline = {{"top1", "top-1", "%"}, {"top5", "top-5", "%"}};
    report.val_charts = {{"validation accuracy (%)", {{"top1", "top-1"}, {"top5", "top-5"}}}};
    report.samples = samples_;
    report.class_names = names_;
  }

  // Keeps the first images of a val batch (rows from `first` on) with their labels:
  // the stored u8 images of an in-memory dataset, or the batch itself de-normalised.
  void add_samples(int64_t first, const Tensor& pred, const data::Batch& b) {
    const auto p = pred.to_vector<int64_t>(), l = b.y.to_vector<int64_t>();
    auto room = [&] { return static_cast<int64_t>(samples_.size()) < kReportSamples; };
    if (in_memory_) {
      const Tensor& images = val_.loader().dataset().images();  // u8 (N, C, H, W)
      const int64_t c = images.size(1), h = images.size(2), w = images.size(3);
      for (size_t i = 0; i < p.size() && room(); ++i) {
        const Tensor img = images.select(0, first + static_cast<int64_t>(i)).contiguous();
        const auto* px = static_cast<const uint8_t*>(img.data_ptr());
        samples_.push_back({std::vector<uint8_t>(px, px + c * h * w), c, h, w, l[i], p[i]});
      }
      return;
    }
    const Tensor x = b.x.contiguous();  // f32 (B, C, H, W), normalised
    const int64_t c = x.size(1), h = x.size(2), w = x.size(3), hw = h * w;
    const data::Normalize& n = val_.loader().options().normalize;
    const float* src = x.data<float>();
    for (size_t i = 0; i < p.size() && room(); ++i) {
      std::vector<uint8_t> px(static_cast<size_t>(c * hw));
      for (int64_t ch = 0; ch < c; ++ch) {
        const double m = n.mean.size() == 1 ? n.mean[0] : n.mean[ch];
        const double sd = n.std.size() == 1 ? n.std[0] : n.std[ch];
        for (int64_t k = 0; k < hw; ++k) {
          const double v =
              (src[(static_cast<int64_t>(i) * c + ch) * hw + k] * sd + m) * n.div_value;
          px[ch * hw + k] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
        }
      }
      samples_.push_back({std::move(px), c, h, w, l[i], p[i]});
    }
  }

  ClsLoader& val_;
  bool in_memory_, sharded_;
  std::vector<std::string> names_;
  AccuracyMeter acc_;
  std::vector<ReportSample> samples_;
  int64_t seen_ = 0;
};

// ---- prediction ----------------------------------------------------------------------

class ClsPredictor final : public TaskPredictor {
 public:
  ClsPredictor(const Config& cfg, const std::string& checkpoint, const PredictOptions& opts)
      : predictor_(cfg, checkpoint), top_(opts.top) {}

  data::ImageMode image_mode() const override {
    return predictor_.in_channels() == 1 ? data::ImageMode::gray : data::ImageMode::rgb;
  }
  const std::string& checkpoint() const override { return predictor_.checkpoint(); }

  Value predict(const Tensor& image, const std::string&, int64_t label) override {
    Value j = Value::object();
    if (label >= 0) j["label"] = label;
    Value t = Value::array();
    for (const auto& s : predictor_.predict(image, top_))
      t.push_back(Value::object({{"class", s.index}, {"name", s.name}, {"prob", s.prob}}));
    j["top"] = std::move(t);
    return j;
  }

  void print(std::ostream& os, const std::string& name, const Value& entry) const override {
    os << name;
    if (const Value* l = entry.find("label"))
      os << " (true: " << predictor_.class_names().at(static_cast<size_t>(l->as_int())) << ")";
    os << "\n";
    const Value& top = entry.at("top");
    for (size_t r = 0; r < top.size(); ++r)
      os << "  " << r + 1 << ". " << std::fixed << std::setprecision(4)
         << top[r].at("prob").as_double() << "  " << top[r].at("class").as_int() << " "
         << top[r].at("name").as_string() << "\n";
  }

 private:
  Predictor predictor_;
  int64_t top_;
};

// ---- the task --------------------------------------------------------------------------

class ClsTask final : public Task {
 public:
  explicit ClsTask(const Config& cfg)
      : cfg_(cfg), cls_(parse_cls_config(cfg)), num_classes_(cfg.settings().data.num_classes) {}

  TaskData make_data(int64_t rank, int64_t world) override {
    DataSources src = train::make_data(cfg_, cls_, rank, world);
    input_ = src.input;
    sharded_ = world > 1;
    val_in_memory_ = src.val_in_memory;
    TaskData d;
    d.summary = std::to_string(src.train_size) + " train / " + std::to_string(src.val_size) +
                " val images (" + cfg_.settings().data.dataset + ", " +
                std::to_string(input_.channels) + "x" + std::to_string(input_.height) + "x" +
                std::to_string(input_.width) + ")";
    d.train = std::make_unique<ClsLoader>(std::move(src.train), src.train_files);
    auto val = std::make_unique<ClsLoader>(std::move(src.val), src.val_files);
    val_ = val.get();
    d.val = std::move(val);
    return d;
  }

  std::shared_ptr<nn::Module> make_model() override {
    return create_config_model(cfg_, num_classes_, input_spec(cfg_, cls_).channels);
  }

  Tensor loss(StepModel& model, const TaskBatch& batch, const StepContext& ctx) override {
    const data::Batch& b = static_cast<const ClsBatch&>(batch).b;
    if (cls_.mixup_alpha > 0) {
      // Soft targets (label smoothing inside), mixed with a stream that depends
      // only on (seed, iter), so a resumed run mixes the same way.
      Tensor mx = b.x, my = b.y;
      data::Rng rng(ctx.seed ^ kMixupKey, static_cast<uint64_t>(ctx.iter));
      data::mixup(mx, my, num_classes_, cls_.mixup_alpha, rng, cls_.label_smoothing);
      return soft_target_cross_entropy(autocast::to_f32(model.forward(mx.to(ctx.device))),
                                       my.to(ctx.device));
    }
    const Tensor x = b.x.to(ctx.device), y = b.y.to(ctx.device);  // (B, C, H, W), (B)
    const Tensor logits = autocast::to_f32(model.forward(x));
    return ops::cross_entropy(logits, y, {.label_smoothing = cls_.label_smoothing});
  }

  std::unique_ptr<TaskEvaluator> make_evaluator() override {
    TCV_CHECK(val_, "[cls] make_evaluator before make_data");
    return std::make_unique<ClsEvaluator>(*val_, val_in_memory_, sharded_,
                                          config_class_names(cfg_, cls_));
  }

  std::string best_metric() const override { return "top1"; }

  std::unique_ptr<TaskPredictor> make_predictor(const std::string& checkpoint,
                                                const PredictOptions& opts) override {
    return std::make_unique<ClsPredictor>(cfg_, checkpoint, opts);
  }

 private:
  static constexpr uint64_t kMixupKey = 0x6d69787570ULL;  // "mixup"

  Config cfg_;
  ClsConfig cls_;
  int64_t num_classes_;
  InputSpec input_;
  ClsLoader* val_ = nullptr;
  bool val_in_memory_ = false, sharded_ = false;
};

}  // namespace

TaskInfo cls_task_info() {
  return task_info_for<ClsTask>("cls", "image classification", cls_datasets(), cls_keys(),
                                parse_cls_config);
}

}  // namespace tcv::train
