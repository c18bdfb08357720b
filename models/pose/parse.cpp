#include "models/pose/parse.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::models::pose {

std::vector<std::vector<Peak>> find_peaks(const Tensor& heatmaps, double sigma, double threshold) {
  TCV_CHECK(heatmaps.defined() && heatmaps.dim() == 3,
            "[find_peaks] heatmaps must be (K, H, W), got ",
            heatmaps.defined() ? heatmaps.shape_str() : "undefined");
  NoGradGuard ng;
  const Tensor maps = heatmaps.detach().to(DType::f64);
  const Tensor smooth = ops::gaussian_filter2d(maps, sigma);
  const std::vector<uint8_t> mask = ops::peak_mask(smooth, threshold).to(kCPU).to_vector<uint8_t>();
  const std::vector<double> value = maps.to(kCPU).contiguous().to_vector<double>();
  const int64_t K = maps.size(0), H = maps.size(1), W = maps.size(2);
  std::vector<std::vector<Peak>> peaks(static_cast<size_t>(K));
  int64_t id = 0;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const size_t i = static_cast<size_t>((k * H + y) * W + x);
        if (mask[i])
          peaks[static_cast<size_t>(k)].push_back(
              {static_cast<double>(x), static_cast<double>(y), value[i], id++});
      }
  return peaks;
}

namespace {

// Every limb joins two of the keypoints, the order names limbs, COCO's
// keypoints map to keypoints.
void check_skeleton(const PoseSkeleton& s, const char* op) {
  const int64_t K = s.keypoints;
  const auto L = static_cast<int64_t>(s.limbs.size());
  TCV_CHECK(K > 0 && L > 0, "[", op, "] the skeleton has ", K, " keypoints and ", L,
            " limbs (OpenPose's is data/pose/skeleton.h's)");
  for (const auto& [a, b] : s.limbs)
    TCV_CHECK(a >= 0 && a < K && b >= 0 && b < K, "[", op, "] skeleton limb (", a, ", ", b,
              ") is outside its ", K, " keypoints");
  for (const int k : s.limb_order)
    TCV_CHECK(k >= 0 && k < L, "[", op, "] skeleton limb_order names limb ", k, " of ", L);
  for (const int k : s.coco_to_ours)
    TCV_CHECK(k >= 0 && k < K, "[", op, "] skeleton coco_to_ours names keypoint ", k, " of ", K);
}

struct Connection {
  int64_t a, b;   // global peak ids
  double score;   // the limb's score
  size_t ia, ib;  // indices in the two candidate lists
};

}  // namespace

std::vector<PersonPose> assemble_people(const Tensor& pafs,
                                        const std::vector<std::vector<Peak>>& peaks,
                                        const PoseSkeleton& skeleton,
                                        const PoseParseOptions& opts) {
  check_skeleton(skeleton, "assemble_people");
  const auto& limbs = skeleton.limbs;
  const auto L = static_cast<int64_t>(limbs.size());
  const int64_t K = skeleton.keypoints;
  TCV_CHECK(pafs.defined() && pafs.dim() == 3 && pafs.size(0) == 2 * L,
            "[assemble_people] pafs must be (", 2 * L, ", H, W), got ",
            pafs.defined() ? pafs.shape_str() : "undefined");
  TCV_CHECK(peaks.size() >= static_cast<size_t>(K), "[assemble_people] ", K,
            " keypoints' peaks needed, got ", peaks.size());
  TCV_CHECK(opts.mid_points >= 2, "[assemble_people] mid_points must be >= 2, got ",
            opts.mid_points);
  const int64_t H = pafs.size(1), W = pafs.size(2);
  const std::vector<double> paf =
      pafs.detach().to(kCPU).to(DType::f64).contiguous().to_vector<double>();
  auto at = [&](int64_t c, int64_t y, int64_t x) {
    TCV_CHECK(y >= 0 && y < H && x >= 0 && x < W, "[assemble_people] sample (", x, ", ", y,
              ") outside the ", W, "x", H, " maps");
    return paf[static_cast<size_t>((c * H + y) * W + x)];
  };
  // Every peak by its global id: (x, y, score).
  std::vector<const Peak*> by_id;
  for (size_t k = 0; k < static_cast<size_t>(K); ++k)
    for (const Peak& p : peaks[k]) {
      TCV_CHECK(p.id == static_cast<int64_t>(by_id.size()),
                "[assemble_people] peak ids must "
                "number the peaks keypoint by keypoint from 0; got ",
                p.id, " at ", by_id.size());
      by_id.push_back(&p);
    }

  // Step 3: candidate limbs, scored and matched greedily.
  const int64_t n = opts.mid_points;
  std::vector<std::vector<Connection>> conns(static_cast<size_t>(L));
  std::vector<uint8_t> empty_limb(static_cast<size_t>(L), 0);
  for (int64_t k = 0; k < L; ++k) {
    const auto& A = peaks[static_cast<size_t>(limbs[static_cast<size_t>(k)][0])];
    const auto& B = peaks[static_cast<size_t>(limbs[static_cast<size_t>(k)][1])];
    if (A.empty() || B.empty()) {
      empty_limb[static_cast<size_t>(k)] = 1;
      continue;
    }
    struct Cand {
      size_t i, j;
      double score;
    };
    std::vector<Cand> cands;
    for (size_t i = 0; i < A.size(); ++i)
      for (size_t j = 0; j < B.size(); ++j) {
        const double vx = B[j].x - A[i].x, vy = B[j].y - A[i].y;
        const double norm = std::sqrt(vx * vx + vy * vy) + 1e-9;
        const double ux = vx / norm, uy = vy / norm;
        double sum = 0;
        int64_t positive = 0;
        const double step_x = vx / static_cast<double>(n - 1);
        const double step_y = vy / static_cast<double>(n - 1);
        for (int64_t s = 0; s < n; ++s) {
          // np.linspace(a, b, n) (s·step + a, the last point b) and Python's round
          // (half to even).
          const double px = s == n - 1 ? B[j].x : static_cast<double>(s) * step_x + A[i].x;
          const double py = s == n - 1 ? B[j].y : static_cast<double>(s) * step_y + A[i].y;
          const auto xi = static_cast<int64_t>(std::nearbyint(px));
          const auto yi = static_cast<int64_t>(std::nearbyint(py));
          const double v = at(2 * k, yi, xi) * ux + at(2 * k + 1, yi, xi) * uy;
          sum += v;
          positive += v > opts.limb_threshold;
        }
        const double score =
            sum / static_cast<double>(n) + std::min(0.5 * static_cast<double>(H) / norm - 1, 0.0);
        const bool enough =
            positive > static_cast<int64_t>(opts.limb_pos_ratio * static_cast<double>(n));
        if (enough && score > 0) cands.push_back({i, j, score});
      }
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Cand& x, const Cand& y) { return x.score > y.score; });
    std::vector<uint8_t> used_a(A.size(), 0), used_b(B.size(), 0);
    auto& out = conns[static_cast<size_t>(k)];
    for (const Cand& c : cands) {
      if (used_a[c.i] || used_b[c.j]) continue;
      used_a[c.i] = used_b[c.j] = 1;
      out.push_back({A[c.i].id, B[c.j].id, c.score, c.i, c.j});
      if (out.size() >= std::min(A.size(), B.size())) break;
    }
  }

  // Step 4: subsets of keypoints (peak ids, -1 where none), their score and size.
  struct Subset {
    std::vector<int64_t> part;
    double score = 0;
    int64_t count = 0;
  };
  std::vector<Subset> subsets;
  for (const int k : skeleton.limb_order) {
    if (empty_limb[static_cast<size_t>(k)]) continue;
    const int64_t ia = limbs[static_cast<size_t>(k)][0], ib = limbs[static_cast<size_t>(k)][1];
    for (const Connection& c : conns[static_cast<size_t>(k)]) {
      size_t found = 0, idx[2] = {0, 0};
      for (size_t j = 0; j < subsets.size(); ++j)
        if (subsets[j].part[static_cast<size_t>(ia)] == c.a ||
            subsets[j].part[static_cast<size_t>(ib)] == c.b) {
          if (found < 2) idx[found] = j;
          ++found;
        }
      if (found == 1) {
        Subset& s = subsets[idx[0]];
        if (s.part[static_cast<size_t>(ib)] != c.b) {
          s.part[static_cast<size_t>(ib)] = c.b;
          ++s.count;
          s.score += by_id[static_cast<size_t>(c.b)]->score + c.score;
        }
      } else if (found >= 2) {
        Subset& s1 = subsets[idx[0]];
        Subset& s2 = subsets[idx[1]];
        bool overlap = false;
        for (size_t p = 0; p < s1.part.size(); ++p) overlap |= s1.part[p] >= 0 && s2.part[p] >= 0;
        if (!overlap) {
          // TorchCV adds s2's entries plus one to s1's: -1 + (id + 1) = id where s1 had none.
          for (size_t p = 0; p < s1.part.size(); ++p) s1.part[p] += s2.part[p] + 1;
          s1.score += s2.score + c.score;
          s1.count += s2.count;
          subsets.erase(subsets.begin() + static_cast<std::ptrdiff_t>(idx[1]));
        } else {
          s1.part[static_cast<size_t>(ib)] = c.b;
          ++s1.count;
          s1.score += by_id[static_cast<size_t>(c.b)]->score + c.score;
        }
      } else {
        Subset s;
        s.part.assign(static_cast<size_t>(K), -1);
        s.part[static_cast<size_t>(ia)] = c.a;
        s.part[static_cast<size_t>(ib)] = c.b;
        s.count = 2;
        s.score = by_id[static_cast<size_t>(c.a)]->score + by_id[static_cast<size_t>(c.b)]->score +
                  c.score;
        subsets.push_back(std::move(s));
      }
    }
  }

  std::vector<PersonPose> people;
  for (const Subset& s : subsets) {
    if (s.count < opts.min_parts) continue;
    if (s.score / static_cast<double>(s.count) < opts.min_mean_score) continue;
    PersonPose p;
    p.score = s.score;
    p.parts = s.count;
    for (const int64_t id : s.part) {
      if (id < 0) {
        p.keypoints.push_back({});
      } else {
        const Peak& pk = *by_id[static_cast<size_t>(id)];
        p.keypoints.push_back({pk.x, pk.y, pk.score, true});
      }
    }
    people.push_back(std::move(p));
  }
  return people;
}

std::vector<PersonPose> parse_poses(const Tensor& heatmaps, const Tensor& pafs,
                                    const PoseSkeleton& skeleton, const PoseParseOptions& opts) {
  check_skeleton(skeleton, "parse_poses");
  const int64_t K = skeleton.keypoints;
  TCV_CHECK(heatmaps.defined() && heatmaps.dim() == 3 && heatmaps.size(0) >= K,
            "[parse_poses] heatmaps must be (>= ", K, ", H, W), got ",
            heatmaps.defined() ? heatmaps.shape_str() : "undefined");
  TCV_CHECK(pafs.defined() && pafs.dim() == 3 && pafs.size(1) == heatmaps.size(1) &&
                pafs.size(2) == heatmaps.size(2),
            "[parse_poses] pafs must be (", 2 * skeleton.limbs.size(), ", ", heatmaps.size(1), ", ",
            heatmaps.size(2), ") as the heatmaps, got ",
            pafs.defined() ? pafs.shape_str() : "undefined");
  const auto peaks = find_peaks(heatmaps.narrow(0, 0, K), opts.sigma, opts.part_threshold);
  return assemble_people(pafs, peaks, skeleton, opts);
}

PoseMaps infer_maps(OpenPose& model, const Tensor& image, const MultiScaleOptions& opts) {
  TCV_CHECK(image.defined() && image.dim() == 4 && image.size(0) == 1,
            "[infer_maps] image must be (1, C, H, W), got ",
            image.defined() ? image.shape_str() : "undefined");
  TCV_CHECK(opts.base_height > 0, "[infer_maps] base_height must be positive, got ",
            opts.base_height);
  for (double s : opts.scales)
    TCV_CHECK(std::isfinite(s) && s > 0, "[infer_maps] scales must be positive, got ", s);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard ng;
  const int64_t H = image.size(2), W = image.size(3);
  const int64_t st = OpenPose::stride;
  std::vector<double> mults;
  if (opts.scales.empty()) mults.push_back(1.0);
  for (double s : opts.scales)
    mults.push_back(s * static_cast<double>(opts.base_height) / static_cast<double>(H));
  PoseMaps avg;
  for (const double m : mults) {
    const int64_t h = std::max<int64_t>(1, std::llround(static_cast<double>(H) * m));
    const int64_t w = std::max<int64_t>(1, std::llround(static_cast<double>(W) * m));
    Tensor x = (h == H && w == W)
                   ? image
                   : ops::upsample(image, {h, w}, {.mode = ops::InterpMode::bilinear});
    const int64_t ph = (st - h % st) % st, pw = (st - w % st) % st;
    if (ph || pw) x = ops::pad(x, {0, pw, 0, ph});
    const PoseOutput out = model.forward_stages(x);
    auto resize = [&](const Tensor& t) {
      Tensor u =
          ops::upsample(t, {t.size(2) * st, t.size(3) * st}, {.mode = ops::InterpMode::bilinear});
      u = u.narrow(2, 0, h).narrow(3, 0, w);
      if (h != H || w != W)
        u = ops::upsample(u.contiguous(), {H, W}, {.mode = ops::InterpMode::bilinear});
      return ops::mul(u.squeeze(0), 1.0 / static_cast<double>(mults.size()));
    };
    const Tensor hm = resize(out.heatmaps.back()), pf = resize(out.pafs.back());
    avg.heatmaps = avg.heatmaps.defined() ? ops::add(avg.heatmaps, hm) : hm;
    avg.pafs = avg.pafs.defined() ? ops::add(avg.pafs, pf) : pf;
  }
  model.train(was_training);
  return avg;
}

std::vector<double> to_coco_keypoints(const PersonPose& p, const PoseSkeleton& skeleton,
                                      double scale) {
  check_skeleton(skeleton, "to_coco_keypoints");
  TCV_CHECK(p.keypoints.size() == static_cast<size_t>(skeleton.keypoints), "[to_coco_keypoints] ",
            skeleton.keypoints, " keypoints expected, got ", p.keypoints.size());
  std::vector<double> out;
  out.reserve(3 * skeleton.coco_to_ours.size());
  for (const int o : skeleton.coco_to_ours) {
    const auto& k = p.keypoints[static_cast<size_t>(o)];
    if (k.found)
      out.insert(out.end(), {k.x * scale, k.y * scale, 1.0});
    else
      out.insert(out.end(), {0.0, 0.0, 0.0});
  }
  return out;
}

}  // namespace tcv::models::pose
