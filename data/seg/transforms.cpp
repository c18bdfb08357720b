#include "data/seg/transforms.h"

#include <algorithm>
#include <cmath>

namespace tcv::data {

namespace {

void check_sample(const SegSample& s, const char* op) {
  TCV_CHECK(s.image.defined() && s.image.dtype() == DType::u8 && s.image.dim() == 3, "[", op,
            "] expects a u8 (C, H, W) image, got ",
            s.image.defined() ? dtype_name(s.image.dtype()) : "undefined", " ",
            s.image.defined() ? s.image.shape_str() : "");
  if (s.label.defined())
    TCV_CHECK(s.label.dtype() == DType::u8 && s.label.dim() == 2, "[", op,
              "] expects a u8 (H, W) label map, got ", dtype_name(s.label.dtype()), " ",
              s.label.shape_str());
}

// Whether the label map is aligned with the image (the same height and width).
bool aligned(const SegSample& s) {
  return s.label.defined() && s.label.size(0) == s.image.size(1) &&
         s.label.size(1) == s.image.size(2);
}

// Source index of each output index for a nearest-neighbour resize of `in` to `out`.
std::vector<int64_t> nearest_index(int64_t in, int64_t out) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o)
    idx[static_cast<size_t>(o)] = std::min((2 * o + 1) * in / (2 * out), in - 1);
  return idx;
}

int64_t scaled_side(int64_t side, double factor) {
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(side) * factor + 0.5));
}

}  // namespace

// ---- deterministic ops ------------------------------------------------------------------

Tensor resize_labels(const Tensor& label, int64_t h, int64_t w) {
  TCV_CHECK(label.defined() && label.dtype() == DType::u8 && label.dim() == 2,
            "[resize_labels] expects a u8 (H, W) label map");
  TCV_CHECK(h > 0 && w > 0, "[resize_labels] output size must be positive, got (", h, ", ", w, ")");
  const Tensor src = label.contiguous();
  const int64_t H = src.size(0), W = src.size(1);
  if (H == h && W == w) return src;
  const auto ys = nearest_index(H, h), xs = nearest_index(W, w);
  Tensor out = empty({h, w}, {.dtype = DType::u8});
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = s + ys[static_cast<size_t>(y)] * W;
    for (int64_t x = 0; x < w; ++x) d[y * w + x] = row[xs[static_cast<size_t>(x)]];
  }
  return out;
}

void seg_resize(SegSample& s, int64_t h, int64_t w) {
  check_sample(s, "seg_resize");
  const bool with_label = aligned(s);
  s.image = resize(s.image, h, w, Antialias::off);
  if (with_label) s.label = resize_labels(s.label, h, w);
}

void seg_crop(SegSample& s, int64_t top, int64_t left, int64_t h, int64_t w,
              const std::array<uint8_t, 3>& fill) {
  check_sample(s, "seg_crop");
  TCV_CHECK(h > 0 && w > 0, "[seg_crop] crop size must be positive, got (", h, ", ", w, ")");
  const Tensor img = s.image.contiguous();
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  TCV_CHECK(C <= 3, "[seg_crop] expects at most 3 channels, got ", C);
  const bool with_label = aligned(s);
  // The part of the window inside the image: rows [y0, y1), columns [x0, x1) of the image.
  const int64_t y0 = std::clamp<int64_t>(top, 0, H), y1 = std::clamp<int64_t>(top + h, 0, H);
  const int64_t x0 = std::clamp<int64_t>(left, 0, W), x1 = std::clamp<int64_t>(left + w, 0, W);
  Tensor out = empty({C, h, w}, {.dtype = DType::u8});
  for (int64_t c = 0; c < C; ++c) {
    uint8_t* d = out.data<uint8_t>() + c * h * w;
    std::fill_n(d, h * w, fill[static_cast<size_t>(c)]);
    const uint8_t* p = img.data<uint8_t>() + c * H * W;
    for (int64_t y = y0; y < y1; ++y)
      std::copy(p + y * W + x0, p + y * W + x1, d + (y - top) * w + (x0 - left));
  }
  if (with_label) {
    const Tensor lab = s.label.contiguous();
    Tensor l = full({h, w}, kIgnoreLabel, {.dtype = DType::u8});
    const uint8_t* p = lab.data<uint8_t>();
    uint8_t* d = l.data<uint8_t>();
    for (int64_t y = y0; y < y1; ++y)
      std::copy(p + y * W + x0, p + y * W + x1, d + (y - top) * w + (x0 - left));
    s.label = l;
  }
  s.image = out;
}

void seg_hflip(SegSample& s) {
  check_sample(s, "seg_hflip");
  const bool with_label = aligned(s);
  s.image = hflip(s.image);
  if (with_label) s.label = hflip(s.label).squeeze(0);
}

std::array<int64_t, 2> fit_size(int64_t H, int64_t W, std::array<int64_t, 2> scale) {
  TCV_CHECK(H > 0 && W > 0 && scale[0] > 0 && scale[1] > 0, "[fit_size] sizes must be positive");
  const double lo = static_cast<double>(std::max(scale[0], scale[1]));
  const double sh = static_cast<double>(std::min(scale[0], scale[1]));
  const double f =
      std::min(lo / static_cast<double>(std::max(H, W)), sh / static_cast<double>(std::min(H, W)));
  return {scaled_side(H, f), scaled_side(W, f)};
}

// ---- photometric ops ----------------------------------------------------------------------

Tensor scale_shift_pixels(const Tensor& image, double alpha, double beta) {
  TCV_CHECK(image.dtype() == DType::u8, "[scale_shift_pixels] expects a u8 image");
  const Tensor src = image.contiguous();
  Tensor out = empty(src.shape(), {.dtype = DType::u8});
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  const auto a = static_cast<float>(alpha), b = static_cast<float>(beta);
  for (int64_t k = 0; k < src.numel(); ++k)
    d[k] = static_cast<uint8_t>(std::clamp(static_cast<float>(s[k]) * a + b, 0.0f, 255.0f));
  return out;
}

Tensor adjust_hsv(const Tensor& image, double saturation, double hue_degrees) {
  TCV_CHECK(image.dtype() == DType::u8 && image.dim() == 3 && image.size(0) == 3,
            "[adjust_hsv] expects a u8 (3, H, W) image, got ", dtype_name(image.dtype()), " ",
            image.shape_str());
  const Tensor src = image.contiguous();
  const int64_t HW = src.size(1) * src.size(2);
  Tensor out = empty(src.shape(), {.dtype = DType::u8});
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  const auto sat = static_cast<float>(saturation);
  float dh = static_cast<float>(std::fmod(hue_degrees, 360.0));
  if (dh < 0) dh += 360.0f;
  for (int64_t k = 0; k < HW; ++k) {
    const float r = s[k], g = s[HW + k], b = s[2 * HW + k];
    const float v = std::max({r, g, b}), mn = std::min({r, g, b}), delta = v - mn;
    float h = 0.0f;
    if (delta > 0) {
      if (v == r)
        h = 60.0f * (g - b) / delta;
      else if (v == g)
        h = 120.0f + 60.0f * (b - r) / delta;
      else
        h = 240.0f + 60.0f * (r - g) / delta;
    }
    float sv = v > 0 ? delta / v : 0.0f;
    sv = std::clamp(sv * sat, 0.0f, 1.0f);
    h += dh;
    if (h < 0) h += 360.0f;
    if (h >= 360.0f) h -= 360.0f;
    // Back to RGB.
    const float c = v * sv, hp = h / 60.0f;
    const float x = c * (1.0f - std::abs(std::fmod(hp, 2.0f) - 1.0f)), m = v - c;
    float rr = 0, gg = 0, bb = 0;
    switch (std::min(static_cast<int>(hp), 5)) {
      case 0:
        rr = c, gg = x;
        break;
      case 1:
        rr = x, gg = c;
        break;
      case 2:
        gg = c, bb = x;
        break;
      case 3:
        gg = x, bb = c;
        break;
      case 4:
        rr = x, bb = c;
        break;
      default:
        rr = c, bb = x;
        break;
    }
    auto to_u8 = [](float f) {
      return static_cast<uint8_t>(std::clamp(std::nearbyint(f), 0.0f, 255.0f));
    };
    d[k] = to_u8(rr + m);
    d[HW + k] = to_u8(gg + m);
    d[2 * HW + k] = to_u8(bb + m);
  }
  return out;
}

// ---- random transforms -----------------------------------------------------------------

void RandomScale::operator()(SegSample& s, Rng& rng) const {
  check_sample(s, "RandomScale");
  TCV_CHECK(ratio[0] > 0 && ratio[0] <= ratio[1], "[RandomScale] ratio must be a range (lo, hi) ",
            "with 0 < lo <= hi, got (", ratio[0], ", ", ratio[1], ")");
  const double r = rng.uniform(ratio[0], ratio[1]);
  const int64_t H = s.image.size(1), W = s.image.size(2);
  std::array<int64_t, 2> hw;
  if (base[0] > 0 && base[1] > 0) {
    // mmsegmentation: the target scale is base * ratio, then fitted keeping the aspect.
    const std::array<int64_t, 2> target{static_cast<int64_t>(static_cast<double>(base[0]) * r),
                                        static_cast<int64_t>(static_cast<double>(base[1]) * r)};
    hw = fit_size(H, W, {std::max<int64_t>(target[0], 1), std::max<int64_t>(target[1], 1)});
  } else {
    hw = {scaled_side(H, r), scaled_side(W, r)};
  }
  seg_resize(s, hw[0], hw[1]);
}

void RandomCropSeg::operator()(SegSample& s, Rng& rng) const {
  check_sample(s, "RandomCropSeg");
  const int64_t ch = size[0], cw = size[1];
  TCV_CHECK(ch > 0 && cw > 0, "[RandomCropSeg] crop size must be positive, got (", ch, ", ", cw,
            ")");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  auto draw = [&] {
    const int64_t top = rng.randint(0, std::max<int64_t>(H - ch, 0) + 1);
    const int64_t left = rng.randint(0, std::max<int64_t>(W - cw, 0) + 1);
    return std::array<int64_t, 2>{top, left};
  };
  std::array<int64_t, 2> at = draw();
  if (cat_max_ratio < 1.0 && aligned(s)) {
    const Tensor lab = s.label.contiguous();
    const uint8_t* p = lab.data<uint8_t>();
    for (int attempt = 0; attempt < 10; ++attempt) {
      std::array<int64_t, 256> count{};
      for (int64_t y = at[0]; y < std::min(at[0] + ch, H); ++y)
        for (int64_t x = at[1]; x < std::min(at[1] + cw, W); ++x) ++count[p[y * W + x]];
      int64_t classes = 0, most = 0, total = 0;
      for (int v = 0; v < 255; ++v) {
        classes += count[static_cast<size_t>(v)] > 0;
        most = std::max(most, count[static_cast<size_t>(v)]);
        total += count[static_cast<size_t>(v)];
      }
      if (classes > 1 && static_cast<double>(most) < cat_max_ratio * static_cast<double>(total))
        break;
      at = draw();
    }
  }
  seg_crop(s, at[0], at[1], ch, cw, fill);
}

void RandomFlipSeg::operator()(SegSample& s, Rng& rng) const {
  if (rng.uniform() < p) seg_hflip(s);
}

void PhotoMetricDistortion::operator()(SegSample& s, Rng& rng) const {
  check_sample(s, "PhotoMetricDistortion");
  auto coin = [&] { return rng.randint(0, 2) == 1; };
  Tensor img = s.image;
  if (coin()) img = scale_shift_pixels(img, 1.0, rng.uniform(-brightness_delta, brightness_delta));
  const bool contrast_first = coin();
  auto do_contrast = [&] {
    if (coin()) img = scale_shift_pixels(img, rng.uniform(contrast[0], contrast[1]), 0.0);
  };
  if (contrast_first) do_contrast();
  double sat = 1.0, hue = 0.0;
  if (coin()) sat = rng.uniform(saturation[0], saturation[1]);
  if (coin()) hue = 2.0 * static_cast<double>(rng.randint(-hue_delta, hue_delta + 1));
  if (img.size(0) == 3 && (sat != 1.0 || hue != 0.0)) img = adjust_hsv(img, sat, hue);
  if (!contrast_first) do_contrast();
  s.image = img;
}

// ---- pipelines --------------------------------------------------------------------------------

SegTransform seg_train_transform(const SegTrainAugOptions& o) {
  SegCompose c;
  if (!(o.scale_ratio[0] == 1.0 && o.scale_ratio[1] == 1.0 && o.base_size[0] == 0))
    c.add(RandomScale{.ratio = o.scale_ratio, .base = o.base_size});
  if (o.crop[0] > 0 && o.crop[1] > 0)
    c.add(RandomCropSeg{.size = o.crop, .cat_max_ratio = o.cat_max_ratio, .fill = o.fill});
  if (o.flip_prob > 0) c.add(RandomFlipSeg{.p = o.flip_prob});
  if (o.photometric == Photometric::on) c.add(PhotoMetricDistortion{});
  return c;
}

SegTransform seg_eval_transform(const SegEvalOptions& o) {
  return [o](SegSample& s, Rng&) {
    check_sample(s, "seg_eval_transform");
    const int64_t H = s.image.size(1), W = s.image.size(2);
    std::array<int64_t, 2> hw{H, W};
    if (o.size[0] > 0 && o.size[1] > 0)
      hw = o.size;
    else if (o.fit[0] > 0 && o.fit[1] > 0)
      hw = fit_size(H, W, o.fit);
    if (hw[0] == H && hw[1] == W) return;
    const Tensor label = s.label;
    seg_resize(s, hw[0], hw[1]);
    if (o.labels == EvalLabels::keep) s.label = label;
  };
}

std::array<uint8_t, 3> mean_fill(const std::vector<double>& mean, double div_value) {
  TCV_CHECK(mean.size() == 1 || mean.size() == 3, "[mean_fill] expects 1 or 3 mean values, got ",
            mean.size());
  std::array<uint8_t, 3> out{};
  for (size_t c = 0; c < 3; ++c) {
    const double v = mean[mean.size() == 1 ? 0 : c] * div_value;
    out[c] = static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0));
  }
  return out;
}

}  // namespace tcv::data
