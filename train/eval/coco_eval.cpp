#include "train/eval/coco_eval.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "engine/error.h"

namespace tcv::train {

namespace {

constexpr int T = CocoAccumulation::T, R = CocoAccumulation::R;

// pycocotools' np.linspace(.5, .95, 10) and np.linspace(0, 1, 101), value for value.
struct Thresholds {
  double iou[T], recall[R];
  Thresholds() {
    const double istep = (0.95 - 0.5) / 9.0;
    for (int t = 0; t < T; ++t) iou[t] = t * istep + 0.5;
    iou[T - 1] = 0.95;
    const double rstep = 1.0 / 100.0;
    for (int r = 0; r < R; ++r) recall[r] = r * rstep + 0.0;
    recall[R - 1] = 1.0;
  }
};

const Thresholds& thresholds() {
  static const Thresholds t;
  return t;
}

// One image of one category: its ground truth [g0, g1) of truth[k] and
// detections [d0, d1) of dets[k]; its kept detections are entries [e0, ...).
struct Cell {
  size_t k, g0, g1, d0, d1, e0;
};

bool outside(double area, const std::array<double, 2>& range) {
  return area < range[0] || area > range[1];
}

}  // namespace

CocoEvalParams CocoEvalParams::boxes() {
  return {.area_ranges = {{0, 1e5 * 1e5},
                          {0, 32.0 * 32.0},
                          {32.0 * 32.0, 96.0 * 96.0},
                          {96.0 * 96.0, 1e5 * 1e5}},
          .max_dets = {1, 10, 100}};
}

CocoEvalParams CocoEvalParams::keypoints(int64_t max_dets) {
  return {.area_ranges = {{0, 1e5 * 1e5}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e5 * 1e5}},
          .max_dets = {max_dets}};
}

CocoAccumulation::CocoAccumulation(size_t categories, size_t areas, size_t max_dets)
    : K_(categories),
      A_(areas),
      M_(max_dets),
      precision_(static_cast<size_t>(T * R) * K_ * A_ * M_, -1.0),
      recall_(static_cast<size_t>(T) * K_ * A_ * M_, -1.0) {}

double CocoAccumulation::ap(int t_only, size_t a, size_t m, int64_t k_only) const {
  double s = 0;
  int64_t n = 0;
  for (int t = 0; t < T; ++t) {
    if (t_only >= 0 && t != t_only) continue;
    for (int r = 0; r < R; ++r)
      for (size_t k = 0; k < K_; ++k) {
        if (k_only >= 0 && k != static_cast<size_t>(k_only)) continue;
        const double v = precision(t, r, k, a, m);
        if (v > -1) {
          s += v;
          ++n;
        }
      }
  }
  return n ? s / static_cast<double>(n) : -1.0;
}

double CocoAccumulation::ar(int t_only, size_t a, size_t m) const {
  double s = 0;
  int64_t n = 0;
  for (int t = 0; t < T; ++t) {
    if (t_only >= 0 && t != t_only) continue;
    for (size_t k = 0; k < K_; ++k) {
      const double v = recall(t, k, a, m);
      if (v > -1) {
        s += v;
        ++n;
      }
    }
  }
  return n ? s / static_cast<double>(n) : -1.0;
}

CocoAccumulation coco_evaluate(const std::vector<std::vector<CocoTruthRef>>& truth,
                               const std::vector<std::vector<CocoDetectionRef>>& dets,
                               const CocoEvalParams& params, const CocoSimilarity& similarity) {
  const size_t K = truth.size(), A = params.area_ranges.size(), M = params.max_dets.size();
  TCV_CHECK(dets.size() == K, "[coco_evaluate] ground truth of ", K, " categories, detections of ",
            dets.size());
  TCV_CHECK(A > 0 && M > 0, "[coco_evaluate] needs area ranges and max_dets");
  for (size_t m = 0; m < M; ++m)
    TCV_CHECK(params.max_dets[m] > 0 && (m == 0 || params.max_dets[m] > params.max_dets[m - 1]),
              "[coco_evaluate] max_dets must be positive and increasing");
  const Thresholds& th = thresholds();
  const auto max_kept = static_cast<size_t>(params.max_dets.back());
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)

  // The images of each category that have ground truth or detections of it.
  std::vector<Cell> cells;
  std::vector<size_t> first_cell(K + 1, 0), first_entry(K + 1, 0);
  size_t entries_n = 0;
  for (size_t k = 0; k < K; ++k) {
    const auto& G = truth[k];
    const auto& D = dets[k];
    size_t gi = 0, di = 0;
    while (gi < G.size() || di < D.size()) {
      const int32_t img =
          std::min(gi < G.size() ? G[gi].image : std::numeric_limits<int32_t>::max(),
                   di < D.size() ? D[di].image : std::numeric_limits<int32_t>::max());
      Cell c{k, gi, gi, di, di, entries_n};
      for (; c.g1 < G.size() && G[c.g1].image == img; ++c.g1) {
      }
      for (; c.d1 < D.size() && D[c.d1].image == img; ++c.d1) {
      }
      TCV_CHECK(c.g1 == G.size() || G[c.g1].image > img, "[coco_evaluate] category ", k,
                ": ground truth not in image order");
      TCV_CHECK(c.d1 == D.size() || D[c.d1].image > img, "[coco_evaluate] category ", k,
                ": detections not in image order");
      entries_n += std::min(c.d1 - c.d0, max_kept);
      gi = c.g1;
      di = c.d1;
      cells.push_back(c);
    }
    first_cell[k + 1] = cells.size();
    first_entry[k + 1] = entries_n;
  }

  // evaluateImg of every cell: per kept detection its score, its rank in its
  // image, and per area range bit t of matched / ignored for threshold t.
  std::vector<double> score(entries_n);
  std::vector<int32_t> rank(entries_n);
  std::vector<uint16_t> matched(entries_n * A), ignored(entries_n * A);
  std::vector<int64_t> cell_npig(cells.size() * A, 0);  // ground truth that counts

#pragma omp parallel
  {
    std::vector<int32_t> d_idx, g_order;
    std::vector<CocoDetectionRef> kept;
    std::vector<double> sim;
    std::vector<uint8_t> g_ign, g_taken;
    std::vector<uint16_t> d_match, d_ign;
#pragma omp for schedule(dynamic, 16)
    for (size_t ci = 0; ci < cells.size(); ++ci) {
      const Cell& c = cells[ci];
      const std::span<const CocoTruthRef> gts(truth[c.k].data() + c.g0, c.g1 - c.g0);
      const CocoDetectionRef* D = dets[c.k].data() + c.d0;
      d_idx.resize(c.d1 - c.d0);
      std::iota(d_idx.begin(), d_idx.end(), 0);
      std::stable_sort(d_idx.begin(), d_idx.end(),
                       [&](int32_t x, int32_t y) { return D[x].score > D[y].score; });
      if (d_idx.size() > max_kept) d_idx.resize(max_kept);
      const size_t ng = gts.size(), nd = d_idx.size();
      kept.clear();
      for (const int32_t i : d_idx) kept.push_back(D[i]);
      sim.assign(nd * ng, 0.0);
      if (nd > 0 && ng > 0) similarity.compute(gts, kept, sim.data());
      for (size_t d = 0; d < nd; ++d) {
        score[c.e0 + d] = kept[d].score;
        rank[c.e0 + d] = static_cast<int32_t>(d);
      }
      for (size_t a = 0; a < A; ++a) {
        const auto& range = params.area_ranges[a];
        g_ign.resize(ng);
        for (size_t g = 0; g < ng; ++g) {
          g_ign[g] = gts[g].ignore || outside(gts[g].area, range);
          cell_npig[ci * A + a] += g_ign[g] ? 0 : 1;
        }
        g_order.resize(ng);
        std::iota(g_order.begin(), g_order.end(), 0);
        std::stable_sort(g_order.begin(), g_order.end(), [&](int32_t x, int32_t y) {
          return g_ign[static_cast<size_t>(x)] < g_ign[static_cast<size_t>(y)];
        });
        d_match.assign(nd, 0);
        d_ign.assign(nd, 0);
        for (int t = 0; t < T; ++t) {
          g_taken.assign(ng, 0);  // by sorted position
          for (size_t d = 0; d < nd; ++d) {
            double best = std::min(th.iou[t], 1 - 1e-10);
            int m = -1;
            for (size_t s = 0; s < ng; ++s) {
              const auto g = static_cast<size_t>(g_order[s]);
              if (g_taken[s] && !gts[g].crowd) continue;
              if (m > -1 && !g_ign[static_cast<size_t>(g_order[static_cast<size_t>(m)])] &&
                  g_ign[g])
                break;
              // !(>=), not <: a NaN similarity never matches.
              if (!(sim[d * ng + g] >= best)) continue;
              best = sim[d * ng + g];
              m = static_cast<int>(s);
            }
            if (m == -1) continue;
            if (g_ign[static_cast<size_t>(g_order[static_cast<size_t>(m)])])
              d_ign[d] |= static_cast<uint16_t>(1u << t);
            d_match[d] |= static_cast<uint16_t>(1u << t);
            g_taken[static_cast<size_t>(m)] = 1;
          }
        }
        for (size_t d = 0; d < nd; ++d) {
          if (outside(kept[d].area, range))
            d_ign[d] |= static_cast<uint16_t>(~d_match[d] & ((1u << T) - 1));
          matched[(c.e0 + d) * A + a] = d_match[d];
          ignored[(c.e0 + d) * A + a] = d_ign[d];
        }
      }
    }
  }

  // accumulate, per category.
  CocoAccumulation acc(K, A, M);
#pragma omp parallel
  {
    std::vector<int32_t> order, sel;
    std::vector<uint16_t> hit, ign;
    std::vector<double> tps, fps, pr, rc;
#pragma omp for schedule(dynamic, 1)
    for (size_t k = 0; k < K; ++k) {
      std::vector<int64_t> npig(A, 0);
      for (size_t ci = first_cell[k]; ci < first_cell[k + 1]; ++ci)
        for (size_t a = 0; a < A; ++a) npig[a] += cell_npig[ci * A + a];
      const size_t e0 = first_entry[k], e1 = first_entry[k + 1];
      // One stable sort by score serves every (area, max detections): keeping
      // the first m of each image is a subsequence, which a stable sort
      // leaves in the order it would give it alone.
      order.resize(e1 - e0);
      std::iota(order.begin(), order.end(), static_cast<int32_t>(e0));
      std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
        return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)];
      });
      // Per (max detections, area range): the kept detections' bits in score
      // order; per threshold, running true/false positive counts, then recall
      // and precision as pycocotools computes them (the divisions in their own
      // loops, which vectorize).
      for (size_t m = 0; m < M; ++m) {
        sel.clear();
        for (const int32_t i : order)
          if (rank[static_cast<size_t>(i)] < params.max_dets[m]) sel.push_back(i);
        const size_t nd = sel.size();
        hit.resize(nd);
        ign.resize(nd);
        tps.resize(nd);
        fps.resize(nd);
        rc.resize(nd);
        pr.resize(nd);
        for (size_t a = 0; a < A; ++a) {
          if (npig[a] == 0) continue;
          for (size_t i = 0; i < nd; ++i) {
            hit[i] = matched[static_cast<size_t>(sel[i]) * A + a];
            ign[i] = ignored[static_cast<size_t>(sel[i]) * A + a];
          }
          const auto n_pos = static_cast<double>(npig[a]);
          for (int t = 0; t < T; ++t) {
            int64_t tp = 0, fp = 0;  // counts: exact, as numpy's float cumsum of 0s and 1s
            for (size_t i = 0; i < nd; ++i) {
              const unsigned h = (hit[i] >> t) & 1u, g = (ign[i] >> t) & 1u;
              tp += h & ~g & 1u;
              fp += ~h & ~g & 1u;
              tps[i] = static_cast<double>(tp);
              fps[i] = static_cast<double>(fp);
            }
            const double* __restrict tpp = tps.data();
            const double* __restrict fpp = fps.data();
            double* __restrict rcp = rc.data();
            double* __restrict prp = pr.data();
            for (size_t i = 0; i < nd; ++i) rcp[i] = tpp[i] / n_pos;
            for (size_t i = 0; i < nd; ++i) prp[i] = tpp[i] / (fpp[i] + tpp[i] + eps);
            acc.recall(t, k, a, m) = nd ? rc[nd - 1] : 0.0;
            for (size_t i = nd; i-- > 1;) pr[i - 1] = std::max(pr[i - 1], pr[i]);
            size_t pos = 0;
            for (int r = 0; r < R; ++r) {
              while (pos < nd && rc[pos] < th.recall[r]) ++pos;  // searchsorted, side='left'
              acc.precision(t, r, k, a, m) = pos < nd ? pr[pos] : 0.0;
            }
          }
        }
      }
    }
  }
  return acc;
}

std::vector<double> coco_box_stats(const CocoAccumulation& acc) {
  return {acc.ap(-1, 0, 2), acc.ap(0, 0, 2),  acc.ap(5, 0, 2),  acc.ap(-1, 1, 2),
          acc.ap(-1, 2, 2), acc.ap(-1, 3, 2), acc.ar(-1, 0, 0), acc.ar(-1, 0, 1),
          acc.ar(-1, 0, 2), acc.ar(-1, 1, 2), acc.ar(-1, 2, 2), acc.ar(-1, 3, 2)};
}

std::array<double, 10> coco_keypoint_stats(const CocoAccumulation& acc) {
  return {acc.ap(-1, 0, 0), acc.ap(0, 0, 0), acc.ap(5, 0, 0), acc.ap(-1, 1, 0), acc.ap(-1, 2, 0),
          acc.ar(-1, 0, 0), acc.ar(0, 0, 0), acc.ar(5, 0, 0), acc.ar(-1, 1, 0), acc.ar(-1, 2, 0)};
}

}  // namespace tcv::train
