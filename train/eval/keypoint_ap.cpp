#include "train/eval/keypoint_ap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tcv::train {

namespace {

constexpr uint64_t kStateMagic = 0x31764b5054564354ull;  // "TCVTPKv1"
const char* const kMetricNames[10] = {"ap", "ap50", "ap75", "ap_medium", "ap_large",
                                      "ar", "ar50", "ar75", "ar_medium", "ar_large"};

// The detection's area as pycocotools' loadRes gives it: the box of all its keypoints.
double keypoint_box_area(const std::vector<double>& kp) {
  double x0 = std::numeric_limits<double>::infinity(), y0 = x0, x1 = -x0, y1 = -x0;
  for (size_t i = 0; i + 2 < kp.size(); i += 3) {
    x0 = std::min(x0, kp[i]);
    x1 = std::max(x1, kp[i]);
    y0 = std::min(y0, kp[i + 1]);
    y1 = std::max(y1, kp[i + 1]);
  }
  return kp.empty() ? 0.0 : (x1 - x0) * (y1 - y0);
}

// pycocotools' computeOks of one detection's keypoints `d` and one person:
// `vars` (2 sigma)^2 per keypoint, `labelled` the person's labelled keypoints.
double oks_of(const std::vector<double>& d, const KeypointTruth& gt, size_t labelled,
              const std::vector<double>& vars) {
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)
  const size_t K = vars.size();
  const std::vector<double>& g = gt.keypoints;
  // Twice the box around it, for ground truth without labelled keypoints.
  const auto& bb = gt.bbox;
  const double x0 = bb[0] - bb[2], x1 = bb[0] + bb[2] * 2;
  const double y0 = bb[1] - bb[3], y1 = bb[1] + bb[3] * 2;
  double sum = 0;
  for (size_t k = 0; k < K; ++k) {
    const double xd = d[3 * k], yd = d[3 * k + 1];
    double dx, dy;
    if (labelled > 0) {
      if (!(g[3 * k + 2] > 0)) continue;
      dx = xd - g[3 * k];
      dy = yd - g[3 * k + 1];
    } else {
      dx = std::max(0.0, x0 - xd) + std::max(0.0, xd - x1);
      dy = std::max(0.0, y0 - yd) + std::max(0.0, yd - y1);
    }
    const double e = (dx * dx + dy * dy) / vars[k] / (gt.area + eps) / 2;
    sum += std::exp(-e);
  }
  return sum / static_cast<double>(labelled > 0 ? labelled : K);
}

size_t labelled_keypoints(const KeypointTruth& gt) {
  size_t n = 0;
  for (size_t k = 2; k < gt.keypoints.size(); k += 3) n += gt.keypoints[k] > 0;
  return n;
}

std::vector<double> oks_vars(const std::vector<double>& sigmas) {
  std::vector<double> vars(sigmas.size());
  for (size_t k = 0; k < sigmas.size(); ++k) vars[k] = (sigmas[k] * 2) * (sigmas[k] * 2);
  return vars;
}

// iouType "keypoints": the object keypoint similarity.
class Oks final : public CocoSimilarity {
 public:
  // Per image: its people and its detections.
  using People = std::vector<
      std::pair<const std::vector<KeypointTruth>*, const std::vector<KeypointDetection>*>>;
  Oks(People people, const std::vector<double>& sigmas)
      : people_(std::move(people)), vars_(oks_vars(sigmas)) {}
  void compute(std::span<const CocoTruthRef> truth, std::span<const CocoDetectionRef> dets,
               double* out) const override {
    const size_t ng = truth.size();
    const auto& [gts, found] = people_[static_cast<size_t>(truth.front().image)];
    for (size_t g = 0; g < ng; ++g) {
      const KeypointTruth& gt = (*gts)[static_cast<size_t>(truth[g].index)];
      const size_t labelled = labelled_keypoints(gt);
      for (size_t d = 0; d < dets.size(); ++d)
        out[d * ng + g] =
            oks_of((*found)[static_cast<size_t>(dets[d].index)].keypoints, gt, labelled, vars_);
    }
  }

 private:
  People people_;
  std::vector<double> vars_;
};

}  // namespace

const std::vector<double>& coco_keypoint_sigmas() {
  static const std::vector<double> s = [] {
    const double v[17] = {.26, .25, .25,  .35,  .35, .79, .79, .72, .72,
                          .62, .62, 1.07, 1.07, .87, .87, .89, .89};
    std::vector<double> out(v, v + 17);
    for (double& x : out) x /= 10.0;  // np.array([...]) / 10.0
    return out;
  }();
  return s;
}

KeypointEvaluator::KeypointEvaluator(KeypointEvalOptions opts) : opts_(std::move(opts)) {
  TCV_CHECK(!opts_.sigmas.empty(), "[KeypointEvaluator] no keypoint sigmas");
  for (double s : opts_.sigmas)
    TCV_CHECK(s > 0, "[KeypointEvaluator] keypoint sigmas must be positive, got ", s);
  TCV_CHECK(opts_.max_dets > 0, "[KeypointEvaluator] max_dets must be positive, got ",
            opts_.max_dets);
}

std::vector<std::pair<int64_t, std::vector<KeypointDetection>>> KeypointEvaluator::detections()
    const {
  std::vector<const Image*> ims;
  for (const Image& im : images_) ims.push_back(&im);
  std::sort(ims.begin(), ims.end(), [](const Image* a, const Image* b) { return a->id < b->id; });
  std::vector<std::pair<int64_t, std::vector<KeypointDetection>>> out;
  for (const Image* im : ims) out.push_back({im->id, im->dets});
  return out;
}

void KeypointEvaluator::reset() {
  images_.clear();
  ids_.clear();
}

void KeypointEvaluator::insert(Image im) {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), im.id);
  if (it != ids_.end() && *it == im.id) return;
  ids_.insert(it, im.id);
  images_.push_back(std::move(im));
}

void KeypointEvaluator::add(int64_t image_id, const std::vector<KeypointTruth>& truth,
                            const std::vector<KeypointDetection>& dets) {
  const size_t n = 3 * opts_.sigmas.size();
  for (size_t g = 0; g < truth.size(); ++g) {
    TCV_CHECK(truth[g].keypoints.size() == n, "[KeypointEvaluator] image ", image_id,
              ": ground-truth person ", g, " has ", truth[g].keypoints.size(),
              " keypoint values, expected ", n, " (", opts_.sigmas.size(), " x, y, v triples)");
    TCV_CHECK(std::isfinite(truth[g].area) && truth[g].area >= 0, "[KeypointEvaluator] image ",
              image_id, ": ground-truth person ", g, " has area ", truth[g].area);
  }
  for (size_t d = 0; d < dets.size(); ++d) {
    TCV_CHECK(dets[d].keypoints.size() == n, "[KeypointEvaluator] image ", image_id, ": detection ",
              d, " has ", dets[d].keypoints.size(), " keypoint values, expected ", n);
    TCV_CHECK(!std::isnan(dets[d].score), "[KeypointEvaluator] image ", image_id, ": detection ", d,
              " has a NaN score");
  }
  insert({image_id, truth, dets});
}

std::string KeypointEvaluator::serialize() const {
  ByteWriter w;
  w.put(kStateMagic);
  w.put<uint64_t>(opts_.sigmas.size());
  w.put<uint64_t>(images_.size());
  for (const Image& im : images_) {
    w.put(im.id);
    w.put<uint64_t>(im.truth.size());
    for (const KeypointTruth& g : im.truth) {
      w.put_vector(g.keypoints);
      w.put(g.num_keypoints);
      w.put(g.bbox);
      w.put(g.area);
      w.put<uint8_t>(g.crowd ? 1 : 0);
    }
    w.put<uint64_t>(im.dets.size());
    for (const KeypointDetection& d : im.dets) {
      w.put_vector(d.keypoints);
      w.put(d.score);
    }
  }
  return w.take();
}

void KeypointEvaluator::merge(const std::string& bytes) {
  const char* what = "[KeypointEvaluator::merge]";
  ByteReader r(bytes, what);
  TCV_CHECK(r.get<uint64_t>() == kStateMagic, what, " not the state of a KeypointEvaluator");
  const auto k = r.get<uint64_t>();
  TCV_CHECK(k == opts_.sigmas.size(), what, " state of ", k, " keypoints, this evaluator has ",
            opts_.sigmas.size());
  const auto n = r.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    Image im;
    im.id = r.get<int64_t>();
    const auto ng = r.get<uint64_t>();
    TCV_CHECK(ng <= bytes.size(), what, " implausible count of ", ng, " people");
    for (uint64_t g = 0; g < ng; ++g) {
      KeypointTruth t;
      t.keypoints = r.get_vector<double>();
      t.num_keypoints = r.get<int64_t>();
      t.bbox = r.get<std::array<double, 4>>();
      t.area = r.get<double>();
      t.crowd = r.get<uint8_t>() != 0;
      TCV_CHECK(t.keypoints.size() == 3 * k, what, " inconsistent state for image ", im.id);
      im.truth.push_back(std::move(t));
    }
    const auto nd = r.get<uint64_t>();
    TCV_CHECK(nd <= bytes.size(), what, " implausible count of ", nd, " detections");
    for (uint64_t d = 0; d < nd; ++d) {
      KeypointDetection det;
      det.keypoints = r.get_vector<double>();
      det.score = r.get<double>();
      TCV_CHECK(det.keypoints.size() == 3 * k, what, " inconsistent state for image ", im.id);
      im.dets.push_back(std::move(det));
    }
    insert(std::move(im));
  }
  TCV_CHECK(r.done(), what, " trailing bytes after the state");
}

std::vector<double> KeypointEvaluator::oks(const std::vector<KeypointTruth>& truth,
                                           const std::vector<KeypointDetection>& dets) const {
  const std::vector<double> vars = oks_vars(opts_.sigmas);
  const size_t ng = truth.size();
  std::vector<double> out(dets.size() * ng, 0.0);
  for (size_t g = 0; g < ng; ++g) {
    const size_t labelled = labelled_keypoints(truth[g]);
    for (size_t d = 0; d < dets.size(); ++d)
      out[d * ng + g] = oks_of(dets[d].keypoints, truth[g], labelled, vars);
  }
  return out;
}

KeypointSummary KeypointEvaluator::coco() const {
  std::vector<const Image*> imgs;
  for (const Image& im : images_) imgs.push_back(&im);
  std::sort(imgs.begin(), imgs.end(), [](const Image* a, const Image* b) { return a->id < b->id; });
  std::vector<std::vector<CocoTruthRef>> truth(1);
  std::vector<std::vector<CocoDetectionRef>> dets(1);
  Oks::People people;
  for (size_t i = 0; i < imgs.size(); ++i) {
    const Image& im = *imgs[i];
    const auto img = static_cast<int32_t>(i);
    people.emplace_back(&im.truth, &im.dets);
    for (size_t g = 0; g < im.truth.size(); ++g) {
      const KeypointTruth& t = im.truth[g];
      truth[0].push_back(
          {img, static_cast<int32_t>(g), t.area, t.crowd, t.crowd || t.num_keypoints == 0});
    }
    for (size_t d = 0; d < im.dets.size(); ++d)
      dets[0].push_back({img, static_cast<int32_t>(d), im.dets[d].score,
                         keypoint_box_area(im.dets[d].keypoints)});
  }
  const CocoAccumulation acc = coco_evaluate(truth, dets, CocoEvalParams::keypoints(opts_.max_dets),
                                             Oks(std::move(people), opts_.sigmas));
  return {coco_keypoint_stats(acc)};
}

Metrics KeypointEvaluator::finish() const {
  const KeypointSummary s = coco();
  Metrics m;
  for (size_t i = 0; i < s.stats.size(); ++i) m.emplace_back(kMetricNames[i], s.stats[i]);
  return m;
}

}  // namespace tcv::train
