#include "train/tasks/det.h"

#include <algorithm>
#include <any>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <tuple>

#include "data/dataset.h"
#include "data/det/coco.h"
#include "data/det/loader.h"
#include "data/det/scenes.h"
#include "data/det/transforms.h"
#include "data/det/voc.h"
#include "data/draw.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/transforms.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "models/det/multibox_loss.h"
#include "models/det/postprocess.h"
#include "models/det/ssd.h"
#include "train/data_setup.h"
#include "train/eval/coco_results.h"
#include "train/eval/det_map.h"
#include "train/metrics.h"
#include "train/report.h"
#include "train/tasks/common.h"
#include "train/tasks/scenes.h"

namespace tcv::train {

namespace {

namespace fs = std::filesystem;
namespace mdet = models::det;
using namespace key_types;

std::vector<KeySpec> det_keys() {
  std::vector<KeySpec> keys = {
      {"data.train_roots", VT::string_array, Strings{},
       "VOC: year directories under data.data_dir, e.g. [\"VOC2007\", \"VOC2012\"]; [] = "
       "data.data_dir itself"},
      {"data.val_roots", VT::string_array, Strings{}, "VOC: as data.train_roots"},
      {"data.keep_difficult", VT::boolean, false,
       "train on VOC's difficult objects too (evaluation always ignores them)"},
      shared_key("data.input_size"),
      {"train.aug_trans.photometric.ratio", VT::floating, 0.5,
       "each of contrast, hue, saturation, brightness, channel swap (random order) with this "
       "probability; 0 = off"},
      shared_key("train.aug_trans.random_hflip.ratio"),
      {"train.aug_trans.random_pad.ratio", VT::floating, 0.6,
       "expand (zoom out onto the mean colour) probability"},
      {"train.aug_trans.random_pad.up_scale_range", VT::float_array, Doubles{1.0, 4.0},
       "expand: canvas size range relative to the image"},
      {"train.aug_trans.random_det_crop.ratio", VT::floating, 1.0,
       "SSD's random IoU crop probability"},
      {"anchor.iou_threshold", VT::floating, 0.5,
       "a default box matches a ground truth from this IoU on"},
      {"anchor.aspect_ratio_list", VT::float_lists, std::vector<Doubles>{},
       "extra aspect ratios per feature map, e.g. [[2], [2, 3], ...]; [] = the model's"},
      {"anchor.cur_anchor_sizes", VT::float_array, Doubles{},
       "default box sizes in input pixels, one per feature map plus one; [] = the model's"},
      {"anchor.layout", VT::string, std::string("torchvision"),
       "default boxes: torchvision (centres on network.stride_list, sides clipped to the image) "
       "| torchcv (TorchCV's prior boxes: stride image / map, unclipped; needs "
       "anchor.cur_anchor_sizes)"},
      {"network.stride_list", VT::int_array, Ints{},
       "pixels between default box centres per feature map; [] = the model's"},
      {"loss.neg_pos_ratio", VT::floating, 3.0, "hard negatives per positive default box"},
      {"res.nms.max_threshold", VT::floating, 0.45, "class-wise NMS IoU"},
      {"res.nms.pre_nms", VT::integer, int64_t{400},
       "candidates before NMS, per class or per image (res.nms.pre_nms_scope)"},
      {"res.nms.pre_nms_scope", VT::string, std::string("class"),
       "class (the best pre_nms of each class: torchvision) | image (the best pre_nms (box, "
       "class) pairs of the image: TorchCV)"},
      {"res.cls_keep_num", VT::integer, int64_t{0},
       "detections kept per class after NMS (TorchCV: 50); 0 = all"},
      {"res.val_conf_thre", VT::floating, 0.01, "evaluation: detections from this score on"},
      {"res.vis_conf_thre", VT::floating, 0.5,
       "report pictures and tcv-predict: detections from this score on"},
      {"res.max_per_image", VT::integer, int64_t{200}, "detections kept per image"},
      {"val.metric", VT::string, std::string("voc07"),
       "voc07 (11-point VOC2007 AP at IoU 0.5) | voc (VOC2010+ area AP) | coco (AP@[.5:.95])"},
  };
  for (auto& k : voc_split_keys()) keys.push_back(k);
  for (auto& k : coco_file_keys()) keys.push_back(k);
  for (auto& k : scene_keys()) keys.push_back(k);
  return keys;
}

// det's own keys (and the shared ones it reads its own way), parsed and checked.
struct DetConfig {
  std::string train_split, val_split;
  std::vector<std::string> train_roots, val_roots;
  CocoFiles coco;
  bool keep_difficult = false;
  std::vector<int64_t> input_size;  // [s, s] or empty: the model's
  double photometric = 0, hflip = 0, pad = 0, pad_max_scale = 1, det_crop = 0;
  std::vector<std::vector<double>> aspect_ratio_list;
  std::vector<double> anchor_sizes;
  bool torchcv_layout = false;
  std::vector<int64_t> stride_list;
  mdet::MultiBoxLossOptions loss;  // anchor.iou_threshold, loss.neg_pos_ratio
  mdet::DetectionOptions nms;      // res.*; score_threshold is res.val_conf_thre
  double vis_conf_thre = 0.5;
  std::string metric;  // val.metric
  SceneConfig scenes;
};

// What data.dataset chooses: how the data set reads a split (errors naming
// its key) and names its classes without reading the data.
struct DetSource {
  std::function<std::shared_ptr<const data::DetDataset>(const Config& cfg, const DetConfig& det,
                                                        bool train, data::OnCorrupt on_corrupt)>
      read;
  /// Empty where only the data say (COCO's categories).
  std::function<std::vector<std::string>(const Config& cfg, const DetConfig& det)> classes = {};
  /// Its files are COCO's (data.train_ann, ... are required).
  bool coco = false;
};

DetConfig parse_det_config(const Config& c) {
  const ConfigChecks check(c);
  DetConfig o;
  check_dataset(c);
  o.coco = parse_coco_files(c, dataset_source<DetSource>(c).coco);
  o.scenes = parse_scene_config(c);
  o.train_split = c.get_string("data.train_split");
  o.val_split = c.get_string("data.val_split");
  o.train_roots = c.get_strings("data.train_roots");
  o.val_roots = c.get_strings("data.val_roots");
  o.keep_difficult = c.get_bool("data.keep_difficult");
  o.input_size = parse_size(
      c, "data.input_size", [](int64_t h, int64_t w) { return h == w && h >= 32; },
      "[s, s] with s >= 32 (SSD takes square images)", EmptySize::allowed);
  for (const char* k :
       {"train.aug_trans.photometric.ratio", "train.aug_trans.random_hflip.ratio",
        "train.aug_trans.random_pad.ratio", "train.aug_trans.random_det_crop.ratio"})
    check.probability(k);
  o.photometric = c.get_double("train.aug_trans.photometric.ratio");
  o.hflip = c.get_double("train.aug_trans.random_hflip.ratio");
  o.pad = c.get_double("train.aug_trans.random_pad.ratio");
  o.det_crop = c.get_double("train.aug_trans.random_det_crop.ratio");
  check.range_pair("train.aug_trans.random_pad.up_scale_range", 1.0, 16.0);
  const auto up = c.get_doubles("train.aug_trans.random_pad.up_scale_range");
  if (up[0] != 1.0)
    check.fail("train.aug_trans.random_pad.up_scale_range",
               "the expansion starts at 1 (the image as it is); give [1, max]");
  o.pad_max_scale = up[1];
  check.probability("anchor.iou_threshold");
  o.loss.iou_threshold = c.get_double("anchor.iou_threshold");
  check.choice("anchor.layout", {"torchvision", "torchcv"});
  o.torchcv_layout = c.get_string("anchor.layout") == "torchcv";
  o.anchor_sizes = c.get_doubles("anchor.cur_anchor_sizes");
  if (o.torchcv_layout && o.anchor_sizes.empty())
    check.fail("anchor.layout",
               "\"torchcv\" places TorchCV's prior boxes of anchor.cur_anchor_sizes; give them");
  check.positive("loss.neg_pos_ratio");
  o.loss.neg_pos_ratio = c.get_double("loss.neg_pos_ratio");
  check.probability("res.nms.max_threshold");
  check.at_least("res.nms.pre_nms", 1);
  check.choice("res.nms.pre_nms_scope", {"class", "image"});
  check.at_least("res.cls_keep_num", 0);
  check.probability("res.val_conf_thre");
  check.probability("res.vis_conf_thre");
  check.at_least("res.max_per_image", 1);
  o.nms.score_threshold = c.get_double("res.val_conf_thre");
  o.nms.top_k = c.get_int("res.nms.pre_nms");
  o.nms.top_k_scope = c.get_string("res.nms.pre_nms_scope") == "image" ? mdet::TopKScope::per_image
                                                                       : mdet::TopKScope::per_class;
  o.nms.keep_per_class = c.get_int("res.cls_keep_num");
  o.nms.nms_threshold = c.get_double("res.nms.max_threshold");
  o.nms.max_detections = c.get_int("res.max_per_image");
  o.vis_conf_thre = c.get_double("res.vis_conf_thre");
  check.choice("val.metric", {"voc07", "voc", "coco"});
  o.metric = c.get_string("val.metric");
  o.aspect_ratio_list = c.get_float_lists("anchor.aspect_ratio_list");
  for (const auto& row : o.aspect_ratio_list)
    for (double r : row)
      if (!(r >= 1))
        check.fail("anchor.aspect_ratio_list",
                   "ratios must be >= 1 (each adds its transpose too), got " + format_double(r));
  for (double s : o.anchor_sizes)
    if (!(s > 0)) check.fail("anchor.cur_anchor_sizes", "sizes must be positive");
  o.stride_list = c.get_ints("network.stride_list");
  for (int64_t s : o.stride_list)
    if (s <= 0) check.fail("network.stride_list", "strides must be positive");
  check_three_channel_normalize(c, "detection");
  return o;
}

// ---- settings read from the config --------------------------------------------------

mdet::SSD& ssd_of(nn::Module& m) {
  return dynamic_cast<mdet::SSD&>(m);
}

// The input side: data.input_size, or the model's own (512 for SSD512, 300 otherwise).
int64_t input_side(const Config& cfg, const DetConfig& det) {
  if (!det.input_size.empty()) return det.input_size[0];
  return cfg.settings().network.model_name == "ssd512" ? 512 : 300;
}

mdet::SsdOptions ssd_options(const Config& cfg, const DetConfig& det, int64_t num_classes) {
  mdet::SsdOptions o;
  o.num_classes = num_classes;
  const std::string& name = cfg.settings().network.model_name;
  mdet::AnchorOptions a =
      name == "ssd512" ? mdet::ssd512_anchor_options() : mdet::ssd300_anchor_options();
  // The model fixes the number of feature maps: a list of ratios of another
  // length is the list's fault (it was blamed on anchor.cur_anchor_sizes).
  const size_t maps = a.aspect_ratios.size();
  if (const auto& r = det.aspect_ratio_list; !r.empty()) {
    if (r.size() != maps)
      throw ConfigError(at_key(cfg, "anchor.aspect_ratio_list") + ": " + std::to_string(r.size()) +
                        " rows, but " + name + " has " + std::to_string(maps) +
                        " feature maps (give one row of ratios per map)");
    a.aspect_ratios = r;
  }
  if (const auto& s = det.anchor_sizes; !s.empty()) {
    // TorchCV gives sizes in pixels of the input; torchvision's boxes take
    // fractions of it, TorchCV's the pixels.
    const double side = static_cast<double>(input_side(cfg, det));
    a.scales.clear();
    for (double v : s) a.scales.push_back(v / side);
    a.sizes_px = s;
  }
  if (det.torchcv_layout) {
    a.layout = mdet::AnchorLayout::torchcv;
    a.clip = mdet::AnchorClip::none;
  }
  if (!det.stride_list.empty()) a.steps = det.stride_list;
  if (a.scales.size() != a.aspect_ratios.size() + 1)
    throw ConfigError(at_key(cfg, "anchor.cur_anchor_sizes") + ": " +
                      std::to_string(a.scales.size()) + " sizes for " +
                      std::to_string(a.aspect_ratios.size()) +
                      " feature maps (give one per map plus one)");
  if (!a.steps.empty() && a.steps.size() != a.aspect_ratios.size())
    throw ConfigError(at_key(cfg, "network.stride_list") + ": " + std::to_string(a.steps.size()) +
                      " strides for " + std::to_string(a.aspect_ratios.size()) + " feature maps");
  o.anchors = a;
  return o;
}

// Ground truth of one image in network-input pixels, boxes without area left out.
mdet::DetTarget target_in_pixels(const Tensor& boxes, const Tensor& labels, double side) {
  const int64_t n = boxes.size(0);
  if (n == 0) return {boxes, labels};
  const auto b = boxes.contiguous().to_vector<float>();
  const auto l = labels.contiguous().to_vector<int64_t>();
  std::vector<float> kb;
  std::vector<int64_t> kl;
  for (int64_t i = 0; i < n; ++i) {
    const float* r = b.data() + 4 * i;
    if (!(r[2] > r[0] && r[3] > r[1])) continue;
    for (int k = 0; k < 4; ++k) kb.push_back(static_cast<float>(r[k] * side));
    kl.push_back(l[static_cast<size_t>(i)]);
  }
  const auto m = static_cast<int64_t>(kl.size());
  return {from_vector(kb, {m, 4}), from_vector(kl, {m})};
}

std::string class_name(const std::vector<std::string>& names, int64_t label) {
  return label >= 1 && label <= static_cast<int64_t>(names.size())
             ? names[static_cast<size_t>(label - 1)]
             : std::to_string(label);
}

// Draws boxes [x1, y1, x2, y2] (pixels of `image`) with "name score" labels.
void draw_detections(Tensor& image, const std::vector<std::array<double, 4>>& boxes,
                     const std::vector<int64_t>& labels, const std::vector<double>& scores,
                     const std::vector<std::string>& names) {
  const int scale = image.size(2) >= 600 ? 2 : 1;
  for (size_t k = boxes.size(); k-- > 0;) {  // the best last, on top
    const data::Rgb col = data::class_color(labels[k]);
    data::draw_box(image, boxes[k], col, scale * 2);
    std::string text = class_name(names, labels[k]);
    if (k < scores.size()) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), " %.2f", scores[k]);
      text += buf;
    }
    const auto [tw, th] = data::text_size(text, scale);
    int64_t y = static_cast<int64_t>(boxes[k][1]) - th;
    if (y < 0) y = static_cast<int64_t>(boxes[k][1]);
    const int64_t x = std::clamp<int64_t>(static_cast<int64_t>(boxes[k][0]), 0,
                                          std::max<int64_t>(image.size(2) - tw, 0));
    data::draw_text(image, x, y, text, {0, 0, 0}, col, scale);
  }
}

struct BoxList {
  std::vector<std::array<double, 4>> boxes;
  std::vector<int64_t> labels;
  std::vector<double> scores;
};

// Detections with score >= threshold, boxes scaled by (sx, sy).
BoxList box_list(const mdet::Detections& d, double threshold, double sx, double sy) {
  BoxList out;
  const auto b = d.boxes.contiguous().to_vector<double>();
  const auto s = d.scores.contiguous().to_vector<double>();
  const auto l = d.labels.contiguous().to_vector<int64_t>();
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] < threshold) continue;
    out.boxes.push_back({b[4 * k] * sx, b[4 * k + 1] * sy, b[4 * k + 2] * sx, b[4 * k + 3] * sy});
    out.labels.push_back(l[k]);
    out.scores.push_back(s[k]);
  }
  return out;
}

// ---- data --------------------------------------------------------------------------

using DetLoader = TaskLoaderOf<data::DetDataset, data::DetDataLoader, data::DetBatch>;

// ---- evaluation ----------------------------------------------------------------------

class DetEvaluator final : public TaskEvaluator {
 public:
  // This process is rank `rank` of `world`: the val loader's sampler pads the
  // last ranks' shares with the first images, which the mAP takes once (by
  // image id) and the loss on the rank that owns them (index mod world).
  DetEvaluator(const Config& cfg, const DetConfig& det, const data::DetDataset& val, int64_t side,
               int64_t rank, int64_t world)
      : TaskEvaluator("detection evaluator", rank, world,
                      "Validation detections (score >= " + format_double(det.vis_conf_thre) + ")"),
        metric_(det.metric),
        val_(val),
        side_(side),
        names_(val.class_names()),
        eval_(DetEvalOptions{.metric = parse_det_metric(det.metric),
                             .class_names = val.class_names()}),
        post_(det.nms),
        loss_opts_(det.loss),
        norm_(normalize_of(cfg)),
        vis_(det.vis_conf_thre) {}

  void add(nn::Module& model, const TaskBatch& batch, Device device) override {
    const data::DetBatch& b = batch_of<data::DetBatch>(batch);
    mdet::SSD& net = ssd_of(model);
    const mdet::SsdOutput o = net.forward_heads(b.images.to(device));
    const Tensor anchors = net.default_boxes(side_, side_, device);
    std::vector<mdet::DetTarget> targets;
    for (int64_t i = 0; i < b.size(); ++i)
      targets.push_back(target_in_pixels(b.boxes[i], b.labels[i], static_cast<double>(side_)));
    add_owned_loss(mdet::multibox_loss(o.loc, o.conf, anchors, targets, loss_opts_).total(),
                   b.indices);
    const auto dets = mdet::postprocess_detections(o.loc, o.conf, anchors, {side_, side_}, post_);
    const double s = static_cast<double>(side_);
    for (int64_t i = 0; i < b.size(); ++i) {
      const data::DetRecord& rec = val_.record(b.indices[i]);
      const auto& d = dets[static_cast<size_t>(i)];
      eval_.add(b.image_ids[i], rec.target, ops::mul(d.boxes, 1.0 / s), d.scores, d.labels,
                static_cast<double>(b.sizes[i][1]), static_cast<double>(b.sizes[i][0]));
      if (wants_figure()) add_figure(b, i, d);
    }
  }

  Metrics finish() const override { return eval_.finish(); }

  // The detections of a COCO results file against every val image's ground
  // truth (as pycocotools' loadRes + COCOeval): category ids are the data
  // set's (COCO's ids) or the labels themselves (VOC, scenes).
  void add_results(const std::string& file) {
    mark_from_results();
    data::CocoTruth truth;
    truth.labels.names = names_;
    truth.labels.category_ids = category_ids();
    for (const data::DetRecord& r : val_.records()) {
      truth.image_ids.push_back(r.image_id);
      truth.targets.push_back(r.target);
    }
    const std::vector<ImageDetections> dets =
        coco_detections(parse_coco_results(data::read_maybe_gzip(file), file), truth, file);
    for (size_t i = 0; i < dets.size(); ++i)
      eval_.add(truth.image_ids[i], truth.targets[i], dets[i]);
  }

  std::vector<std::pair<std::string, std::string>> results_files() const override {
    return {{"detections.json", format_coco_results(eval_.detections(), category_ids())}};
  }

  std::string table() const override {
    return eval_.options().metric == DetMetric::coco ? format_coco_summary(eval_.coco().stats) : "";
  }

  std::string describe(const Value& row) const override {
    return row_words(row, {"map", "ap50"}, metric_);
  }

 private:
  void reset_metric() override { eval_.reset(); }
  void write_metric(ByteWriter& w) const override { w.put_string(eval_.serialize()); }
  void read_metric(ByteReader& r) override { eval_.merge(r.get_string()); }

  void fill_row(Value& metrics, Value& details) const override {
    Value per_class = Value::object();
    for (const auto& [name, v] : eval_.finish()) {
      if (name.rfind("ap/", 0) == 0)
        per_class[name.substr(3)] = v < 0 ? Value() : Value(v);  // null: no ground truth
      else
        metrics[name] = v;
    }
    details["class_ap"] = std::move(per_class);
  }

  int64_t images() const override { return eval_.images(); }

  void report_metric(ReportInputs& report) const override {
    report.headline = {{"map", "mAP (" + metric_ + ")", ""}, {"ap50", "AP50", ""}};
    report.val_charts = {{"validation mAP", {{"map", "mAP"}, {"ap50", "AP50"}}}};
  }

  // Results files' category ids of labels 1..K: COCO's ids, or the labels
  // themselves (VOC, scenes).
  std::vector<int64_t> category_ids() const {
    std::vector<int64_t> ids = val_.label_ids();
    if (ids.empty())
      for (size_t k = 1; k <= names_.size(); ++k) ids.push_back(static_cast<int64_t>(k));
    return ids;
  }

  void add_figure(const data::DetBatch& b, int64_t i, const mdet::Detections& d) {
    Tensor pred = denormalized_image(b.images, i, {b.images.size(2), b.images.size(3)}, norm_),
           truth = pred.clone();
    const BoxList p = box_list(d, vis_, 1.0, 1.0);
    draw_detections(pred, p.boxes, p.labels, p.scores, names_);
    BoxList t;
    const double s = static_cast<double>(side_);
    const auto gb = b.boxes[i].contiguous().to_vector<double>();
    const auto gl = b.labels[i].contiguous().to_vector<int64_t>();
    for (size_t k = 0; k < gl.size(); ++k) {
      t.boxes.push_back({gb[4 * k] * s, gb[4 * k + 1] * s, gb[4 * k + 2] * s, gb[4 * k + 3] * s});
      t.labels.push_back(gl[k]);
    }
    draw_detections(truth, t.boxes, t.labels, {}, names_);
    ReportFigure f;
    f.pictures = {picture_of(pred), picture_of(truth)};
    f.labels = {"detections", "ground truth"};
    f.caption = val_.record(b.indices[i]).image_path + ": " + std::to_string(p.boxes.size()) +
                " detections, " + std::to_string(t.boxes.size()) + " objects";
    keep_figure(std::move(f));
  }

  std::string metric_;  // val.metric
  const data::DetDataset& val_;
  int64_t side_;
  std::vector<std::string> names_;
  DetectionEvaluator eval_;
  mdet::DetectionOptions post_;
  mdet::MultiBoxLossOptions loss_opts_;
  data::Normalize norm_;
  double vis_;
};

// ---- prediction ----------------------------------------------------------------------

class DetPredictor final : public RgbPredictor {
 public:
  DetPredictor(const Config& cfg, const DetConfig& det, std::shared_ptr<mdet::SSD> model,
               std::string stem, std::vector<std::string> names, const PredictOptions& opts)
      : RgbPredictor(std::move(stem), opts.out_dir),
        model_(std::move(model)),
        names_(std::move(names)),
        side_(input_side(cfg, det)),
        norm_(normalize_of(cfg)),
        post_(det.nms),
        threshold_(opts.score_threshold >= 0 ? opts.score_threshold : det.vis_conf_thre) {}

  Value predict(const Tensor& image, const std::string& name, int64_t) override {
    NoGradGuard no_grad;
    const int64_t h = image.size(1), w = image.size(2);
    data::DetSample s;
    s.image = image;
    data::Rng rng(0, 0);  // evaluation preprocessing draws nothing
    data::det_eval_transform(side_)(s, rng);
    const Tensor x = normalized_image(s.image, norm_);  // f32 (1, 3, S, S)
    const mdet::SsdOutput o = model_->forward_heads(x);
    const Tensor anchors = model_->default_boxes(side_, side_, kCPU);
    const auto dets = mdet::postprocess_detections(o.loc, o.conf, anchors, {side_, side_}, post_);
    const double s_ = static_cast<double>(side_);
    const BoxList l = box_list(dets.front(), threshold_, static_cast<double>(w) / s_,
                               static_cast<double>(h) / s_);
    Value j = Value::object();
    Value list = Value::array();
    for (size_t k = 0; k < l.boxes.size(); ++k) {
      Value box = Value::array();
      for (double v : l.boxes[k]) box.push_back(std::round(v * 100) / 100);
      list.push_back(Value::object({{"label", l.labels[k]},
                                    {"name", class_name(names_, l.labels[k])},
                                    {"score", l.scores[k]},
                                    {"box", std::move(box)}}));
    }
    j["detections"] = std::move(list);
    if (const std::string file = picture_path(name, "_det.png"); !file.empty()) {
      Tensor pic = image.contiguous().clone();
      draw_detections(pic, l.boxes, l.labels, l.scores, names_);
      data::write_image(file, pic);
      j["picture"] = file;
    }
    return j;
  }

  void print(std::ostream& os, const std::string& name, const Value& entry) const override {
    const Value& list = entry.at("detections");
    os << name << ": " << list.size() << " detection" << (list.size() == 1 ? "" : "s")
       << " (score >= " << format_double(threshold_) << ")";
    if (const Value* p = entry.find("picture")) os << ", drawn in " << p->as_string();
    os << "\n";
    for (size_t k = 0; k < list.size(); ++k) {
      const Value& d = list[k];
      const Value& b = d.at("box");
      char buf[160];
      std::snprintf(buf, sizeof(buf), "  %zu. %.4f  %s  [%.1f, %.1f, %.1f, %.1f]\n", k + 1,
                    d.at("score").as_double(), d.at("name").as_string().c_str(), b[0].as_double(),
                    b[1].as_double(), b[2].as_double(), b[3].as_double());
      os << buf;
    }
  }

 private:
  std::shared_ptr<mdet::SSD> model_;
  std::vector<std::string> names_;
  int64_t side_;
  data::Normalize norm_;
  mdet::DetectionOptions post_;
  double threshold_;
};

// ---- the task --------------------------------------------------------------------------

class DetTask final : public Task {
 public:
  explicit DetTask(const Config& cfg)
      : cfg_(cfg), det_(parse_det_config(cfg)), side_(input_side(cfg, det_)) {}

  TaskData make_data(int64_t rank, int64_t world) override {
    rank_ = rank;
    world_ = world;
    const Settings& st = cfg_.settings();
    std::shared_ptr<const data::DetDataset> train, val;
    std::tie(train, val) = read_splits<data::DetDataset>(
        st, [&](bool train_split, data::OnCorrupt oc) { return read(train_split, oc); });
    names_ = train->class_names();
    const int64_t classes = st.data.num_classes;
    if (classes != train->num_classes() + 1)
      throw ConfigError(at_key(cfg_, "data.num_classes") + ": " + std::to_string(classes) +
                        ", but the data set has " + std::to_string(train->num_classes()) +
                        " object classes (data.num_classes counts the background too: " +
                        std::to_string(train->num_classes() + 1) + ")");
    if (val->class_names() != train->class_names())
      throw ConfigError(at_key(cfg_, "data.dataset") +
                        ": the training and validation sets name different classes");

    data::SsdAugmentOptions aug;
    aug.size = side_;
    aug.keep_difficult = det_.keep_difficult;
    aug.distort.p = det_.photometric;
    aug.photometric = aug.distort.p > 0;
    aug.flip.p = det_.hflip;
    aug.expand_opts.p = det_.pad;
    aug.expand_opts.max_scale = det_.pad_max_scale;
    aug.expand_opts.fill = mean_color(normalize_of(cfg_));
    aug.expand_opts.max_pixels = st.data.max_pixels;
    aug.expand = aug.expand_opts.p > 0;
    // TorchCV's order (data::ssd_train_transform), SSD's IoU crop with a probability.
    const double crop_p = det_.det_crop;
    const data::DetTransform train_tf = [aug, crop_p](data::DetSample& s, data::Rng& rng) {
      data::det_drop_objects(s, aug.keep_difficult, aug.keep_crowd);
      if (aug.photometric) aug.distort(s, rng);
      aug.flip(s, rng);
      if (aug.expand) aug.expand_opts(s, rng);
      if (crop_p >= 1 || (crop_p > 0 && rng.uniform() < crop_p)) aug.crop_opts(s, rng);
      data::det_resize(s, aug.size, aug.size);
      data::det_drop_objects(s, true, true);  // boxes a crop left without area
    };
    const auto [to, vo] = split_loader_options(cfg_, world, rank);
    TaskData d;
    d.summary = std::to_string(train->size()) + " train / " + std::to_string(val->size()) +
                " val images (" + st.data.dataset + ", " + std::to_string(train->num_classes()) +
                " classes, " + std::to_string(side_) + "x" + std::to_string(side_) + ")";
    d.train = std::make_unique<DetLoader>(train, train_tf, to);
    auto v = std::make_unique<DetLoader>(val, data::det_eval_transform(side_), vo);
    val_ = v.get();
    d.val = std::move(v);
    return d;
  }

  std::shared_ptr<nn::Module> make_model() override {
    return create_task_model<mdet::SSD>(cfg_, "detection",
                                        ssd_options(cfg_, det_, cfg_.settings().data.num_classes));
  }

  Tensor loss(StepModel& model, const TaskBatch& batch, const StepContext& ctx) override {
    const data::DetBatch& b = batch_of<data::DetBatch>(batch);
    const Tensor x = b.images.to(ctx.device);  // (B, 3, S, S)
    const std::vector<Tensor> out = model.forward_with([&](nn::Module& m) {
      const mdet::SsdOutput o = ssd_of(m).forward_heads(x);
      return std::vector<Tensor>{o.loc, o.conf};
    });
    const Tensor anchors = ssd_of(model.module()).default_boxes(side_, side_, ctx.device);
    std::vector<mdet::DetTarget> targets;
    for (int64_t i = 0; i < b.size(); ++i)
      targets.push_back(target_in_pixels(b.boxes[i], b.labels[i], static_cast<double>(side_)));
    const mdet::MultiBoxLosses l = mdet::multibox_loss(
        autocast::to_f32(out[0]), autocast::to_f32(out[1]), anchors, targets, det_.loss);
    // Normalised by the matched default boxes of the global batch, not this rank's.
    return ctx.global_normalized(l.total(), static_cast<double>(l.num_matched), 1.0);
  }

  std::unique_ptr<TaskEvaluator> make_evaluator() override {
    TCV_CHECK(val_, "[det] make_evaluator before make_data");
    return std::make_unique<DetEvaluator>(cfg_, det_, val_->dataset(), side_, rank_, world_);
  }

  std::unique_ptr<TaskEvaluator> evaluate_results(const std::string& file) override {
    TCV_CHECK(val_, "[det] evaluate_results before make_data");
    return results_evaluator<DetEvaluator>(file, cfg_, det_, val_->dataset(), side_);
  }

  std::string best_metric() const override { return "map"; }

  std::unique_ptr<TaskPredictor> make_predictor(const std::string& checkpoint,
                                                const PredictOptions& opts) override {
    auto [model, stem] = model_for_prediction<mdet::SSD>(*this, cfg_, checkpoint);
    return std::make_unique<DetPredictor>(cfg_, det_, model, stem, class_names(), opts);
  }

 private:
  std::shared_ptr<const data::DetDataset> read(bool train, data::OnCorrupt on_corrupt) const {
    return dataset_source<DetSource>(cfg_).read(cfg_, det_, train, on_corrupt);
  }

  // Class names without reading the data where the data set knows them
  // (tcv-predict); COCO's are the categories of its validation file.
  std::vector<std::string> class_names() const {
    if (!names_.empty()) return names_;
    if (const auto& known = dataset_source<DetSource>(cfg_).classes) return known(cfg_, det_);
    std::vector<std::string> names;
    try {
      names = read(false, data::OnCorrupt::skip)->class_names();
    } catch (const Error&) {
      for (int64_t k = 1; k < cfg_.settings().data.num_classes; ++k)
        names.push_back(std::to_string(k));
    }
    return names;
  }

  Config cfg_;
  DetConfig det_;
  int64_t side_;
  std::vector<std::string> names_;
  DetLoader* val_ = nullptr;
  int64_t rank_ = 0, world_ = 1;
};

// VOC's layout (Annotations/, JPEGImages/, ImageSets/Main/<split>.txt) in
// each of data.train_roots / data.val_roots under `dir` (or `dir` itself);
// errors name `key`.
std::shared_ptr<const data::DetDataset> read_voc_layout(const Config& cfg, const DetConfig& det,
                                                        const std::string& dir, bool train,
                                                        const std::string& key,
                                                        data::OnCorrupt on_corrupt) {
  std::vector<std::string> roots;
  for (const auto& r : train ? det.train_roots : det.val_roots)
    roots.push_back((fs::path(dir) / r).string());
  if (roots.empty()) roots.push_back(dir);
  return for_key(cfg, key, [&] {
    return std::make_shared<const data::DetDataset>(
        data::read_voc({.roots = roots,
                        .split = train ? det.train_split : det.val_split,
                        .on_corrupt = on_corrupt,
                        .limits = image_limits(cfg)}));
  });
}

// classes.txt of the first training root when there is one, else `fallback`.
std::vector<std::string> voc_layout_classes(const Config& cfg, const DetConfig& det,
                                            std::vector<std::string> fallback) {
  fs::path dir = cfg.settings().data.data_dir;
  if (!det.train_roots.empty()) dir /= det.train_roots.front();
  std::error_code ec;
  if (!fs::exists(dir / "classes.txt", ec)) return fallback;
  return data::read_class_names((dir / "classes.txt").string());
}

std::vector<DatasetInfo> det_datasets() {
  DatasetInfo voc{.name = "voc",
                  .description =
                      "Pascal VOC's layout under data.data_dir (Annotations/, "
                      "JPEGImages/, ImageSets/Main/<split>.txt)",
                  .required = {"data.data_dir"}};
  voc.source =
      DetSource{.read =
                    [](const Config& cfg, const DetConfig& det, bool train, data::OnCorrupt oc) {
                      return read_voc_layout(cfg, det, cfg.settings().data.data_dir, train,
                                             train ? "data.train_split" : "data.val_split", oc);
                    },
                .classes =
                    [](const Config& cfg, const DetConfig& det) {
                      return voc_layout_classes(cfg, det, data::voc_classes());
                    }};
  DatasetInfo coco = coco_dataset("instances");
  coco.source = DetSource{
      .read =
          [](const Config& cfg, const DetConfig& det, bool train, data::OnCorrupt oc) {
            return for_key(cfg, train ? "data.train_ann" : "data.val_ann", [&] {
              return std::make_shared<const data::DetDataset>(data::read_coco(
                  {.annotation_file = train ? det.coco.train_ann : det.coco.val_ann,
                   .image_dir = train ? det.coco.train_images : det.coco.val_images,
                   .empty_images = train ? data::EmptyImages::skip : data::EmptyImages::keep,
                   .on_corrupt = oc,
                   .limits = image_limits(cfg)}));
            });
          },
      .coco = true};
  DatasetInfo scenes{.name = "scenes",
                     .description =
                         "generated scenes of Fashion-MNIST items with exact boxes "
                         "(scenes.*), made in data.data_dir when missing"};
  scenes.source =
      DetSource{.read =
                    [](const Config& cfg, const DetConfig& det, bool train, data::OnCorrupt oc) {
                      return read_voc_layout(cfg, det, ensure_scenes(cfg, det.scenes), train,
                                             "data.data_dir", oc);
                    },
                .classes =
                    [](const Config& cfg, const DetConfig& det) {
                      return voc_layout_classes(cfg, det, data::fashion_mnist_classes());
                    }};
  return {voc, coco, scenes};
}

}  // namespace

TaskInfo det_task_info() {
  return task_info_for<DetTask>("det", "object detection (SSD)", det_datasets(), det_keys(),
                                parse_det_config);
}

}  // namespace tcv::train
