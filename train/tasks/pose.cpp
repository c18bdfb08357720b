#include "train/tasks/pose.h"

#include <algorithm>
#include <any>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <tuple>
#include <unordered_map>

#include "data/dataset.h"
#include "data/draw.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/pose/coco.h"
#include "data/pose/loader.h"
#include "data/pose/skeleton.h"
#include "data/pose/targets.h"
#include "data/pose/transforms.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "models/pose/openpose.h"
#include "models/pose/parse.h"
#include "train/data_setup.h"
#include "train/eval/coco_results.h"
#include "train/eval/keypoint_ap.h"
#include "train/metrics.h"
#include "train/report.h"
#include "train/tasks/common.h"
#include "train/tasks/scenes.h"

namespace tcv::train {

namespace {

namespace fs = std::filesystem;
namespace mpose = models::pose;
using namespace key_types;

// OpenPose's stage count is at most six: an initial and five refinement stages.
constexpr int64_t kMaxStages = 6;

std::string weight_key(const char* branch, int64_t stage) {
  return std::string("loss.loss_weights.openpose_loss.") + branch + "_loss" + std::to_string(stage);
}

std::vector<KeySpec> pose_keys() {
  std::vector<KeySpec> keys = {
      shared_key("train.aug_trans.random_hflip.ratio"),
      shared_key("train.aug_trans.random_resize.scale_range"),
      {"train.aug_trans.random_resize.aspect_range", VT::float_array, Doubles{0.9, 1.1},
       "pose: width/height stretch a, the width scaled by sqrt(a), the height by 1/sqrt(a)"},
      {"train.aug_trans.random_resize.method", VT::string, std::string("focus"),
       "pose: focus (the largest person's box fills 0.6 of the crop, times the random scale, "
       "TorchCV's) | random (the random scale alone)"},
      {"train.aug_trans.random_rotate.ratio", VT::floating, 0.5, "pose: rotation probability"},
      {"train.aug_trans.random_rotate.max_degree", VT::floating, 40.0,
       "pose: rotation angle, uniform in [-max, max] degrees"},
      {"train.aug_trans.random_focus_crop.crop_size", VT::int_array, Ints{368, 368},
       "pose: [s, s] training crop around the largest person, padded with the mean colour"},
      {"train.aug_trans.random_focus_crop.center_jitter", VT::integer, int64_t{20},
       "pose: the crop centre moves by up to this many pixels per axis"},
      {"target.heatmap.sigma", VT::floating, 7.0,
       "pose: keypoint Gaussian standard deviation in input pixels"},
      {"target.paf.theta", VT::floating, 1.0,
       "pose: part-affinity-field half-width in output cells"},
      {"test.input_size", VT::int_array, Ints{368, 368},
       "pose: [s, s] validation images are resized to (ss_test), the base height of the scales "
       "(ms_test) and of tcv-predict"},
      shared_key("test.mode"),
      shared_key("test.scale_search"),
      shared_key("network.stride"),
      {"network.init", VT::string, std::string("torchcv"),
       "pose: torchcv (the backbone kaiming_normal_ as torchvision's VGG, the stages "
       "normal_(0, 0.01), TorchCV's) | pytorch (the layers' PyTorch defaults)"},
      {"res.part_threshold", VT::floating, 0.1,
       "pose: a heatmap peak counts from this (smoothed) value"},
      {"res.limb_threshold", VT::floating, 0.05, "pose: a PAF sample supports a limb above this"},
      {"res.mid_point_num", VT::integer, int64_t{10}, "pose: PAF samples along a candidate limb"},
      {"res.limb_pos_ratio", VT::floating, 0.8,
       "pose: a limb needs more than this share of its samples above limb_threshold"},
      {"res.num_threshold", VT::integer, int64_t{3}, "pose: a person needs this many keypoints"},
      {"res.avg_threshold", VT::floating, 0.2, "pose: ... and at least this score per keypoint"},
      {"res.vis_stick_width", VT::floating, 4.0, "pose: limb width in drawn pictures (pixels)"},
      {"res.vis_circle_radius", VT::floating, 4.0, "pose: keypoint radius in drawn pictures"},
  };
  for (int64_t s = 0; s < kMaxStages; ++s) {
    keys.push_back({weight_key("paf", s), VT::floating, 1.0,
                    "pose: weight of stage " + std::to_string(s) +
                        "'s PAF loss (1 for a stage the model lacks)"});
    keys.push_back({weight_key("heatmap", s), VT::floating, 1.0,
                    "pose: weight of stage " + std::to_string(s) + "'s heatmap loss"});
  }
  for (auto& k : coco_file_keys()) keys.push_back(k);
  for (auto& k : scene_keys()) keys.push_back(k);
  for (auto& k : people_scene_keys()) keys.push_back(k);
  return keys;
}

struct DrawStyle {
  double stick_width = 4, circle_radius = 4;
};

// pose's own keys (and the shared ones it reads its own way), parsed and checked.
struct PoseConfig {
  CocoFiles coco;
  SceneConfig scenes;
  data::PoseAugmentOptions aug;
  data::PoseTargetOptions targets;
  int64_t test_side = 368;  // test.input_size
  std::string test_mode;
  Doubles scales;  // ms_test: test.scale_search; ss_test: {1}
  mpose::PoseInit init = mpose::PoseInit::torchcv;
  mpose::PoseParseOptions parse;
  DrawStyle style;
  std::array<double, kMaxStages> paf_weight{}, heatmap_weight{};
};

// A square size [s, s] with s >= 32 and s a multiple of 8: s.
int64_t square_side(const Config& c, const std::string& key) {
  return parse_size(
      c, key, [](int64_t h, int64_t w) { return h == w && h >= 32 && h % 8 == 0; },
      "[s, s] with s >= 32 a multiple of 8 (OpenPose's stride)")[0];
}

// Where a split's keypoint file and images are, and the key errors name.
struct PoseFiles {
  std::string annotation, images, key;
};

// What data.dataset chooses: the files of a split (every pose data set is a
// COCO keypoints file with its images).
struct PoseSource {
  std::function<PoseFiles(const Config& cfg, const PoseConfig& pose, bool train)> files;
  /// Its files come from the config (data.train_ann, ... are required).
  bool coco = false;
};

PoseConfig parse_pose_config(const Config& c) {
  const ConfigChecks check(c);
  PoseConfig o;
  check_dataset(c);
  o.coco = parse_coco_files(c, dataset_source<PoseSource>(c).coco);
  o.scenes = parse_scene_config(c, SceneKind::people);
  data::PoseAugmentOptions& aug = o.aug;
  check.probability("train.aug_trans.random_hflip.ratio");
  aug.flip_p = c.get_double("train.aug_trans.random_hflip.ratio");
  check.range_pair("train.aug_trans.random_resize.scale_range", 1e-3, 1e3);
  const auto scale = c.get_doubles("train.aug_trans.random_resize.scale_range");
  aug.scale_range = {scale[0], scale[1]};
  check.range_pair("train.aug_trans.random_resize.aspect_range", 1e-2, 1e2);
  const auto aspect = c.get_doubles("train.aug_trans.random_resize.aspect_range");
  aug.aspect_range = {aspect[0], aspect[1]};
  check.choice("train.aug_trans.random_resize.method", {"focus", "random"});
  aug.focus = c.get_string("train.aug_trans.random_resize.method") == "focus" ? 0.6 : 0.0;
  check.probability("train.aug_trans.random_rotate.ratio");
  aug.rotate_p = c.get_double("train.aug_trans.random_rotate.ratio");
  aug.max_degrees = c.get_double("train.aug_trans.random_rotate.max_degree");
  if (const double d = aug.max_degrees; !(d >= 0 && d <= 180))
    check.fail("train.aug_trans.random_rotate.max_degree",
               "must be in [0, 180], got " + format_double(d));
  aug.size = square_side(c, "train.aug_trans.random_focus_crop.crop_size");
  check.at_least("train.aug_trans.random_focus_crop.center_jitter", 0);
  aug.centre_jitter = c.get_int("train.aug_trans.random_focus_crop.center_jitter");
  check.positive("target.heatmap.sigma");
  check.positive("target.paf.theta");
  o.targets.sigma = c.get_double("target.heatmap.sigma");
  o.targets.limb_width = c.get_double("target.paf.theta");
  o.test_side = square_side(c, "test.input_size");
  check.choice("test.mode", {"ss_test", "ms_test"});
  o.test_mode = c.get_string("test.mode");
  const auto scales = c.get_doubles("test.scale_search");
  if (scales.empty()) check.fail("test.scale_search", "must not be empty");
  for (double v : scales)
    if (!(v > 0 && v <= 8)) check.fail("test.scale_search", "scales must be in (0, 8]");
  o.scales = o.test_mode == "ms_test" ? scales : Doubles{1.0};
  o.targets.stride = c.get_int("network.stride");
  if (o.targets.stride != 8)
    check.fail("network.stride",
               "OpenPose's output stride is 8, got " + std::to_string(o.targets.stride));
  check.choice("network.init", {"torchcv", "pytorch"});
  o.init = c.get_string("network.init") == "pytorch" ? mpose::PoseInit::pytorch_default
                                                     : mpose::PoseInit::torchcv;
  check.in_unit("res.part_threshold");
  check.non_negative("res.limb_threshold");
  check.at_least("res.mid_point_num", 1);
  check.probability("res.limb_pos_ratio");
  check.at_least("res.num_threshold", 1);
  check.non_negative("res.avg_threshold");
  check.positive("res.vis_stick_width");
  check.positive("res.vis_circle_radius");
  o.parse.part_threshold = c.get_double("res.part_threshold");
  o.parse.limb_threshold = c.get_double("res.limb_threshold");
  o.parse.mid_points = c.get_int("res.mid_point_num");
  o.parse.limb_pos_ratio = c.get_double("res.limb_pos_ratio");
  o.parse.min_parts = c.get_int("res.num_threshold");
  o.parse.min_mean_score = c.get_double("res.avg_threshold");
  o.style = {c.get_double("res.vis_stick_width"), c.get_double("res.vis_circle_radius")};
  for (int64_t s = 0; s < kMaxStages; ++s) {
    check.non_negative(weight_key("paf", s));
    check.non_negative(weight_key("heatmap", s));
    o.paf_weight[static_cast<size_t>(s)] = c.get_double(weight_key("paf", s));
    o.heatmap_weight[static_cast<size_t>(s)] = c.get_double(weight_key("heatmap", s));
  }
  check_three_channel_normalize(c, "pose");
  aug.fill = mean_color(normalize_of(c));
  return o;
}

// ---- settings read from the config --------------------------------------------------

mpose::OpenPose& openpose_of(nn::Module& m) {
  return dynamic_cast<mpose::OpenPose&>(m);
}

// The parser follows the one skeleton table, the data pipeline's.
const mpose::PoseSkeleton& openpose_skeleton() {
  static const mpose::PoseSkeleton s{data::kOpenposeKeypoints, data::openpose_limbs(),
                                     data::openpose_limb_order(), data::coco_to_openpose()};
  return s;
}

// Inference on one normalised image (1, 3, H, W) as tcv-predict and ms_test
// run it: at test.input_size's height (keeping the aspect), or averaged over
// test.scale_search times it.
mpose::PoseMaps image_maps(const PoseConfig& pose, mpose::OpenPose& net, const Tensor& x) {
  mpose::MultiScaleOptions o;
  o.base_height = pose.test_side;
  o.scales = pose.scales;
  return mpose::infer_maps(net, x, o);
}

// A keypoint in pixel-index coordinates (COCO's: a keypoint on pixel c has x = c).
struct Point {
  double x = 0, y = 0;
  bool found = false;
};
using Skeleton = std::array<Point, data::kOpenposeKeypoints>;

// A person of the parser in (sx, sy)-scaled pixel-index coordinates: the maps'
// pixel c (continuous c + 0.5) lands on continuous (c + 0.5) s.
Skeleton skeleton_of(const mpose::PersonPose& p, double sx, double sy) {
  Skeleton s;
  for (size_t k = 0; k < s.size(); ++k) {
    const auto& q = p.keypoints[k];
    if (q.found) s[k] = {(q.x + 0.5) * sx - 0.5, (q.y + 0.5) * sy - 0.5, true};
  }
  return s;
}

// Ground truth (17, 3) rows (x, y, v) in continuous coordinates as a skeleton.
Skeleton skeleton_of_truth(const float* kp) {
  data::PosePerson p;
  for (int64_t k = 0; k < data::kCocoKeypoints; ++k)
    p.keypoints[static_cast<size_t>(k)] = {kp[3 * k], kp[3 * k + 1],
                                           static_cast<int>(kp[3 * k + 2])};
  const auto op = data::openpose_keypoints(p);
  Skeleton s;
  for (size_t k = 0; k < s.size(); ++k)
    if (op[k].labelled()) s[k] = {op[k].x - 0.5, op[k].y - 0.5, true};
  return s;
}

// COCO's 17 keypoints (x, y, 1) of a skeleton, (0, 0, 0) where missing.
std::vector<double> coco_keypoints(const Skeleton& s) {
  std::vector<double> out;
  out.reserve(3 * data::kCocoKeypoints);
  for (const int o : data::coco_to_openpose()) {
    const Point& p = s[static_cast<size_t>(o)];
    if (p.found)
      out.insert(out.end(), {p.x, p.y, 1.0});
    else
      out.insert(out.end(), {0.0, 0.0, 0.0});
  }
  return out;
}

// OpenPose's colours (TorchCV's details.color_list), one per limb and keypoint.
data::Rgb pose_color(size_t i) {
  static const std::array<data::Rgb, 20> colors = {
      {{255, 0, 0},   {255, 85, 0},  {255, 170, 0}, {255, 255, 0}, {170, 255, 0},
       {85, 255, 0},  {0, 255, 0},   {0, 255, 85},  {0, 255, 170}, {0, 255, 255},
       {0, 170, 255}, {0, 85, 255},  {0, 0, 255},   {85, 0, 255},  {170, 0, 255},
       {255, 0, 255}, {255, 0, 170}, {255, 0, 85},  {255, 0, 170}, {255, 0, 85}}};
  return colors[i % colors.size()];
}

// Draws people as OpenPose does: each limb in its colour (blended 0.6 over
// the image), then each keypoint as a dot in its colour.
void draw_skeletons(Tensor& image, const std::vector<Skeleton>& people, const DrawStyle& st) {
  const auto& limbs = data::openpose_limbs();
  for (const Skeleton& s : people)
    for (size_t l = 0; l < limbs.size(); ++l) {
      const Point& a = s[static_cast<size_t>(limbs[l][0])];
      const Point& b = s[static_cast<size_t>(limbs[l][1])];
      if (a.found && b.found)
        data::draw_line(image, a.x + 0.5, a.y + 0.5, b.x + 0.5, b.y + 0.5, pose_color(l),
                        st.stick_width, 0.6);
    }
  for (const Skeleton& s : people)
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k].found)
        data::draw_disc(image, s[k].x + 0.5, s[k].y + 0.5, st.circle_radius, pose_color(k));
}

// ---- data --------------------------------------------------------------------------

using PoseLoader = TaskLoaderOf<data::PoseDataset, data::PoseDataLoader, data::PoseBatch>;

// The ground truth of the evaluation: every annotation of each val image
// (crowds and people not trained on included), in COCO's pixel-index
// coordinates, by image id.
using TruthMap = std::unordered_map<int64_t, std::vector<KeypointTruth>>;

TruthMap read_truth(const std::string& file) {
  const data::CocoKeypointFile f = data::parse_coco_keypoints(data::read_maybe_gzip(file), file);
  TruthMap truth;
  for (const auto& im : f.images) truth[im.id];
  for (const data::CocoPersonAnnotation& a : f.annotations) {
    KeypointTruth t;
    t.keypoints.reserve(3 * data::kCocoKeypoints);
    for (const data::Keypoint& k : a.keypoints)
      t.keypoints.insert(t.keypoints.end(),
                         {k.labelled() ? k.x - 0.5 : 0.0, k.labelled() ? k.y - 0.5 : 0.0,
                          static_cast<double>(k.v)});
    t.num_keypoints = a.num_keypoints;
    t.bbox = a.bbox;
    t.area = a.area;
    t.crowd = a.iscrowd;
    truth[a.image_id].push_back(std::move(t));
  }
  return truth;
}

// ---- evaluation ----------------------------------------------------------------------

const char* const kStatNames[10] = {"ap", "ap50", "ap75", "ap_medium", "ap_large",
                                    "ar", "ar50", "ar75", "ar_medium", "ar_large"};

class PoseEvaluator final : public TaskEvaluator {
 public:
  // This process is rank `rank` of `world`: the val loader's sampler pads the
  // last ranks' shares with the first images, which the AP takes once (by
  // image id) and the loss on the rank that owns them (index mod world).
  PoseEvaluator(const Config& cfg, const PoseConfig& pose, const data::PoseDataset& val,
                std::shared_ptr<const TruthMap> truth, mpose::OpenPoseLossOptions loss_opts,
                int64_t rank, int64_t world)
      : TaskEvaluator("pose evaluator", rank, world, "Validation skeletons"),
        pose_(pose),
        val_(val),
        truth_(std::move(truth)),
        loss_opts_(std::move(loss_opts)),
        side_(pose.test_side),
        parse_(pose.parse),
        norm_(normalize_of(cfg)),
        style_(pose.style) {}

  void add(nn::Module& model, const TaskBatch& batch, Device device) override {
    const data::PoseBatch& b = batch_of<data::PoseBatch>(batch);
    mpose::OpenPose& net = openpose_of(model);
    const mpose::PoseOutput o = net.forward_stages(b.images.to(device));
    add_owned_loss(mpose::openpose_loss(o, b.pafs.to(device), b.heatmaps.to(device),
                                        b.masks.to(device), loss_opts_)
                       .total,
                   b.indices);
    const bool ms = pose_.test_mode == "ms_test";
    Tensor heat, paf;
    if (!ms) {  // the last stage's maps at the input's size
      const int64_t H = b.images.size(2), W = b.images.size(3);
      const ops::UpsampleOptions up{.mode = ops::InterpMode::bilinear};
      heat = ops::upsample(o.heatmaps.back(), {H, W}, up);
      paf = ops::upsample(o.pafs.back(), {H, W}, up);
    }
    for (int64_t i = 0; i < b.size(); ++i) {
      const auto idx = static_cast<size_t>(i);
      const auto [h0, w0] = b.sizes[idx];
      std::vector<mpose::PersonPose> people;
      double sx = 1, sy = 1;
      if (ms) {  // the image as read, at each scale
        const data::PoseSample s = val_.load(b.indices[idx]);
        const mpose::PoseMaps m =
            image_maps(pose_, net, normalized_image(s.image, norm_).to(device));
        people = mpose::parse_poses(m.heatmaps, m.pafs, openpose_skeleton(), parse_);
      } else {
        people =
            mpose::parse_poses(heat.select(0, i), paf.select(0, i), openpose_skeleton(), parse_);
        sx = static_cast<double>(w0) / static_cast<double>(b.images.size(3));
        sy = static_cast<double>(h0) / static_cast<double>(b.images.size(2));
      }
      std::vector<KeypointDetection> dets;
      std::vector<Skeleton> found;
      for (const auto& p : people) {
        if (std::isnan(p.score)) continue;  // a diverged model's person: found nothing
        found.push_back(skeleton_of(p, sx, sy));
        dets.push_back({coco_keypoints(found.back()), p.score});
      }
      if (owned(b.indices[idx])) people_ += static_cast<int64_t>(dets.size());
      const int64_t id = b.image_ids[idx];
      const auto t = truth_->find(id);
      static const std::vector<KeypointTruth> none;
      eval_.add(id, t == truth_->end() ? none : t->second, dets);
      if (wants_figure()) add_figure(b, i, found);
    }
  }

  Metrics finish() const override { return eval_.finish(); }

  // The people of a COCO keypoint results file against every val image's
  // ground truth (pycocotools' loadRes + COCOeval "keypoints"): category 1
  // (person) only, keypoints in COCO's coordinates as the file gives them.
  void add_results(const std::string& file) {
    mark_from_results();
    std::unordered_map<int64_t, std::vector<KeypointDetection>> by_image;
    for (const data::PoseRecord& r : val_.records()) by_image[r.image_id];
    const auto results =
        parse_coco_keypoint_results(data::read_maybe_gzip(file), file, data::kCocoKeypoints);
    for (size_t i = 0; i < results.size(); ++i) {
      const CocoKeypointResult& r = results[i];
      const std::string what = file + ": detection " + std::to_string(i);
      const auto it = by_image.find(r.image_id);
      TCV_CHECK(it != by_image.end(), what, ": image id ", r.image_id,
                " is not among the ground truth's ", by_image.size(), " images");
      TCV_CHECK(r.category_id == 1, what, ": category id ", r.category_id,
                " is not the person category (1)");
      it->second.push_back({r.keypoints, r.score});
      ++people_;
    }
    static const std::vector<KeypointTruth> none;
    for (const data::PoseRecord& r : val_.records()) {
      const auto t = truth_->find(r.image_id);
      eval_.add(r.image_id, t == truth_->end() ? none : t->second, by_image[r.image_id]);
    }
  }

  std::vector<std::pair<std::string, std::string>> results_files() const override {
    return {{"keypoints.json", format_coco_keypoint_results(eval_.detections())}};
  }

  std::string describe(const Value& row) const override {
    return row_words(row, {"ap", "ap50", "ar"}, pose_.test_mode);
  }

 private:
  void reset_metric() override {
    eval_.reset();
    people_ = 0;
  }

  void write_metric(ByteWriter& w) const override {
    w.put<int64_t>(people_);
    w.put_string(eval_.serialize());
  }

  void read_metric(ByteReader& r) override {
    const auto people = r.get<int64_t>();
    TCV_CHECK(people >= 0, "pose evaluator: malformed state");
    people_ += people;
    eval_.merge(r.get_string());
  }

  void fill_row(Value& metrics, Value& details) const override {
    const KeypointSummary s = eval_.coco();
    for (size_t k = 0; k < s.stats.size(); ++k)
      metrics[kStatNames[k]] =
          s.stats[k] < 0 ? Value() : Value(s.stats[k]);  // null: no ground truth
    // AP 0 when nothing had ground truth, so that `best` compares numbers.
    if (!metrics["ap"].is_number()) metrics["ap"] = 0.0;
    details["people"] = people_;
  }

  int64_t images() const override { return eval_.images(); }

  void report_metric(ReportInputs& report) const override {
    report.headline = {{"ap", "keypoint AP (OKS .50:.95, " + pose_.test_mode + ")", ""},
                       {"ap50", "AP50", ""},
                       {"ar", "AR", ""}};
    report.val_charts = {
        {"validation keypoint AP", {{"ap", "AP"}, {"ap50", "AP50"}, {"ap75", "AP75"}}},
        {"validation keypoint AR", {{"ar", "AR"}, {"ar50", "AR50"}, {"ar75", "AR75"}}}};
  }

  // The val image as the network saw it, predicted people (in its pixels) and
  // the ground truth drawn side by side.
  void add_figure(const data::PoseBatch& b, int64_t i, const std::vector<Skeleton>& found) {
    const auto idx = static_cast<size_t>(i);
    const int64_t H = b.images.size(2), W = b.images.size(3);
    Tensor pred = denormalized_image(b.images, i, {H, W}, norm_), truth = pred.clone();
    const auto [h0, w0] = b.sizes[idx];
    const double fx = static_cast<double>(W) / static_cast<double>(w0);
    const double fy = static_cast<double>(H) / static_cast<double>(h0);
    std::vector<Skeleton> p;
    for (const Skeleton& s : found) {
      Skeleton q;
      for (size_t k = 0; k < s.size(); ++k)
        if (s[k].found) q[k] = {(s[k].x + 0.5) * fx - 0.5, (s[k].y + 0.5) * fy - 0.5, true};
      p.push_back(q);
    }
    draw_skeletons(pred, p, style_);
    const Tensor kp = b.keypoints[idx].contiguous();  // (n, 17, 3), input pixels
    std::vector<Skeleton> t;
    for (int64_t n = 0; n < kp.size(0); ++n)
      t.push_back(skeleton_of_truth(kp.data<float>() + n * 3 * data::kCocoKeypoints));
    draw_skeletons(truth, t, style_);
    ReportFigure f;
    f.pictures = {picture_of(pred), picture_of(truth)};
    f.labels = {"prediction", "ground truth"};
    f.caption = val_.record(b.indices[idx]).image_path + ": " + std::to_string(p.size()) +
                " people found, " + std::to_string(t.size()) + " annotated";
    keep_figure(std::move(f));
  }

  const PoseConfig& pose_;
  const data::PoseDataset& val_;
  std::shared_ptr<const TruthMap> truth_;
  mpose::OpenPoseLossOptions loss_opts_;
  int64_t side_;
  mpose::PoseParseOptions parse_;
  data::Normalize norm_;
  DrawStyle style_;
  KeypointEvaluator eval_;
  int64_t people_ = 0;  // people found in the images this rank owns
};

// ---- prediction ----------------------------------------------------------------------

class PosePredictor final : public RgbPredictor {
 public:
  PosePredictor(const Config& cfg, const PoseConfig& pose, std::shared_ptr<mpose::OpenPose> model,
                std::string stem, const PredictOptions& opts)
      : RgbPredictor(std::move(stem), opts.out_dir),
        pose_(pose),
        model_(std::move(model)),
        parse_(pose.parse),
        norm_(normalize_of(cfg)),
        style_(pose.style) {}

  Value predict(const Tensor& image, const std::string& name, int64_t) override {
    NoGradGuard no_grad;
    const mpose::PoseMaps m = image_maps(pose_, *model_, normalized_image(image, norm_));
    const auto people = mpose::parse_poses(m.heatmaps, m.pafs, openpose_skeleton(), parse_);
    // COCO's results format; the image id is the file name's number (COCO's and
    // the scenes' names), left out for other names.
    const std::string stem = fs::path(name).stem().string();
    const bool numeric =
        !stem.empty() && stem.size() < 18 &&
        std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; });
    std::vector<Skeleton> found;
    Value list = Value::array();
    for (const auto& p : people) {
      found.push_back(skeleton_of(p, 1.0, 1.0));
      Value kp = Value::array();
      for (double v : coco_keypoints(found.back())) kp.push_back(std::round(v * 100) / 100);
      Value j = Value::object();
      if (numeric) j["image_id"] = std::stoll(stem);
      j["category_id"] = 1;
      j["keypoints"] = std::move(kp);
      j["score"] = p.score;
      j["num_keypoints"] = p.parts;
      list.push_back(std::move(j));
    }
    Value j = Value::object();
    j["height"] = image.size(1);
    j["width"] = image.size(2);
    j["people"] = std::move(list);
    if (const std::string file = picture_path(name, "_pose.png"); !file.empty()) {
      Tensor pic = image.contiguous().clone();
      draw_skeletons(pic, found, style_);
      data::write_image(file, pic);
      j["picture"] = file;
    }
    return j;
  }

  void print(std::ostream& os, const std::string& name, const Value& entry) const override {
    const Value& list = entry.at("people");
    os << name << ": " << list.size() << (list.size() == 1 ? " person" : " people") << " ("
       << pose_.test_mode << ")";
    if (const Value* p = entry.find("picture")) os << ", drawn in " << p->as_string();
    os << "\n";
    const auto& names = data::coco_keypoint_names();
    for (size_t k = 0; k < list.size(); ++k) {
      const Value& d = list[k];
      char buf[96];
      std::snprintf(buf, sizeof(buf), "  %zu. score %.3f, %lld keypoints:", k + 1,
                    d.at("score").as_double(),
                    static_cast<long long>(d.at("num_keypoints").as_int()));
      os << buf;
      const Value& kp = d.at("keypoints");
      for (size_t c = 0; c < names.size(); ++c) {
        if (kp[3 * c + 2].as_double() <= 0) continue;
        std::snprintf(buf, sizeof(buf), " %s (%.1f, %.1f)", names[c].c_str(), kp[3 * c].as_double(),
                      kp[3 * c + 1].as_double());
        os << buf;
      }
      os << "\n";
    }
  }

 private:
  PoseConfig pose_;
  std::shared_ptr<mpose::OpenPose> model_;
  mpose::PoseParseOptions parse_;
  data::Normalize norm_;
  DrawStyle style_;
};

// ---- the task --------------------------------------------------------------------------

class PoseTask final : public Task {
 public:
  explicit PoseTask(const Config& cfg) : cfg_(cfg), pose_(parse_pose_config(cfg)) {}

  TaskData make_data(int64_t rank, int64_t world) override {
    rank_ = rank;
    world_ = world;
    const Settings& st = cfg_.settings();
    std::shared_ptr<const data::PoseDataset> train, val;
    std::tie(train, val) = read_splits<data::PoseDataset>(
        st, [&](bool train_split, data::OnCorrupt oc) { return read(train_split, oc); });
    const PoseFiles files = dataset_source<PoseSource>(cfg_).files(cfg_, pose_, false);
    truth_ = std::make_shared<const TruthMap>(
        for_key(cfg_, files.key, [&] { return read_truth(files.annotation); }));
    const data::PoseAugmentOptions& aug = pose_.aug;
    const data::PoseTargetOptions& targets = pose_.targets;
    const auto [to, vo] = split_loader_options(cfg_, world, rank);
    int64_t people = 0;
    for (const auto& r : train->records()) people += static_cast<int64_t>(r.people.size());
    TaskData d;
    d.summary = std::to_string(train->size()) + " train / " + std::to_string(val->size()) +
                " val images (" + st.data.dataset + ", " + std::to_string(people) +
                " training people, crops " + std::to_string(aug.size) + "x" +
                std::to_string(aug.size) + ", val " + std::to_string(pose_.test_side) + "x" +
                std::to_string(pose_.test_side) + ")";
    d.train = std::make_unique<PoseLoader>(train, data::pose_train_transform(aug), targets, to);
    auto v =
        std::make_unique<PoseLoader>(val, data::pose_eval_transform(pose_.test_side), targets, vo);
    val_ = v.get();
    d.val = std::move(v);
    return d;
  }

  std::shared_ptr<nn::Module> make_model() override {
    const std::string& name = cfg_.settings().network.model_name;
    const mpose::OpenPoseOptions o{.init = pose_.init};
    auto model = create_task_model<mpose::OpenPose>(cfg_, "pose", o);
    const auto stages = static_cast<int64_t>(model->stages.size());
    for (int64_t s = stages; s < kMaxStages; ++s)
      for (const char* branch : {"paf", "heatmap"})
        if ((branch[0] == 'p' ? pose_.paf_weight : pose_.heatmap_weight)[static_cast<size_t>(s)] !=
            1.0)  // the default: no stage to weigh
          throw ConfigError(at_key(cfg_, weight_key(branch, s)) + ": " + name + " has " +
                            std::to_string(stages) + " stages (0.." + std::to_string(stages - 1) +
                            "); this weight has no stage");
    loss_opts_ = {};
    for (int64_t s = 0; s < stages; ++s) {
      loss_opts_.paf_weights.push_back(pose_.paf_weight[static_cast<size_t>(s)]);
      loss_opts_.heatmap_weights.push_back(pose_.heatmap_weight[static_cast<size_t>(s)]);
    }
    return model;
  }

  Tensor loss(StepModel& model, const TaskBatch& batch, const StepContext& ctx) override {
    const data::PoseBatch& b = batch_of<data::PoseBatch>(batch);
    const Tensor x = b.images.to(ctx.device);  // (B, 3, S, S)
    const std::vector<Tensor> out = model.forward_with([&](nn::Module& m) {
      const mpose::PoseOutput o = openpose_of(m).forward_stages(x);
      std::vector<Tensor> v = o.pafs;
      v.insert(v.end(), o.heatmaps.begin(), o.heatmaps.end());
      return v;
    });
    const size_t stages = out.size() / 2;
    mpose::PoseOutput o;
    for (size_t s = 0; s < stages; ++s) {
      o.pafs.push_back(autocast::to_f32(out[s]));
      o.heatmaps.push_back(autocast::to_f32(out[stages + s]));
    }
    // TorchCV's sum over cells divided by the batch: with equal batches on every
    // rank, the averaged gradients are those of the global batch.
    const Tensor total = mpose::openpose_loss(o, b.pafs.to(ctx.device), b.heatmaps.to(ctx.device),
                                              b.masks.to(ctx.device), loss_opts_)
                             .total;
    return ctx.global_normalized(total, static_cast<double>(b.size()), 1.0);
  }

  std::unique_ptr<TaskEvaluator> make_evaluator() override {
    TCV_CHECK(val_, "[pose] make_evaluator before make_data");
    return std::make_unique<PoseEvaluator>(cfg_, pose_, val_->dataset(), truth_, loss_opts_, rank_,
                                           world_);
  }

  std::unique_ptr<TaskEvaluator> evaluate_results(const std::string& file) override {
    TCV_CHECK(val_, "[pose] evaluate_results before make_data");
    return results_evaluator<PoseEvaluator>(file, cfg_, pose_, val_->dataset(), truth_, loss_opts_);
  }

  std::string best_metric() const override { return "ap"; }

  std::unique_ptr<TaskPredictor> make_predictor(const std::string& checkpoint,
                                                const PredictOptions& opts) override {
    auto [model, stem] = model_for_prediction<mpose::OpenPose>(*this, cfg_, checkpoint);
    return std::make_unique<PosePredictor>(cfg_, pose_, model, stem, opts);
  }

 private:
  std::shared_ptr<const data::PoseDataset> read(bool train, data::OnCorrupt on_corrupt) const {
    const PoseFiles files = dataset_source<PoseSource>(cfg_).files(cfg_, pose_, train);
    return for_key(cfg_, files.key, [&] {
      return std::make_shared<const data::PoseDataset>(data::read_coco_keypoints(
          {.annotation_file = files.annotation,
           .image_dir = files.images,
           .empty_images = train ? data::EmptyImages::skip : data::EmptyImages::keep,
           .on_corrupt = on_corrupt,
           .limits = image_limits(cfg_)}));
    });
  }

  Config cfg_;
  PoseConfig pose_;
  PoseLoader* val_ = nullptr;
  std::shared_ptr<const TruthMap> truth_;
  mpose::OpenPoseLossOptions loss_opts_;
  int64_t rank_ = 0, world_ = 1;
};

std::vector<DatasetInfo> pose_datasets() {
  DatasetInfo coco = coco_dataset("person keypoints");
  coco.source = PoseSource{
      .files =
          [](const Config&, const PoseConfig& pose, bool train) {
            return PoseFiles{.annotation = train ? pose.coco.train_ann : pose.coco.val_ann,
                             .images = train ? pose.coco.train_images : pose.coco.val_images,
                             .key = train ? "data.train_ann" : "data.val_ann"};
          },
      .coco = true};
  DatasetInfo scenes{.name = "scenes",
                     .description =
                         "generated scenes of stick-figure people with exact "
                         "keypoints (scenes.*), made in data.data_dir when missing"};
  scenes.source = PoseSource{.files = [](const Config& cfg, const PoseConfig& pose, bool train) {
    const fs::path dir = ensure_scenes(cfg, pose.scenes);
    return PoseFiles{
        .annotation = (dir / "annotations" /
                       (train ? "person_keypoints_train.json" : "person_keypoints_val.json"))
                          .string(),
        .images = (fs::path(cfg.settings().data.data_dir) / "images").string(),
        .key = "data.data_dir"};
  }};
  return {coco, scenes};
}

}  // namespace

TaskInfo pose_task_info() {
  return task_info_for<PoseTask>("pose", "multi-person pose estimation (OpenPose)", pose_datasets(),
                                 pose_keys(), parse_pose_config);
}

}  // namespace tcv::train
