#include "train/tasks/seg.h"

#include <algorithm>
#include <any>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <tuple>

#include "data/dataset.h"
#include "data/det/scenes.h"
#include "data/det/voc.h"
#include "data/image.h"
#include "data/label_png.h"
#include "data/seg/colorize.h"
#include "data/seg/dataset.h"
#include "data/seg/loader.h"
#include "data/seg/transforms.h"
#include "data/transforms.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "models/seg/loss.h"
#include "models/seg/segmentation.h"
#include "train/data_setup.h"
#include "train/eval/seg_miou.h"
#include "train/metrics.h"
#include "train/report.h"
#include "train/seg_infer.h"
#include "train/tasks/common.h"
#include "train/tasks/scenes.h"

namespace tcv::train {

namespace {

namespace fs = std::filesystem;
namespace mseg = models::seg;
using namespace key_types;

std::vector<KeySpec> seg_keys() {
  std::vector<KeySpec> keys = {
      {"data.reduce_zero_label", VT::boolean, true,
       "ADE20K: label 0 (\"other\") is ignored and 1..150 become 0..149 (mmsegmentation's)"},
      shared_key("train.aug_trans.random_resize.scale_range"),
      {"train.aug_trans.random_resize.base_size", VT::int_array, Ints{0, 0},
       "[long, short] the image is fitted into before the random scale (mmsegmentation's "
       "Resize scale, e.g. [2048, 1024] for Cityscapes); [0, 0] = the image as read"},
      {"train.aug_trans.random_crop.crop_size", VT::int_array, Ints{512, 512},
       "[h, w] training crop; image padded with the mean colour, labels with 255"},
      {"train.aug_trans.random_crop.cat_max_ratio", VT::floating, 1.0,
       "redraw crops where one class covers more than this share of the labelled pixels "
       "(mmsegmentation's 0.75); 1 = off"},
      shared_key("train.aug_trans.random_hflip.ratio"),
      {"train.aug_trans.photometric_distortion", VT::boolean, true,
       "mmsegmentation's PhotoMetricDistortion (brightness, contrast, saturation, hue)"},
      shared_key("test.mode"),
      {"test.crop_size", VT::int_array, Ints{512, 512}, "sliding window [h, w]"},
      {"test.crop_stride_ratio", VT::floating, 0.667, "window stride / crop_size"},
      shared_key("test.scale_search"),
      {"test.flip", VT::boolean, true, "ms_test, mscrop_test: the mirrored image too"},
      {"test.ms_average", VT::string, std::string("logits"),
       "ms_test, mscrop_test: what the passes average: logits (TorchCV's fcn_segmentor_test "
       "sums them) | probs (mmsegmentation's aug_test averages softmax probabilities)"},
      {"test.base_size", VT::int_array, Ints{0, 0},
       "[long, short] the image is fitted into before inference, logits resized back to the "
       "labels (mmsegmentation's test Resize, e.g. [2048, 512] for VOC); [0, 0] = as read"},
      {"loss.loss_type", VT::string, std::string("seg_auxce_loss"),
       "seg_auxce_loss (cross-entropy) | seg_auxohemce_loss (OHEM on the main output), both "
       "with the auxiliary head's cross-entropy"},
      {"loss.loss_weights.seg_loss", VT::floating, 1.0, "weight of the main output's loss"},
      {"loss.loss_weights.aux_loss", VT::floating, 0.4,
       "weight of the auxiliary head's loss; 0 = the model has no auxiliary head"},
      {"loss.params.ce_weight", VT::float_array, Doubles{},
       "class weights (one per class); [] = none"},
      {"loss.params.ohem_thresh", VT::floating, 0.7,
       "OHEM: pixels whose target probability is below this are kept"},
      {"loss.params.ohem_minkeep", VT::integer, int64_t{100000}, "OHEM: at least this many"},
      shared_key("network.stride"),
  };
  for (auto& k : voc_split_keys()) keys.push_back(k);
  for (auto& k : scene_keys()) keys.push_back(k);
  return keys;
}

// seg's own keys (and the shared ones it reads its own way), parsed and checked.
struct SegConfig {
  std::string train_split, val_split;
  bool reduce_zero_label = true;
  data::SegTrainAugOptions aug;
  std::array<int64_t, 2> test_base_size{};
  std::string test_mode;
  SegInferOptions infer;
  mseg::SegLossOptions loss;      // class_weight aside: ce_weight, on the device at use
  std::vector<double> ce_weight;  // loss.params.ce_weight; empty: none
  int64_t stride = 8;
  SceneConfig scenes;
};

// An [h, w] (or [long, short]) key with values >= lo.
std::array<int64_t, 2> pair_at_least(const Config& c, const std::string& key, int64_t lo) {
  const auto v = parse_size(
      c, key, [lo](int64_t h, int64_t w) { return h >= lo && w >= lo; },
      "[h, w] with values >= " + std::to_string(lo));
  return {v[0], v[1]};
}

SegConfig parse_seg_config(const Config& c) {
  const ConfigChecks check(c);
  SegConfig o;
  check_dataset(c);
  const Settings& st = c.settings();
  o.scenes = parse_scene_config(c);
  o.train_split = c.get_string("data.train_split");
  o.val_split = c.get_string("data.val_split");
  o.reduce_zero_label = c.get_bool("data.reduce_zero_label");
  check.range_pair("train.aug_trans.random_resize.scale_range", 1e-3, 1e3);
  const auto scale = c.get_doubles("train.aug_trans.random_resize.scale_range");
  o.aug.scale_ratio = {scale[0], scale[1]};
  o.aug.base_size = pair_at_least(c, "train.aug_trans.random_resize.base_size", 0);
  o.aug.crop = pair_at_least(c, "train.aug_trans.random_crop.crop_size", 1);
  o.aug.cat_max_ratio = c.get_double("train.aug_trans.random_crop.cat_max_ratio");
  if (const double r = o.aug.cat_max_ratio; !(r > 0 && r <= 1))
    check.fail("train.aug_trans.random_crop.cat_max_ratio",
               "must be in (0, 1], got " + format_double(r));
  check.probability("train.aug_trans.random_hflip.ratio");
  o.aug.flip_prob = c.get_double("train.aug_trans.random_hflip.ratio");
  o.aug.photometric = c.get_bool("train.aug_trans.photometric_distortion") ? data::Photometric::on
                                                                           : data::Photometric::off;
  check.choice("test.mode", {"ss_test", "sscrop_test", "ms_test", "mscrop_test"});
  check.choice("test.ms_average", {"logits", "probs"});
  o.test_mode = c.get_string("test.mode");
  const bool slide = o.test_mode == "sscrop_test" || o.test_mode == "mscrop_test";
  const bool multi = o.test_mode == "ms_test" || o.test_mode == "mscrop_test";
  SegInferOptions& in = o.infer;
  in.mode = slide ? SegInferMode::slide : SegInferMode::whole;
  in.crop = pair_at_least(c, "test.crop_size", 1);
  const double r = c.get_double("test.crop_stride_ratio");
  if (!(r > 0 && r <= 1))
    check.fail("test.crop_stride_ratio", "must be in (0, 1], got " + format_double(r));
  in.stride = {std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(in.crop[0]) * r)),
               std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(in.crop[1]) * r))};
  const auto scales = c.get_doubles("test.scale_search");
  if (scales.empty()) check.fail("test.scale_search", "must not be empty");
  for (double v : scales)
    if (!(v > 0 && v <= 8)) check.fail("test.scale_search", "scales must be in (0, 8]");
  in.scales = multi ? scales : std::vector<double>{1.0};
  in.flip = multi && c.get_bool("test.flip") ? FlipTest::on : FlipTest::off;
  in.average =
      c.get_string("test.ms_average") == "probs" ? SegAverage::probabilities : SegAverage::logits;
  o.test_base_size = pair_at_least(c, "test.base_size", 0);
  check.choice("loss.loss_type", {"seg_auxce_loss", "seg_auxohemce_loss"});
  o.loss.kind = c.get_string("loss.loss_type") == "seg_auxohemce_loss" ? mseg::SegLossKind::ohem_ce
                                                                       : mseg::SegLossKind::ce;
  check.non_negative("loss.loss_weights.seg_loss");
  check.non_negative("loss.loss_weights.aux_loss");
  o.loss.seg_weight = c.get_double("loss.loss_weights.seg_loss");
  o.loss.aux_weight = c.get_double("loss.loss_weights.aux_loss");
  o.ce_weight = c.get_doubles("loss.params.ce_weight");
  for (double w : o.ce_weight)
    if (!(w >= 0)) check.fail("loss.params.ce_weight", "weights must be >= 0");
  if (!o.ce_weight.empty() && static_cast<int64_t>(o.ce_weight.size()) != st.data.num_classes)
    check.fail("loss.params.ce_weight", std::to_string(o.ce_weight.size()) + " weights for " +
                                            std::to_string(st.data.num_classes) +
                                            " classes (data.num_classes)");
  check.probability("loss.params.ohem_thresh");
  check.at_least("loss.params.ohem_minkeep", 1);
  o.loss.ohem_thresh = c.get_double("loss.params.ohem_thresh");
  o.loss.ohem_min_kept = c.get_int("loss.params.ohem_minkeep");
  o.stride = c.get_int("network.stride");
  if (o.stride != 8 && o.stride != 16)
    check.fail("network.stride", "must be 8 or 16, got " + std::to_string(o.stride));
  check_three_channel_normalize(c, "segmentation");
  o.aug.fill = data::mean_fill(st.data.normalize.mean, st.data.normalize.div_value);
  return o;
}

// ---- settings read from the config --------------------------------------------------

mseg::SegmentationModel& seg_of(nn::Module& m) {
  return dynamic_cast<mseg::SegmentationModel&>(m);
}

// What data.dataset chooses: how the data set reads a split, names its
// classes without reading the data (tcv-predict) and colours them.
struct SegSource {
  std::function<data::SegDataset(const Config& cfg, const SegConfig& seg, const std::string& split,
                                 data::OnCorrupt on_corrupt)>
      read;
  std::function<std::vector<std::string>(const Config& cfg, const SegConfig& seg)> classes;
  const data::Palette& (*palette)() = data::voc_palette;
  /// Its label files hold Cityscapes label ids (tcv-predict --label-ids cityscapes).
  bool cityscapes_ids = false;
};

const data::Palette& palette_of(const Config& cfg) {
  return dataset_source<SegSource>(cfg).palette();
}

Value number_or_null(double v) {
  return std::isfinite(v) ? Value(v) : Value();
}

// ---- data --------------------------------------------------------------------------

using SegLoader = TaskLoaderOf<data::SegDataset, data::SegDataLoader, data::SegBatch>;

// ---- evaluation ----------------------------------------------------------------------

class SegEvaluator final : public TaskEvaluator {
 public:
  // This process is rank `rank` of `world`: with several, the val loader's
  // sampler pads the last ranks' shares with the first images, which are
  // counted once, on the rank that owns them (index mod world).
  SegEvaluator(const Config& cfg, const SegConfig& seg, const data::SegDataset& val, int64_t rank,
               int64_t world)
      : TaskEvaluator("segmentation evaluator", rank, world, "Validation predictions"),
        test_mode_(seg.test_mode),
        val_(val),
        names_(val.class_names()),
        meter_(static_cast<int64_t>(val.class_names().size())),
        infer_(seg.infer),
        norm_(normalize_of(cfg)),
        palette_(palette_of(cfg)) {}

  void add(nn::Module& model, const TaskBatch& batch, Device device) override {
    const data::SegBatch& b = batch_of<data::SegBatch>(batch);
    mseg::SegmentationModel& net = seg_of(model);
    const SegForward forward = [&](const Tensor& x) { return net.forward(x); };
    const Tensor logits = seg_batch_logits(forward, b.images.to(device), b, infer_);
    Tensor host_labels = b.labels;  // i64 (B, Hl, Wl): 255 ignored, and padding
    for (int64_t i = 0; i < b.size(); ++i)
      if (!owned(b.indices[static_cast<size_t>(i)])) {
        if (host_labels.same(b.labels)) host_labels = b.labels.clone();
        host_labels.select(0, i).fill_(255);  // another rank counts this image
      } else {
        ++images_;
      }
    const Tensor labels = host_labels.to(device);
    meter_.update(logits, labels);
    const auto l = host_labels.contiguous().to_vector<int64_t>();
    const auto counted = std::count_if(l.begin(), l.end(), [](int64_t v) { return v != 255; });
    if (counted > 0) {
      const Tensor loss = ops::cross_entropy(
          logits, labels, {.reduction = ops::Reduction::sum, .ignore_index = 255});
      loss_meter().add(loss.item(), counted);
    }
    if (!predictions_dir_.empty()) write_predictions(b, logits);
    if (wants_figure()) {
      const Tensor pred = seg_predict(logits).to(kCPU);  // i64 (B, Hl, Wl)
      for (int64_t i = 0; i < b.size() && wants_figure(); ++i) add_figure(b, i, pred);
    }
  }

  // The label maps of a folder of predictions against every val image's
  // ground truth, as cityscapesscripts scores a results folder: per image
  // <id>.png, or <id> / the image's stem followed by _labelIds.png or
  // _label.png (what tcv-predict writes), holding the values the data set's
  // label files hold (Cityscapes label ids, VOC class indices), mapped as the
  // ground truth is. A missing or unreadable file, another size than the
  // ground truth, or a value of a class that is not evaluated is named.
  void add_results(const std::string& dir) {
    mark_from_results();
    namespace fs = std::filesystem;
    TCV_CHECK(fs::is_directory(dir), dir, ": --results for segmentation is a folder of label PNGs");
    for (const data::SegRecord& r : val_.records()) {
      TCV_CHECK(!r.label_path.empty(), val_.name(), ": image ", r.image_path,
                " has no ground truth to score a prediction against");
      const std::string stem = fs::path(r.image_path).stem().string();
      std::string file;
      for (const std::string& base : {r.id, stem})
        for (const char* tail : {".png", "_labelIds.png", "_label.png"})
          if (file.empty() && fs::exists(fs::path(dir) / (base + tail)))
            file = (fs::path(dir) / (base + tail)).string();
      TCV_CHECK(!file.empty(), dir, ": no prediction for ", r.image_path, " (looked for ", r.id,
                ".png, ", r.id, "_labelIds.png, ", r.id, "_label.png and the same for ", stem, ")");
      const Tensor truth = data::map_labels(data::read_label_png(r.label_path).labels,
                                            val_.label_map(), r.label_path);
      const Tensor pred =
          data::map_labels(data::read_label_png(file).labels, val_.label_map(), file);
      TCV_CHECK(pred.shape() == truth.shape(), file, ": the prediction is ", pred.size(1), "x",
                pred.size(0), " but the ground truth ", r.label_path, " is ", truth.size(1), "x",
                truth.size(0));
      const uint8_t* p = pred.data<uint8_t>();
      for (int64_t k = 0; k < pred.numel(); ++k)
        TCV_CHECK(p[k] != data::kIgnoreLabel, file, ": pixel (", k % pred.size(1), ", ",
                  k / pred.size(1), ") predicts a value of a class that is not evaluated");
      meter_.update(pred.to(DType::i64).unsqueeze(0), truth.to(DType::i64).unsqueeze(0));
      ++images_;
    }
  }

  bool write_predictions_to(const std::string& dir) override {
    std::filesystem::create_directories(dir);
    predictions_dir_ = dir;
    // File value of each class: the smallest value the label files map to it
    // (Cityscapes: the label id of a train id; VOC: the class itself).
    file_value_.fill(-1);
    const auto& lut = val_.label_map().lut;
    for (int v = 255; v >= 0; --v)
      if (lut[static_cast<size_t>(v)] >= 0 && lut[static_cast<size_t>(v)] != data::kIgnoreLabel)
        file_value_[static_cast<size_t>(lut[static_cast<size_t>(v)])] = static_cast<int16_t>(v);
    return true;
  }

  Metrics finish() const override {
    const SegMetrics m = meter_.compute();
    return {{"miou", m.miou}, {"pixel_acc", m.pixel_acc}, {"mean_acc", m.mean_acc}};
  }

  std::string describe(const Value& row) const override {
    return row_words(row, {"miou", "pixel_acc"}, test_mode_);
  }

 private:
  void reset_metric() override {
    meter_.reset();
    images_ = 0;
  }

  void write_metric(ByteWriter& w) const override {
    w.put_vector(meter_.counts());
    w.put<int64_t>(images_);
  }

  void read_metric(ByteReader& r) override {
    const auto counts = r.get_vector<int64_t>();
    const auto images = r.get<int64_t>();
    const auto c = meter_.num_classes();
    TCV_CHECK(static_cast<int64_t>(counts.size()) == c * c && images >= 0,
              "segmentation evaluator: malformed state");
    meter_.add_counts(counts);
    images_ += images;
  }

  void fill_row(Value& metrics, Value& details) const override {
    const SegMetrics m = meter_.compute();
    // mIoU 0 when nothing was counted, so that `best` compares numbers.
    metrics["miou"] = std::isfinite(m.miou) ? m.miou : 0.0;
    metrics["pixel_acc"] = number_or_null(m.pixel_acc);
    metrics["mean_acc"] = number_or_null(m.mean_acc);
    Value per_class = Value::object();
    for (size_t c = 0; c < m.iou.size(); ++c)
      per_class[c < names_.size() ? names_[c] : std::to_string(c)] = number_or_null(m.iou[c]);
    details["class_iou"] = std::move(per_class);
  }

  int64_t images() const override { return images_; }

  void report_metric(ReportInputs& report) const override {
    report.headline = {{"miou", "mIoU (" + test_mode_ + ")", ""},
                       {"pixel_acc", "pixel accuracy", ""}};
    report.val_charts = {
        {"validation mIoU", {{"miou", "mIoU"}, {"pixel_acc", "pixel acc"}, {"mean_acc", "mAcc"}}}};
  }

  void add_figure(const data::SegBatch& b, int64_t i, const Tensor& pred) {
    const auto lhw = b.label_sizes[static_cast<size_t>(i)];
    Tensor img = denormalized_image(b.images, i, b.sizes[static_cast<size_t>(i)], norm_);
    if (img.size(1) != lhw[0] || img.size(2) != lhw[1])
      img = data::resize(img, lhw[0], lhw[1], data::Antialias::on);
    const Tensor p = pred.select(0, i).narrow(0, 0, lhw[0]).narrow(1, 0, lhw[1]).contiguous();
    const Tensor t =
        b.labels.select(0, i).narrow(0, 0, lhw[0]).narrow(1, 0, lhw[1]).contiguous().to(kCPU);
    ReportFigure f;
    f.pictures = {picture_of(img), picture_of(data::overlay_labels(img, p, palette_, 0.6)),
                  picture_of(data::overlay_labels(img, t, palette_, 0.6))};
    f.labels = {"image", "prediction", "ground truth"};
    const data::SegRecord& rec = val_.record(b.indices[static_cast<size_t>(i)]);
    f.caption = rec.id;
    keep_figure(std::move(f));
  }

  // This rank's images of the batch as <id>.png: the argmax at the label map's
  // size, in the values the data set's label files hold (what --results reads).
  void write_predictions(const data::SegBatch& b, const Tensor& logits) {
    const Tensor pred = seg_predict(logits).to(kCPU);  // i64 (B, Hl, Wl)
    for (int64_t i = 0; i < b.size(); ++i) {
      const int64_t index = b.indices[static_cast<size_t>(i)];
      if (!owned(index)) continue;
      const auto [h, w] = b.label_sizes[static_cast<size_t>(i)];
      const Tensor p = pred.select(0, i).narrow(0, 0, h).narrow(1, 0, w).contiguous();
      Tensor out = empty({h, w}, {.dtype = DType::u8});
      const int64_t* src = p.data<int64_t>();
      uint8_t* dst = out.data<uint8_t>();
      for (int64_t k = 0; k < h * w; ++k) {
        const int16_t v = file_value_[static_cast<size_t>(src[k])];
        TCV_CHECK(v >= 0, "[seg] class ", src[k], " has no value in the label files");
        dst[k] = static_cast<uint8_t>(v);
      }
      data::write_label_png(
          (std::filesystem::path(predictions_dir_) / (val_.record(index).id + ".png")).string(),
          out, palette_);
    }
  }

  std::string test_mode_;
  const data::SegDataset& val_;
  std::vector<std::string> names_;
  ConfusionMeter meter_;
  SegInferOptions infer_;
  data::Normalize norm_;
  const data::Palette& palette_;
  int64_t images_ = 0;
  std::string predictions_dir_;
  std::array<int16_t, 256> file_value_{};
};

// ---- prediction ----------------------------------------------------------------------

class SegPredictor final : public RgbPredictor {
 public:
  SegPredictor(const Config& cfg, const SegConfig& seg,
               std::shared_ptr<mseg::SegmentationModel> model, std::string stem,
               std::vector<std::string> names, const PredictOptions& opts)
      : RgbPredictor(std::move(stem), opts.out_dir),
        base_size_(seg.test_base_size),
        model_(std::move(model)),
        names_(std::move(names)),
        norm_(normalize_of(cfg)),
        infer_(seg.infer),
        palette_(palette_of(cfg)),
        opts_(opts) {
    if (opts_.label_ids == PredictOptions::LabelIds::cityscapes &&
        !dataset_source<SegSource>(cfg).cityscapes_ids)
      throw ConfigError(
          "--label-ids writes Cityscapes label ids; this config's data.dataset is \"" +
          cfg.settings().data.dataset + "\"");
  }

  Value predict(const Tensor& image, const std::string& name, int64_t) override {
    NoGradGuard no_grad;
    const int64_t h = image.size(1), w = image.size(2);
    data::SegSample s;
    s.image = image.contiguous();
    data::Rng rng(0, 0);  // evaluation preprocessing draws nothing
    data::seg_eval_transform({.fit = base_size_, .labels = data::EvalLabels::keep})(s, rng);
    const SegForward forward = [&](const Tensor& x) { return model_->forward(x); };
    const Tensor logits = seg_logits(forward, normalized_image(s.image, norm_), infer_, {h, w});
    const Tensor labels = seg_predict(logits).select(0, 0).contiguous();  // i64 (H, W)
    const auto l = labels.to_vector<int64_t>();
    std::vector<int64_t> count(names_.size() + 1, 0);
    for (int64_t v : l) ++count[std::min<size_t>(static_cast<size_t>(v), names_.size())];
    Value classes = Value::array();
    for (size_t c = 0; c < names_.size(); ++c)
      if (count[c] > 0)
        classes.push_back(Value::object(
            {{"label", static_cast<int64_t>(c)},
             {"name", names_[c]},
             {"fraction", static_cast<double>(count[c]) / static_cast<double>(l.size())}}));
    Value j = Value::object();
    j["height"] = h;
    j["width"] = w;
    j["classes"] = std::move(classes);
    if (const std::string stem = picture_path(name, ""); !stem.empty()) {
      data::write_image(stem + "_overlay.png",
                        data::overlay_labels(image.contiguous(), labels, palette_, 0.5));
      if (opts_.label_ids == PredictOptions::LabelIds::cityscapes)
        data::write_cityscapes_label_ids(stem + "_labelIds.png", labels);
      else
        data::write_label_png(stem + "_label.png", labels, palette_);
      j["overlay"] = stem + "_overlay.png";
      j["labels"] =
          stem + (opts_.label_ids == PredictOptions::LabelIds::cityscapes ? "_labelIds.png"
                                                                          : "_label.png");
    }
    return j;
  }

  void print(std::ostream& os, const std::string& name, const Value& entry) const override {
    os << name << ": " << entry.at("height").as_int() << "x" << entry.at("width").as_int();
    if (const Value* o = entry.find("overlay"))
      os << ", " << o->as_string() << ", " << entry.at("labels").as_string();
    os << "\n";
    const Value& classes = entry.at("classes");
    for (size_t k = 0; k < classes.size(); ++k) {
      char buf[128];
      std::snprintf(buf, sizeof(buf), "  %6.2f%%  %lld %s\n",
                    100.0 * classes[k].at("fraction").as_double(),
                    static_cast<long long>(classes[k].at("label").as_int()),
                    classes[k].at("name").as_string().c_str());
      os << buf;
    }
  }

 private:
  std::array<int64_t, 2> base_size_;  // test.base_size
  std::shared_ptr<mseg::SegmentationModel> model_;
  std::vector<std::string> names_;
  data::Normalize norm_;
  SegInferOptions infer_;
  const data::Palette& palette_;
  PredictOptions opts_;
};

// ---- the task --------------------------------------------------------------------------

class SegTask final : public Task {
 public:
  explicit SegTask(const Config& cfg)
      : cfg_(cfg),
        seg_(parse_seg_config(cfg)),
        ohem_(seg_.loss.kind == mseg::SegLossKind::ohem_ce),
        class_weights_(seg_.ce_weight) {}

  TaskData make_data(int64_t rank, int64_t world) override {
    rank_ = rank;
    world_ = world;
    const Settings& st = cfg_.settings();
    std::shared_ptr<const data::SegDataset> train, val;
    std::tie(train, val) = read_splits<data::SegDataset>(
        st, [&](bool train_split, data::OnCorrupt oc) { return read(train_split, oc); });
    const int64_t classes = st.data.num_classes;
    if (classes != train->num_classes())
      throw ConfigError(at_key(cfg_, "data.num_classes") + ": " + std::to_string(classes) +
                        ", but the data set has " + std::to_string(train->num_classes()) +
                        " classes (" + train->name() + ")");
    const data::SegTrainAugOptions& aug = seg_.aug;
    const auto [to, vo] = split_loader_options(cfg_, world, rank);
    const auto crop = aug.crop;
    TaskData d;
    d.summary = std::to_string(train->size()) + " train / " + std::to_string(val->size()) +
                " val images (" + st.data.dataset + ", " + std::to_string(train->num_classes()) +
                " classes, crops " + std::to_string(crop[0]) + "x" + std::to_string(crop[1]) + ")";
    d.train = std::make_unique<SegLoader>(train, data::seg_train_transform(aug), to);
    auto v = std::make_unique<SegLoader>(
        val,
        data::seg_eval_transform({.fit = seg_.test_base_size, .labels = data::EvalLabels::keep}),
        vo);
    val_ = v.get();
    d.val = std::move(v);
    return d;
  }

  std::shared_ptr<nn::Module> make_model() override {
    const mseg::SegModelOptions o{
        .num_classes = cfg_.settings().data.num_classes,
        .output_stride = seg_.stride,
        .aux = seg_.loss.aux_weight > 0 ? mseg::AuxHead::on : mseg::AuxHead::off};
    return create_task_model<mseg::SegmentationModel>(cfg_, "segmentation", o);
  }

  Tensor loss(StepModel& model, const TaskBatch& batch, const StepContext& ctx) override {
    const data::SegBatch& b = batch_of<data::SegBatch>(batch);
    const Tensor x = b.images.to(ctx.device), y = b.labels.to(ctx.device);  // (B,3,H,W), (B,H,W)
    const std::vector<Tensor> out = model.forward_with([&](nn::Module& m) {
      const mseg::SegOutput o = seg_of(m).forward_seg(x);
      return std::vector<Tensor>{o.out, o.aux};
    });
    mseg::SegOutput o{autocast::to_f32(out[0]),
                      out[1].defined() ? autocast::to_f32(out[1]) : Tensor()};
    const Tensor total = mseg::seg_loss(o, y, loss_options(ctx.device)).total;
    if (ctx.world == 1 || ohem_) return total;  // alone, skip counting the pixels
    // Cross-entropy means divide by the labelled pixels (their class weights'
    // sum); data-parallel, by those of the global batch.
    return ctx.global_normalized(total, pixel_weight(b.labels), 1e-12);
  }

  std::unique_ptr<TaskEvaluator> make_evaluator() override {
    TCV_CHECK(val_, "[seg] make_evaluator before make_data");
    return std::make_unique<SegEvaluator>(cfg_, seg_, val_->dataset(), rank_, world_);
  }

  std::unique_ptr<TaskEvaluator> evaluate_results(const std::string& dir) override {
    TCV_CHECK(val_, "[seg] evaluate_results before make_data");
    return results_evaluator<SegEvaluator>(dir, cfg_, seg_, val_->dataset());
  }

  std::string best_metric() const override { return "miou"; }

  std::unique_ptr<TaskPredictor> make_predictor(const std::string& checkpoint,
                                                const PredictOptions& opts) override {
    auto [model, stem] = model_for_prediction<mseg::SegmentationModel>(*this, cfg_, checkpoint);
    return std::make_unique<SegPredictor>(cfg_, seg_, model, stem, class_names(), opts);
  }

 private:
  // The denominator of a mean cross-entropy over `labels` (B, H, W): the
  // labelled pixels, or the sum of their classes' weights.
  double pixel_weight(const Tensor& labels) const {
    const auto l = labels.contiguous().to_vector<int64_t>();
    double w = 0;
    for (int64_t v : l)
      if (v != 255) w += class_weights_.empty() ? 1.0 : class_weights_[static_cast<size_t>(v)];
    return w;
  }

  mseg::SegLossOptions loss_options(Device device) const {
    mseg::SegLossOptions o = seg_.loss;
    if (const auto& w = seg_.ce_weight; !w.empty()) {
      std::vector<float> f(w.begin(), w.end());
      o.class_weight = from_vector(f, {static_cast<int64_t>(f.size())}).to(device);
    }
    return o;
  }

  std::shared_ptr<const data::SegDataset> read(bool train, data::OnCorrupt on_corrupt) const {
    const std::string key = train ? "data.train_split" : "data.val_split";
    const std::string& split = train ? seg_.train_split : seg_.val_split;
    return for_key(cfg_, key, [&] {
      return std::make_shared<const data::SegDataset>(
          dataset_source<SegSource>(cfg_).read(cfg_, seg_, split, on_corrupt));
    });
  }

  // Class names without reading the data (tcv-predict).
  std::vector<std::string> class_names() const {
    return dataset_source<SegSource>(cfg_).classes(cfg_, seg_);
  }

  Config cfg_;
  SegConfig seg_;
  bool ohem_;  // OHEM's mean divides by the pixels it keeps: per rank
  std::vector<double> class_weights_;
  SegLoader* val_ = nullptr;
  int64_t rank_ = 0, world_ = 1;
};

// VOC's layout (SegmentationClass/ PNGs, ImageSets/Segmentation/<split>.txt)
// under `dir`; its classes: classes.txt there after "background", or `fallback`.
data::SegDataset read_voc_layout(const Config& cfg, const std::string& dir,
                                 const std::string& split, data::OnCorrupt on_corrupt) {
  return data::read_voc_seg({.root = dir,
                             .split = split,
                             .read = {.on_corrupt = on_corrupt, .limits = image_limits(cfg)}});
}

std::vector<std::string> voc_layout_classes(const Config& cfg, std::vector<std::string> fallback) {
  const fs::path file = fs::path(cfg.settings().data.data_dir) / "classes.txt";
  std::error_code ec;
  if (!fs::exists(file, ec)) return fallback;
  std::vector<std::string> n = data::read_class_names(file.string());
  n.insert(n.begin(), "background");
  return n;
}

std::vector<DatasetInfo> seg_datasets() {
  SegSource cityscapes{
      .read =
          [](const Config& cfg, const SegConfig&, const std::string& split, data::OnCorrupt oc) {
            return data::read_cityscapes({.root = cfg.settings().data.data_dir,
                                          .split = split,
                                          .read = {.on_corrupt = oc, .limits = image_limits(cfg)}});
          },
      .classes = [](const Config&, const SegConfig&) { return data::cityscapes_classes(); },
      .palette = data::cityscapes_palette,
      .cityscapes_ids = true};
  SegSource voc{
      .read =
          [](const Config& cfg, const SegConfig&, const std::string& split, data::OnCorrupt oc) {
            return read_voc_layout(cfg, cfg.settings().data.data_dir, split, oc);
          },
      .classes = [](const Config& cfg,
                    const SegConfig&) { return voc_layout_classes(cfg, data::voc_seg_classes()); }};
  SegSource ade20k{
      .read =
          [](const Config& cfg, const SegConfig& seg, const std::string& split,
             data::OnCorrupt oc) {
            return data::read_ade20k({.root = cfg.settings().data.data_dir,
                                      .split = split,
                                      .reduce_zero_label = seg.reduce_zero_label
                                                               ? data::ReduceZeroLabel::on
                                                               : data::ReduceZeroLabel::off,
                                      .read = {.on_corrupt = oc, .limits = image_limits(cfg)}});
          },
      .classes =
          [](const Config&, const SegConfig& seg) {
            std::vector<std::string> n = data::ade20k_classes();
            if (!seg.reduce_zero_label) n.insert(n.begin(), "other");
            return n;
          }};
  SegSource scenes{.read =
                       [](const Config& cfg, const SegConfig& seg, const std::string& split,
                          data::OnCorrupt oc) {
                         return read_voc_layout(cfg, ensure_scenes(cfg, seg.scenes), split, oc);
                       },
                   .classes =
                       [](const Config& cfg, const SegConfig&) {
                         std::vector<std::string> n = data::fashion_mnist_classes();
                         n.insert(n.begin(), "background");
                         return voc_layout_classes(cfg, n);
                       }};
  return {{.name = "cityscapes",
           .description = "Cityscapes' layout under data.data_dir (leftImg8bit/, "
                          "gtFine/*_labelIds.png, 19 train ids)",
           .required = {"data.data_dir"},
           .source = cityscapes},
          {.name = "voc",
           .description = "Pascal VOC segmentation under data.data_dir "
                          "(SegmentationClass/ PNGs, 21 classes)",
           .required = {"data.data_dir"},
           .source = voc},
          {.name = "ade20k",
           .description = "ADE20K (SceneParsing) under data.data_dir (150 classes)",
           .required = {"data.data_dir"},
           .source = ade20k},
          {.name = "scenes",
           .description = "generated scenes of Fashion-MNIST items with exact masks "
                          "(scenes.*), made in data.data_dir when missing",
           .source = scenes}};
}

}  // namespace

TaskInfo seg_task_info() {
  return task_info_for<SegTask>("seg", "semantic segmentation (PSPNet, DeepLabV3, FCN)",
                                seg_datasets(), seg_keys(), parse_seg_config);
}

}  // namespace tcv::train
