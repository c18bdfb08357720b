#include "train/eval/keypoint_ap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tcv::train {

namespace {

constexpr uint64_t kStateMagic = 0x31764b5054564354ull;  // "TCVTPKv1"
constexpr int T = 10, R = 101, A = 3;
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

// Per image and area range, what pycocotools' evaluateImg keeps.
struct ImageEval {
  std::vector<double> scores;     // kept detections, by descending score
  std::vector<uint16_t> matched;  // bit t: matched at threshold t
  std::vector<uint16_t> ignored;  // bit t: ignored at threshold t
  int64_t not_ignored_truth = 0;  // ground truth that counts
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
  const size_t K = opts_.sigmas.size(), ng = truth.size(), nd = dets.size();
  std::vector<double> vars(K);
  for (size_t k = 0; k < K; ++k) vars[k] = (opts_.sigmas[k] * 2) * (opts_.sigmas[k] * 2);
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)
  std::vector<double> out(nd * ng, 0.0);
  for (size_t j = 0; j < ng; ++j) {
    const KeypointTruth& gt = truth[j];
    const std::vector<double>& g = gt.keypoints;
    size_t labelled = 0;
    for (size_t k = 0; k < K; ++k) labelled += g[3 * k + 2] > 0;
    // Twice the box around it, for ground truth without labelled keypoints.
    const auto& bb = gt.bbox;
    const double x0 = bb[0] - bb[2], x1 = bb[0] + bb[2] * 2;
    const double y0 = bb[1] - bb[3], y1 = bb[1] + bb[3] * 2;
    for (size_t i = 0; i < nd; ++i) {
      const std::vector<double>& d = dets[i].keypoints;
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
      out[i * ng + j] = sum / static_cast<double>(labelled > 0 ? labelled : K);
    }
  }
  return out;
}

KeypointSummary KeypointEvaluator::coco() const {
  // pycocotools' np.linspace(.5, .95, 10) and np.linspace(0, 1, 101), value for value.
  double thr[T], rec_thr[R];
  const double istep = (0.95 - 0.5) / 9.0;
  for (int t = 0; t < T; ++t) thr[t] = t * istep + 0.5;
  thr[T - 1] = 0.95;
  const double rstep = 1.0 / 100.0;
  for (int r = 0; r < R; ++r) rec_thr[r] = r * rstep + 0.0;
  rec_thr[R - 1] = 1.0;
  const double area_lo[A] = {0, 32.0 * 32.0, 96.0 * 96.0};
  const double area_hi[A] = {1e5 * 1e5, 96.0 * 96.0, 1e5 * 1e5};
  const double eps = std::numeric_limits<double>::epsilon();
  const auto max_dets = static_cast<size_t>(opts_.max_dets);

  std::vector<const Image*> imgs;
  for (const Image& im : images_) imgs.push_back(&im);
  std::sort(imgs.begin(), imgs.end(), [](const Image* a, const Image* b) { return a->id < b->id; });

  // precision[a][t][r], recall[a][t]; -1 where the range has no ground truth.
  std::vector<double> precision(static_cast<size_t>(A) * T * R, -1.0);
  std::vector<double> recall(static_cast<size_t>(A) * T, -1.0);

#pragma omp parallel for schedule(dynamic, 1)
  for (int a = 0; a < A; ++a) {
    std::vector<ImageEval> evals;
    int64_t npig = 0;
    for (const Image* im : imgs) {
      const size_t ng = im->truth.size();
      std::vector<size_t> d_idx(im->dets.size());
      std::iota(d_idx.begin(), d_idx.end(), 0);
      std::stable_sort(d_idx.begin(), d_idx.end(),
                       [&](size_t x, size_t y) { return im->dets[x].score > im->dets[y].score; });
      if (d_idx.size() > max_dets) d_idx.resize(max_dets);
      const size_t nd = d_idx.size();
      if (ng == 0 && nd == 0) continue;
      std::vector<KeypointDetection> dets;
      for (size_t i : d_idx) dets.push_back(im->dets[i]);
      const std::vector<double> ious = oks(im->truth, dets);  // (nd, ng)
      // Ground truth: crowds, people without keypoints and areas out of range ignored,
      // the ignored ones last (a stable sort).
      std::vector<uint8_t> g_ign(ng);
      for (size_t g = 0; g < ng; ++g) {
        const KeypointTruth& t = im->truth[g];
        g_ign[g] = t.crowd || t.num_keypoints == 0 || t.area < area_lo[a] || t.area > area_hi[a];
        npig += g_ign[g] ? 0 : 1;
      }
      std::vector<size_t> order(ng);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return g_ign[x] < g_ign[y]; });
      ImageEval e;
      e.matched.assign(nd, 0);
      e.ignored.assign(nd, 0);
      for (int t = 0; t < T; ++t) {
        std::vector<uint8_t> taken(ng, 0);  // by sorted position
        for (size_t d = 0; d < nd; ++d) {
          double best = std::min(thr[t], 1 - 1e-10);
          int m = -1;
          for (size_t s = 0; s < ng; ++s) {
            const size_t g = order[s];
            if (taken[s] && !im->truth[g].crowd) continue;
            if (m > -1 && !g_ign[order[static_cast<size_t>(m)]] && g_ign[g]) break;
            // !(>=), not <: a NaN OKS (a detection with NaN keypoints) never
            // matches, where pycocotools' `<` lets it match as a perfect one.
            if (!(ious[d * ng + g] >= best)) continue;
            best = ious[d * ng + g];
            m = static_cast<int>(s);
          }
          if (m == -1) continue;
          if (g_ign[order[static_cast<size_t>(m)]]) e.ignored[d] |= static_cast<uint16_t>(1u << t);
          e.matched[d] |= static_cast<uint16_t>(1u << t);
          taken[static_cast<size_t>(m)] = 1;
        }
      }
      for (size_t d = 0; d < nd; ++d) {
        const double da = keypoint_box_area(dets[d].keypoints);
        if (da < area_lo[a] || da > area_hi[a])
          e.ignored[d] |= static_cast<uint16_t>(~e.matched[d] & ((1u << T) - 1));
        e.scores.push_back(dets[d].score);
      }
      evals.push_back(std::move(e));
    }
    if (npig == 0) continue;
    // Accumulate: all images' kept detections, in image order, sorted by score (stable).
    std::vector<std::pair<size_t, size_t>> all;
    for (size_t i = 0; i < evals.size(); ++i)
      for (size_t d = 0; d < evals[i].scores.size(); ++d) all.emplace_back(i, d);
    std::stable_sort(all.begin(), all.end(), [&](const auto& x, const auto& y) {
      return evals[x.first].scores[x.second] > evals[y.first].scores[y.second];
    });
    const size_t nd = all.size();
    std::vector<double> rc(nd), pr(nd);
    for (int t = 0; t < T; ++t) {
      double tp = 0, fp = 0;
      size_t n = 0;
      for (const auto& [i, d] : all) {
        const bool ign = (evals[i].ignored[d] >> t) & 1u;
        const bool hit = (evals[i].matched[d] >> t) & 1u;
        if (!ign) {
          tp += hit ? 1 : 0;
          fp += hit ? 0 : 1;
        }
        rc[n] = tp / static_cast<double>(npig);
        pr[n] = tp / (fp + tp + eps);
        ++n;
      }
      recall[static_cast<size_t>(a) * T + t] = nd ? rc[nd - 1] : 0.0;
      for (size_t i = nd; i-- > 1;)
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
      double* q = &precision[(static_cast<size_t>(a) * T + t) * R];
      for (int r = 0; r < R; ++r) {
        // np.searchsorted(rc, rec_thr, side='left'); past the end stays 0.
        const size_t pi = static_cast<size_t>(
            std::lower_bound(rc.begin(), rc.begin() + static_cast<std::ptrdiff_t>(nd), rec_thr[r]) -
            rc.begin());
        q[r] = pi < nd ? pr[pi] : 0.0;
      }
    }
  }

  // COCOeval.summarize for keypoints.
  auto mean_of = [](const std::vector<double>& v) {
    double s = 0;
    int64_t n = 0;
    for (double x : v)
      if (x > -1) {
        s += x;
        ++n;
      }
    return n ? s / static_cast<double>(n) : -1.0;
  };
  auto ap = [&](int a, int t_only) {
    std::vector<double> v;
    for (int t = 0; t < T; ++t)
      if (t_only < 0 || t == t_only)
        for (int r = 0; r < R; ++r)
          v.push_back(precision[(static_cast<size_t>(a) * T + t) * R + r]);
    return mean_of(v);
  };
  auto ar = [&](int a, int t_only) {
    std::vector<double> v;
    for (int t = 0; t < T; ++t)
      if (t_only < 0 || t == t_only) v.push_back(recall[static_cast<size_t>(a) * T + t]);
    return mean_of(v);
  };
  KeypointSummary s;
  s.stats = {ap(0, -1), ap(0, 0), ap(0, 5), ap(1, -1), ap(2, -1),
             ar(0, -1), ar(0, 0), ar(0, 5), ar(1, -1), ar(2, -1)};
  return s;
}

Metrics KeypointEvaluator::finish() const {
  const KeypointSummary s = coco();
  Metrics m;
  for (size_t i = 0; i < s.stats.size(); ++i) m.emplace_back(kMetricNames[i], s.stats[i]);
  return m;
}

}  // namespace tcv::train
