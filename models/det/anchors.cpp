#include "models/det/anchors.h"

#include <algorithm>
#include <cmath>

namespace tcv::models::det {

AnchorOptions ssd300_anchor_options() {
  return {.aspect_ratios = {{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}},
          .scales = {0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05},
          .steps = {8, 16, 32, 64, 100, 300}};
}

AnchorOptions ssd512_anchor_options() {
  std::vector<double> scales;
  for (double px : {35.0, 76.0, 153.0, 230.0, 307.0, 384.0, 460.0, 537.0})
    scales.push_back(px / 512.0);
  return {.aspect_ratios = {{2}, {2, 3}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}},
          .scales = scales,
          .steps = {8, 16, 32, 64, 128, 256, 512}};
}

int64_t anchors_per_location(const AnchorOptions& o, size_t k) {
  TCV_CHECK(k < o.aspect_ratios.size(), "[anchors] feature map ", k, " of ", o.aspect_ratios.size(),
            " (anchor.aspect_ratio_list has one entry per map)");
  return 2 + 2 * static_cast<int64_t>(o.aspect_ratios[k].size());
}

std::vector<double> anchor_scales(const AnchorOptions& o) {
  if (!o.scales.empty()) return o.scales;
  const size_t maps = o.aspect_ratios.size();
  if (maps <= 1) return {o.min_ratio, o.max_ratio};
  std::vector<double> s;
  for (size_t k = 0; k < maps; ++k)
    s.push_back(o.min_ratio + (o.max_ratio - o.min_ratio) * static_cast<double>(k) /
                                  (static_cast<double>(maps) - 1.0));
  s.push_back(1.0);
  return s;
}

namespace {

// One default box in centre form, as the reference holds it (f32).
struct CentreBox {
  float cx, cy, w, h;
};

// (w, h) per location of map k, in the reference's order: the square of side
// s_k, the square of side sqrt(s_k s_k+1), then for each ratio r the box
// s_k sqrt(r) x s_k / sqrt(r) and its transpose. Computed in double and
// rounded to f32 (torch.as_tensor / torch.FloatTensor of Python floats).
std::vector<std::array<float, 2>> box_sides(double sk, double sk1,
                                            const std::vector<double>& ratios, bool clip) {
  std::vector<std::array<float, 2>> wh;
  const double extra = std::sqrt(sk * sk1);
  wh.push_back({static_cast<float>(sk), static_cast<float>(sk)});
  wh.push_back({static_cast<float>(extra), static_cast<float>(extra)});
  for (double r : ratios) {
    const double w = sk * std::sqrt(r), h = sk / std::sqrt(r);
    wh.push_back({static_cast<float>(w), static_cast<float>(h)});
    wh.push_back({static_cast<float>(h), static_cast<float>(w)});
  }
  if (clip)
    for (auto& p : wh)
      for (float& v : p) v = std::min(std::max(v, 0.0f), 1.0f);
  return wh;
}

// torchvision: fractions of the image, centres (i + 0.5) / f_k in f32.
void torchvision_boxes(const AnchorOptions& o, size_t k, std::array<int64_t, 2> fsize,
                       std::array<int64_t, 2> image_hw, const std::vector<double>& scales,
                       std::vector<CentreBox>& out) {
  const auto wh =
      box_sides(scales[k], scales[k + 1], o.aspect_ratios[k], o.clip == AnchorClip::clip);
  const int64_t fh = fsize[0], fw = fsize[1];
  const float fx = static_cast<float>(o.steps.empty() ? static_cast<double>(fw)
                                                      : static_cast<double>(image_hw[1]) /
                                                            static_cast<double>(o.steps[k]));
  const float fy = static_cast<float>(o.steps.empty() ? static_cast<double>(fh)
                                                      : static_cast<double>(image_hw[0]) /
                                                            static_cast<double>(o.steps[k]));
  for (int64_t y = 0; y < fh; ++y)
    for (int64_t x = 0; x < fw; ++x) {
      const float cx = (static_cast<float>(x) + 0.5f) / fx;
      const float cy = (static_cast<float>(y) + 0.5f) / fy;
      for (const auto& p : wh) out.push_back({cx, cy, p[0], p[1]});
    }
}

// TorchCV: pixels; base offset stride / 2 (f64, then f32) plus the grid
// j * stride (numpy's arange in f64, then f32), added in f32.
void torchcv_boxes(const AnchorOptions& o, size_t k, std::array<int64_t, 2> fsize,
                   std::array<int64_t, 2> image_hw, std::vector<CentreBox>& out) {
  const auto wh = box_sides(o.sizes_px[k], o.sizes_px[k + 1], o.aspect_ratios[k], false);
  const int64_t fh = fsize[0], fw = fsize[1];
  const double stride_w = static_cast<double>(image_hw[1]) / static_cast<double>(fw);
  const double stride_h = static_cast<double>(image_hw[0]) / static_cast<double>(fh);
  const float off_w = static_cast<float>(0.5 * stride_w),
              off_h = static_cast<float>(0.5 * stride_h);
  for (int64_t y = 0; y < fh; ++y)
    for (int64_t x = 0; x < fw; ++x) {
      const float gx = static_cast<float>(static_cast<double>(x) * stride_w);
      const float gy = static_cast<float>(static_cast<double>(y) * stride_h);
      for (const auto& p : wh) out.push_back({off_w + gx, off_h + gy, p[0], p[1]});
    }
}

}  // namespace

Tensor default_boxes(const AnchorOptions& o,
                     const std::vector<std::array<int64_t, 2>>& feature_sizes,
                     std::array<int64_t, 2> image_hw, DType dtype) {
  const size_t maps = o.aspect_ratios.size();
  TCV_CHECK(dtype == DType::f32 || dtype == DType::f64, "[anchors] default boxes are f32 or f64, ",
            "got ", dtype_name(dtype));
  TCV_CHECK(feature_sizes.size() == maps, "[anchors] ", feature_sizes.size(),
            " feature maps but anchor.aspect_ratio_list has ", maps, " entries");
  for (size_t k = 0; k < maps; ++k)
    for (double r : o.aspect_ratios[k])
      TCV_CHECK(r > 0, "[anchors] aspect ratio ", r, " of map ", k, " must be positive");
  std::vector<CentreBox> boxes;
  const bool torchcv = o.layout == AnchorLayout::torchcv;
  if (torchcv) {
    TCV_CHECK(o.sizes_px.size() >= maps + 1, "[anchors] ", maps, " feature maps need ", maps + 1,
              " sizes (anchor.cur_anchor_sizes), got ", o.sizes_px.size());
    for (double s : o.sizes_px) TCV_CHECK(s > 0, "[anchors] size ", s, " must be positive");
    for (size_t k = 0; k < maps; ++k) torchcv_boxes(o, k, feature_sizes[k], image_hw, boxes);
  } else {
    TCV_CHECK(o.steps.empty() || o.steps.size() == maps, "[anchors] network.stride_list has ",
              o.steps.size(), " entries for ", maps, " feature maps");
    for (int64_t s : o.steps) TCV_CHECK(s > 0, "[anchors] step ", s, " must be positive");
    const std::vector<double> scales = anchor_scales(o);
    TCV_CHECK(scales.size() >= maps + 1, "[anchors] ", maps, " feature maps need ", maps + 1,
              " scales (anchor.cur_anchor_sizes), got ", scales.size());
    for (size_t k = 0; k < maps; ++k)
      torchvision_boxes(o, k, feature_sizes[k], image_hw, scales, boxes);
  }
  // Corners: torchvision (c -/+ 0.5 wh) * image size on fractions; TorchCV
  // c -/+ wh / 2 on pixels. Both in `dtype`.
  const auto a = static_cast<int64_t>(boxes.size());
  auto corners = [&](auto zero) {
    using T = decltype(zero);
    const T sx = torchcv ? T(1) : static_cast<T>(image_hw[1]);
    const T sy = torchcv ? T(1) : static_cast<T>(image_hw[0]);
    std::vector<T> out;
    out.reserve(boxes.size() * 4);
    for (const CentreBox& b : boxes) {
      const T cx = b.cx, cy = b.cy, hw = T(0.5) * T(b.w), hh = T(0.5) * T(b.h);
      out.push_back((cx - hw) * sx);
      out.push_back((cy - hh) * sy);
      out.push_back((cx + hw) * sx);
      out.push_back((cy + hh) * sy);
    }
    return from_vector<T>(out, {a, 4});
  };
  return dtype == DType::f64 ? corners(0.0) : corners(0.0f);
}

}  // namespace tcv::models::det
