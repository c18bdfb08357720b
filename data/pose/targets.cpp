#include "data/pose/targets.h"

#include <algorithm>
#include <cmath>

namespace tcv::data {

namespace {

// TorchCV's cut: exponents above this (values below about 0.01) are zero.
constexpr double kMaxExponent = 4.6052;

}  // namespace

void check_pose_target_options(const PoseTargetOptions& o) {
  TCV_CHECK(o.stride >= 1, "[pose targets] stride must be at least 1, got ", o.stride);
  TCV_CHECK(o.sigma > 0 && std::isfinite(o.sigma), "[pose targets] sigma must be positive, got ",
            o.sigma);
  TCV_CHECK(o.limb_width > 0 && std::isfinite(o.limb_width),
            "[pose targets] limb_width must be positive, got ", o.limb_width);
}

std::array<Keypoint, kOpenposeKeypoints> openpose_keypoints(const PosePerson& p) {
  std::array<Keypoint, kOpenposeKeypoints> out{};
  for (size_t k = 0; k < static_cast<size_t>(kCocoKeypoints); ++k)
    out[static_cast<size_t>(coco_to_openpose()[k])] = p.keypoints[k];
  // The neck set at load time and moved with the sample; else (a person
  // built by hand, or both shoulders still there: the same point) derived.
  out[kOpenposeNeck] = p.neck.labelled() ? p.neck : shoulder_midpoint(p.keypoints);
  return out;
}

void make_pose_targets(const std::vector<PosePerson>& people, const Tensor& mask, int64_t H,
                       int64_t W, const PoseTargetOptions& o, float* heat, float* paf,
                       float* mask_out) {
  check_pose_target_options(o);
  const int64_t s = o.stride, h = H / s, w = W / s, hw = h * w;
  const auto fs = static_cast<double>(s);
  std::fill_n(heat, kOpenposeHeatmaps * hw, 0.0f);
  std::fill_n(paf, kOpenposePafs * hw, 0.0f);

  std::vector<std::array<Keypoint, kOpenposeKeypoints>> kps;
  kps.reserve(people.size());
  for (const PosePerson& p : people) kps.push_back(openpose_keypoints(p));

  // Heatmaps: only cells within the cut radius are visited.
  const double radius = o.sigma * std::sqrt(2.0 * kMaxExponent);
  const double inv = 1.0 / (2.0 * o.sigma * o.sigma);
  for (const auto& person : kps)
    for (int64_t k = 0; k < kOpenposeKeypoints; ++k) {
      const Keypoint& q = person[static_cast<size_t>(k)];
      if (!q.labelled()) continue;
      float* hk = heat + k * hw;
      const auto i0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor((q.y - radius) / fs)));
      const auto i1 =
          std::min<int64_t>(h - 1, static_cast<int64_t>(std::ceil((q.y + radius) / fs)));
      const auto j0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor((q.x - radius) / fs)));
      const auto j1 =
          std::min<int64_t>(w - 1, static_cast<int64_t>(std::ceil((q.x + radius) / fs)));
      for (int64_t i = i0; i <= i1; ++i) {
        const double dy = (static_cast<double>(i) + 0.5) * fs - q.y;
        for (int64_t j = j0; j <= j1; ++j) {
          const double dx = (static_cast<double>(j) + 0.5) * fs - q.x;
          const double e = (dx * dx + dy * dy) * inv;
          if (e > kMaxExponent) continue;
          const auto v = static_cast<float>(std::exp(-e));
          float& t = hk[i * w + j];
          t = std::max(t, v);
        }
      }
    }
  float* bg = heat + kOpenposeKeypoints * hw;
  for (int64_t c = 0; c < hw; ++c) {
    float m = 0.0f;
    for (int64_t k = 0; k < kOpenposeKeypoints; ++k) m = std::max(m, heat[k * hw + c]);
    bg[c] = 1.0f - m;
  }

  // PAFs: sums and counts, then means.
  std::vector<int32_t> count(static_cast<size_t>(hw));
  const double theta = o.limb_width;
  for (int64_t l = 0; l < kOpenposeLimbs; ++l) {
    const auto [ia, ib] = openpose_limbs()[static_cast<size_t>(l)];
    float* px = paf + 2 * l * hw;
    float* py = px + hw;
    std::fill(count.begin(), count.end(), 0);
    bool any = false;
    for (const auto& person : kps) {
      const Keypoint& A = person[static_cast<size_t>(ia)];
      const Keypoint& B = person[static_cast<size_t>(ib)];
      if (!A.labelled() || !B.labelled()) continue;
      const double ax = A.x / fs - 0.5, ay = A.y / fs - 0.5;
      const double bx = B.x / fs - 0.5, by = B.y / fs - 0.5;
      double ux = bx - ax, uy = by - ay;
      const double norm = std::sqrt(ux * ux + uy * uy);
      if (norm == 0) continue;
      ux /= norm;
      uy /= norm;
      const auto j0 =
          std::max<int64_t>(0, static_cast<int64_t>(std::nearbyint(std::min(ax, bx) - theta)));
      const auto j1 =
          std::min<int64_t>(w, static_cast<int64_t>(std::nearbyint(std::max(ax, bx) + theta)));
      const auto i0 =
          std::max<int64_t>(0, static_cast<int64_t>(std::nearbyint(std::min(ay, by) - theta)));
      const auto i1 =
          std::min<int64_t>(h, static_cast<int64_t>(std::nearbyint(std::max(ay, by) + theta)));
      const auto fux = static_cast<float>(ux), fuy = static_cast<float>(uy);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const double d =
              std::fabs(ux * (static_cast<double>(i) - ay) - uy * (static_cast<double>(j) - ax));
          if (d >= theta) continue;
          px[i * w + j] += fux;
          py[i * w + j] += fuy;
          ++count[static_cast<size_t>(i * w + j)];
          any = true;
        }
    }
    if (!any) continue;
    for (int64_t c = 0; c < hw; ++c)
      if (count[static_cast<size_t>(c)] > 1) {
        const float n = static_cast<float>(count[static_cast<size_t>(c)]);
        px[c] /= n;
        py[c] /= n;
      }
  }

  if (!mask.defined()) {
    std::fill_n(mask_out, hw, 1.0f);
    return;
  }
  TCV_CHECK(mask.dtype() == DType::u8 && mask.dim() == 2 && mask.size(0) == H && mask.size(1) == W,
            "[pose targets] the loss mask must be u8 (", H, ", ", W, "), got ",
            dtype_name(mask.dtype()), " ", mask.shape_str());
  const Tensor m = mask.contiguous();
  const uint8_t* mp = m.data<uint8_t>();
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j)
      mask_out[i * w + j] = mp[(i * s + s / 2) * W + j * s + s / 2] ? 1.0f : 0.0f;
}

PoseTargets make_pose_targets(const std::vector<PosePerson>& people, const Tensor& mask, int64_t H,
                              int64_t W, const PoseTargetOptions& o) {
  check_pose_target_options(o);
  const int64_t h = H / o.stride, w = W / o.stride;
  PoseTargets t;
  t.heatmaps = empty({kOpenposeHeatmaps, h, w});
  t.pafs = empty({kOpenposePafs, h, w});
  t.mask = empty({1, h, w});
  make_pose_targets(people, mask, H, W, o, t.heatmaps.data<float>(), t.pafs.data<float>(),
                    t.mask.data<float>());
  return t;
}

}  // namespace tcv::data
