#include "train/eval/det_map.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <unordered_set>

namespace tcv::train {

using data::Box;

namespace {

constexpr uint64_t kStateMagic = 0x3276444554564354ull;  // "TCVTDEv2"

// (image position, object index) of one class's objects, in image order.
using Refs = std::vector<std::pair<int32_t, int32_t>>;

/// Calls f on each vector of an image's state, in the order the state is serialized.
template <class Image, class F>
void for_each_field(Image& im, F&& f) {
  f(im.truth.boxes);
  f(im.truth.labels);
  f(im.truth.difficult);
  f(im.truth.iscrowd);
  f(im.truth.area);
  f(im.dets.boxes);
  f(im.dets.scores);
  f(im.dets.areas);
  f(im.dets.labels);
}

}  // namespace

DetMetric parse_det_metric(const std::string& name) {
  if (name == "voc07") return DetMetric::voc07;
  if (name == "voc") return DetMetric::voc;
  if (name == "coco") return DetMetric::coco;
  TCV_THROW("unknown detection metric '", name, "' (known: voc07, voc, coco)");
}

DetectionEvaluator::DetectionEvaluator(DetEvalOptions opts) : opts_(std::move(opts)) {
  TCV_CHECK(!opts_.class_names.empty(), "[DetectionEvaluator] no class names");
  TCV_CHECK(opts_.iou_threshold > 0 && opts_.iou_threshold <= 1,
            "[DetectionEvaluator] iou_threshold must be in (0, 1], got ", opts_.iou_threshold);
}

void DetectionEvaluator::reset() {
  images_.clear();
  ids_.clear();
}

void DetectionEvaluator::insert(Image im) {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), im.id);
  if (it != ids_.end() && *it == im.id) return;
  ids_.insert(it, im.id);
  images_.push_back(std::move(im));
}

void DetectionEvaluator::add(int64_t image_id, const data::DetTarget& truth,
                             const ImageDetections& dets) {
  const auto K = static_cast<int64_t>(opts_.class_names.size());
  const size_t g = truth.boxes.size(), d = dets.boxes.size();
  TCV_CHECK(truth.labels.size() == g && truth.difficult.size() == g && truth.iscrowd.size() == g &&
                truth.area.size() == g,
            "[DetectionEvaluator] image ", image_id, ": ground truth has ", g, " boxes but ",
            truth.labels.size(), " labels, ", truth.difficult.size(), " difficult flags, ",
            truth.iscrowd.size(), " crowd flags and ", truth.area.size(), " areas");
  TCV_CHECK(dets.scores.size() == d && dets.labels.size() == d &&
                (dets.areas.empty() || dets.areas.size() == d),
            "[DetectionEvaluator] image ", image_id, ": ", d, " detection boxes but ",
            dets.scores.size(), " scores, ", dets.labels.size(), " labels and ", dets.areas.size(),
            " areas");
  for (int64_t l : truth.labels)
    TCV_CHECK(l >= 1 && l <= K, "[DetectionEvaluator] image ", image_id, ": ground-truth label ", l,
              " outside [1, ", K, "]");
  for (size_t k = 0; k < d; ++k) {
    TCV_CHECK(dets.labels[k] >= 1 && dets.labels[k] <= K, "[DetectionEvaluator] image ", image_id,
              ": detection label ", dets.labels[k], " outside [1, ", K, "]");
    const Box& b = dets.boxes[k];
    TCV_CHECK(std::isfinite(dets.scores[k]) && std::isfinite(b[0]) && std::isfinite(b[1]) &&
                  std::isfinite(b[2]) && std::isfinite(b[3]),
              "[DetectionEvaluator] image ", image_id, ": detection ", k,
              " has a non-finite box or score");
  }
  Image im{image_id, truth, dets};
  if (im.dets.areas.empty())
    for (const Box& b : dets.boxes) im.dets.areas.push_back((b[2] - b[0]) * (b[3] - b[1]));
  for (size_t k = 0; k < d; ++k)
    TCV_CHECK(!std::isnan(im.dets.areas[k]), "[DetectionEvaluator] image ", image_id,
              ": detection ", k, " has a NaN area");
  insert(std::move(im));
}

void DetectionEvaluator::add(int64_t image_id, const data::DetTarget& truth, const Tensor& boxes,
                             const Tensor& scores, const Tensor& labels, double width,
                             double height) {
  const int64_t n = boxes.defined() ? boxes.size(0) : 0;
  TCV_CHECK(boxes.defined() && boxes.dim() == 2 && boxes.size(1) == 4 && scores.defined() &&
                scores.dim() == 1 && scores.size(0) == n && labels.defined() && labels.dim() == 1 &&
                labels.size(0) == n,
            "[DetectionEvaluator] image ", image_id,
            ": expects boxes (n, 4), scores (n) and labels (n), got ",
            boxes.defined() ? boxes.shape_str() : "undefined", ", ",
            scores.defined() ? scores.shape_str() : "undefined", ", ",
            labels.defined() ? labels.shape_str() : "undefined");
  const std::vector<double> b = boxes.to_vector<double>();
  const std::vector<double> s = scores.to_vector<double>();
  const std::vector<int64_t> l = labels.to_vector<int64_t>();
  ImageDetections d;
  for (int64_t k = 0; k < n; ++k) {
    const auto o = static_cast<size_t>(4 * k);
    const Box box{b[o] * width, b[o + 1] * height, b[o + 2] * width, b[o + 3] * height};
    const double score = s[static_cast<size_t>(k)];
    // A model's detection with inf or NaN in its box or score finds nothing:
    // it is left out, and its object counts as missed.
    if (!std::isfinite(score) || !std::isfinite(box[0]) || !std::isfinite(box[1]) ||
        !std::isfinite(box[2]) || !std::isfinite(box[3]))
      continue;
    d.boxes.push_back(box);
    d.scores.push_back(score);
    d.labels.push_back(l[static_cast<size_t>(k)]);
  }
  add(image_id, truth, d);
}

std::vector<std::pair<int64_t, ImageDetections>> DetectionEvaluator::detections() const {
  std::vector<std::pair<int64_t, ImageDetections>> out;
  for (const Image* im : sorted()) out.push_back({im->id, im->dets});
  return out;
}

std::string DetectionEvaluator::serialize() const {
  ByteWriter w;
  w.put(kStateMagic);
  w.put<uint64_t>(opts_.class_names.size());
  w.put<uint64_t>(images_.size());
  for (const Image& im : images_) {
    w.put(im.id);
    for_each_field(im, [&](const auto& v) { w.put_vector(v); });
  }
  return w.take();
}

void DetectionEvaluator::merge(const std::string& bytes) {
  ByteReader r(bytes, "[DetectionEvaluator::merge]");
  TCV_CHECK(r.get<uint64_t>() == kStateMagic,
            "[DetectionEvaluator::merge] not the state of a DetectionEvaluator");
  const auto K = r.get<uint64_t>();
  TCV_CHECK(K == opts_.class_names.size(), "[DetectionEvaluator::merge] state of ", K,
            " classes, this evaluator has ", opts_.class_names.size());
  const auto n = r.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    Image im;
    im.id = r.get<int64_t>();
    for_each_field(
        im, [&](auto& v) { v = r.get_vector<typename std::decay_t<decltype(v)>::value_type>(); });
    const size_t g = im.truth.boxes.size(), d = im.dets.boxes.size();
    TCV_CHECK(im.truth.labels.size() == g && im.truth.difficult.size() == g &&
                  im.truth.iscrowd.size() == g && im.truth.area.size() == g &&
                  im.dets.scores.size() == d && im.dets.areas.size() == d &&
                  im.dets.labels.size() == d,
              "[DetectionEvaluator::merge] inconsistent state for image ", im.id);
    for (int64_t l : im.truth.labels)
      TCV_CHECK(l >= 1 && l <= static_cast<int64_t>(K), "[DetectionEvaluator::merge] label ", l,
                " out of range");
    for (int64_t l : im.dets.labels)
      TCV_CHECK(l >= 1 && l <= static_cast<int64_t>(K), "[DetectionEvaluator::merge] label ", l,
                " out of range");
    insert(std::move(im));
  }
  TCV_CHECK(r.done(), "[DetectionEvaluator::merge] trailing bytes after the state");
}

std::vector<const DetectionEvaluator::Image*> DetectionEvaluator::sorted() const {
  std::vector<const Image*> v;
  v.reserve(images_.size());
  for (const Image& im : images_) v.push_back(&im);
  std::sort(v.begin(), v.end(), [](const Image* a, const Image* b) { return a->id < b->id; });
  return v;
}

namespace {

// Per class (label k + 1 at k): its ground-truth and detection objects.
template <typename ImagePtr>
void bucket_by_class(const std::vector<ImagePtr>& imgs, size_t K, std::vector<Refs>& gts,
                     std::vector<Refs>& dets) {
  gts.assign(K, {});
  dets.assign(K, {});
  for (size_t i = 0; i < imgs.size(); ++i) {
    const auto& im = *imgs[i];
    for (size_t g = 0; g < im.truth.labels.size(); ++g)
      gts[static_cast<size_t>(im.truth.labels[g] - 1)].emplace_back(static_cast<int32_t>(i),
                                                                    static_cast<int32_t>(g));
    for (size_t d = 0; d < im.dets.labels.size(); ++d)
      dets[static_cast<size_t>(im.dets.labels[d] - 1)].emplace_back(static_cast<int32_t>(i),
                                                                    static_cast<int32_t>(d));
  }
}

// VOC AP from precision and recall (the devkit's VOCap / the 11-point loop).
double voc_ap(const std::vector<double>& rec, const std::vector<double>& prec, bool use_07) {
  if (use_07) {
    double ap = 0;
    for (int k = 0; k <= 10; ++k) {
      const double t = k * 0.1;  // as np.arange(0., 1.1, 0.1)
      double p = 0;
      bool any = false;
      for (size_t i = 0; i < rec.size(); ++i)
        if (rec[i] >= t) {
          p = any ? std::max(p, prec[i]) : prec[i];
          any = true;
        }
      ap += (any ? p : 0.0) / 11.0;
    }
    return ap;
  }
  std::vector<double> mrec(rec.size() + 2), mpre(prec.size() + 2);
  mrec.front() = 0;
  mrec.back() = 1;
  mpre.front() = 0;
  mpre.back() = 0;
  std::copy(rec.begin(), rec.end(), mrec.begin() + 1);
  std::copy(prec.begin(), prec.end(), mpre.begin() + 1);
  for (size_t i = mpre.size() - 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
  double ap = 0;
  for (size_t i = 1; i < mrec.size(); ++i)
    if (mrec[i] != mrec[i - 1]) ap += (mrec[i] - mrec[i - 1]) * mpre[i];
  return ap;
}

}  // namespace

VocSummary DetectionEvaluator::voc(bool use_07_metric, double iou) const {
  const double thr = iou > 0 ? iou : opts_.iou_threshold;
  const auto imgs = sorted();
  const size_t K = opts_.class_names.size();
  std::vector<Refs> gts, dets;
  bucket_by_class(imgs, K, gts, dets);
  VocSummary out;
  out.per_class.assign(K, -1.0);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t c = 0; c < K; ++c) {
    const Refs& G = gts[c];
    int64_t npos = 0;
    for (const auto& [i, g] : G) npos += imgs[static_cast<size_t>(i)]->truth.difficult[g] ? 0 : 1;
    if (npos == 0) continue;
    // This class's ground truth per image: [first[i], first[i + 1]) of G.
    std::vector<int32_t> first(imgs.size() + 1, 0);
    for (const auto& [i, g] : G) ++first[static_cast<size_t>(i) + 1];
    for (size_t i = 0; i < imgs.size(); ++i) first[i + 1] += first[i];
    std::vector<uint8_t> taken(G.size(), 0);
    Refs D = dets[c];
    std::stable_sort(D.begin(), D.end(), [&](const auto& a, const auto& b) {
      return imgs[static_cast<size_t>(a.first)]->dets.scores[static_cast<size_t>(a.second)] >
             imgs[static_cast<size_t>(b.first)]->dets.scores[static_cast<size_t>(b.second)];
    });
    std::vector<double> rec(D.size()), prec(D.size());
    double tp = 0, fp = 0;
    for (size_t k = 0; k < D.size(); ++k) {
      const auto& im = *imgs[static_cast<size_t>(D[k].first)];
      const Box& bb = im.dets.boxes[static_cast<size_t>(D[k].second)];
      const double da = (bb[2] - bb[0]) * (bb[3] - bb[1]);
      double ovmax = -std::numeric_limits<double>::infinity();
      int32_t jmax = -1;
      for (int32_t j = first[static_cast<size_t>(D[k].first)];
           j < first[static_cast<size_t>(D[k].first) + 1]; ++j) {
        const Box& gb = im.truth.boxes[static_cast<size_t>(G[static_cast<size_t>(j)].second)];
        const double iw = std::min(bb[2], gb[2]) - std::max(bb[0], gb[0]);
        const double ih = std::min(bb[3], gb[3]) - std::max(bb[1], gb[1]);
        if (iw > 0 && ih > 0) {
          const double inter = iw * ih;
          const double ov = inter / (da + (gb[2] - gb[0]) * (gb[3] - gb[1]) - inter);
          if (ov > ovmax) {
            ovmax = ov;
            jmax = j;
          }
        }
      }
      if (ovmax >= thr) {
        if (!im.truth.difficult[static_cast<size_t>(G[static_cast<size_t>(jmax)].second)]) {
          if (!taken[static_cast<size_t>(jmax)]) {
            tp += 1;
            taken[static_cast<size_t>(jmax)] = 1;
          } else {
            fp += 1;
          }
        }
      } else {
        fp += 1;
      }
      rec[k] = tp / static_cast<double>(npos);
      prec[k] = tp / std::max(tp + fp, std::numeric_limits<double>::epsilon());
    }
    out.per_class[c] = voc_ap(rec, prec, use_07_metric);
  }
  double sum = 0;
  int64_t n = 0;
  for (double ap : out.per_class)
    if (ap >= 0) {
      sum += ap;
      ++n;
    }
  out.map = n ? sum / static_cast<double>(n) : -1.0;
  return out;
}

namespace {

// iouType "bbox": pycocotools' bbIou on [x, y, w, h] boxes; against a crowd
// region, the intersection over the detection's area.
class BoxIou final : public CocoSimilarity {
 public:
  // Per image: its ground-truth boxes and its detections' boxes.
  using Boxes = std::vector<std::pair<const std::vector<Box>*, const std::vector<Box>*>>;
  explicit BoxIou(Boxes boxes) : boxes_(std::move(boxes)) {}
  void compute(std::span<const CocoTruthRef> truth, std::span<const CocoDetectionRef> dets,
               double* out) const override {
    const size_t ng = truth.size();
    const auto& [gt_boxes, det_boxes] = boxes_[static_cast<size_t>(truth.front().image)];
    for (size_t g = 0; g < ng; ++g) {
      const Box& gb = (*gt_boxes)[static_cast<size_t>(truth[g].index)];
      const double gx = gb[0], gy = gb[1], gw = gb[2] - gb[0], gh = gb[3] - gb[1];
      const double ga = gw * gh;
      for (size_t d = 0; d < dets.size(); ++d) {
        const Box& db = (*det_boxes)[static_cast<size_t>(dets[d].index)];
        const double dx = db[0], dy = db[1], dw = db[2] - db[0], dh = db[3] - db[1];
        const double da = dw * dh;
        const double w = std::min(dw + dx, gw + gx) - std::max(dx, gx);
        if (w <= 0) continue;
        const double h = std::min(dh + dy, gh + gy) - std::max(dy, gy);
        if (h <= 0) continue;
        const double i = w * h;
        out[d * ng + g] = i / (truth[g].crowd ? da : da + ga - i);
      }
    }
  }

 private:
  Boxes boxes_;
};

}  // namespace

CocoSummary DetectionEvaluator::coco() const {
  const auto imgs = sorted();
  const size_t K = opts_.class_names.size();
  std::vector<std::vector<CocoTruthRef>> truth(K);
  std::vector<std::vector<CocoDetectionRef>> dets(K);
  BoxIou::Boxes boxes;
  for (size_t i = 0; i < imgs.size(); ++i) {
    const Image& im = *imgs[i];
    const auto img = static_cast<int32_t>(i);
    boxes.emplace_back(&im.truth.boxes, &im.dets.boxes);
    for (size_t g = 0; g < im.truth.labels.size(); ++g)
      truth[static_cast<size_t>(im.truth.labels[g] - 1)].push_back(
          {img, static_cast<int32_t>(g), im.truth.area[g], im.truth.iscrowd[g] != 0,
           im.truth.iscrowd[g] != 0});
    for (size_t d = 0; d < im.dets.labels.size(); ++d)
      dets[static_cast<size_t>(im.dets.labels[d] - 1)].push_back(
          {img, static_cast<int32_t>(d), im.dets.scores[d], im.dets.areas[d]});
  }
  const CocoAccumulation acc =
      coco_evaluate(truth, dets, CocoEvalParams::boxes(), BoxIou(std::move(boxes)));
  CocoSummary out;
  out.stats = coco_box_stats(acc);
  out.per_class.resize(K);
  for (size_t k = 0; k < K; ++k) out.per_class[k] = acc.ap(-1, 0, 2, static_cast<int64_t>(k));
  return out;
}

Metrics DetectionEvaluator::finish() const {
  Metrics m;
  const auto& names = opts_.class_names;
  if (opts_.metric == DetMetric::coco) {
    const CocoSummary c = coco();
    static const char* keys[12] = {"map", "ap50", "ap75",  "ap_small", "ap_medium", "ap_large",
                                   "ar1", "ar10", "ar100", "ar_small", "ar_medium", "ar_large"};
    for (int i = 0; i < 12; ++i) m.emplace_back(keys[i], c.stats[static_cast<size_t>(i)]);
    for (size_t k = 0; k < names.size(); ++k) m.emplace_back("ap/" + names[k], c.per_class[k]);
    return m;
  }
  const VocSummary v07 = voc(true), v10 = voc(false);
  const VocSummary& v = opts_.metric == DetMetric::voc07 ? v07 : v10;
  const double ap50 =
      opts_.iou_threshold == 0.5 ? v.map : voc(opts_.metric == DetMetric::voc07, 0.5).map;
  m.emplace_back("map", v.map);
  m.emplace_back("ap50", ap50);
  m.emplace_back("map_voc07", v07.map);
  m.emplace_back("map_voc", v10.map);
  for (size_t k = 0; k < names.size(); ++k) m.emplace_back("ap/" + names[k], v.per_class[k]);
  return m;
}

}  // namespace tcv::train
