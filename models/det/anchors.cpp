#include "models/det/anchors.h"

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

Tensor default_boxes(const AnchorOptions& o,
                     const std::vector<std::array<int64_t, 2>>& feature_sizes,
                     std::array<int64_t, 2> image_hw) {
  const size_t maps = o.aspect_ratios.size();
  TCV_CHECK(feature_sizes.size() == maps, "[anchors] ", feature_sizes.size(),
            " feature maps but anchor.aspect_ratio_list has ", maps, " entries");
  TCV_CHECK(o.steps.empty() || o.steps.size() == maps, "[anchors] network.stride_list has ",
            o.steps.size(), " entries for ", maps, " feature maps");
  const std::vector<double> scales = anchor_scales(o);
  TCV_CHECK(scales.size() >= maps + 1, "[anchors] ", maps, " feature maps need ", maps + 1,
            " scales (anchor.cur_anchor_sizes), got ", scales.size());
  for (size_t k = 0; k < maps; ++k)
    for (double r : o.aspect_ratios[k])
      TCV_CHECK(r > 0, "[anchors] aspect ratio ", r, " of map ", k, " must be positive");
  for (int64_t s : o.steps) TCV_CHECK(s > 0, "[anchors] step ", s, " must be positive");

  std::vector<float> out;
  const float img_w = static_cast<float>(image_hw[1]), img_h = static_cast<float>(image_hw[0]);
  for (size_t k = 0; k < maps; ++k) {
    // (w, h) pairs in double, then f32 (torch.as_tensor), then clamped to [0, 1].
    std::vector<std::array<float, 2>> wh;
    const double sk = scales[k], sk1 = std::sqrt(scales[k] * scales[k + 1]);
    wh.push_back({static_cast<float>(sk), static_cast<float>(sk)});
    wh.push_back({static_cast<float>(sk1), static_cast<float>(sk1)});
    for (double r : o.aspect_ratios[k]) {
      const double w = sk * std::sqrt(r), h = sk / std::sqrt(r);
      wh.push_back({static_cast<float>(w), static_cast<float>(h)});
      wh.push_back({static_cast<float>(h), static_cast<float>(w)});
    }
    if (o.clip == AnchorClip::clip)
      for (auto& p : wh)
        for (float& v : p) v = std::min(std::max(v, 0.0f), 1.0f);
    const int64_t fh = feature_sizes[k][0], fw = feature_sizes[k][1];
    // Centres (i + 0.5) / (image / step), computed in f32 as torch does.
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
        for (const auto& p : wh) {
          const float hw = 0.5f * p[0], hh = 0.5f * p[1];
          out.push_back((cx - hw) * img_w);
          out.push_back((cy - hh) * img_h);
          out.push_back((cx + hw) * img_w);
          out.push_back((cy + hh) * img_h);
        }
      }
  }
  const int64_t a = static_cast<int64_t>(out.size() / 4);
  return from_vector<float>(out, {a, 4});
}

}  // namespace tcv::models::det
