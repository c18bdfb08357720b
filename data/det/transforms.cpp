#include "data/det/transforms.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace tcv::data {

namespace {

// The sample's image as a contiguous u8 (3, H, W) tensor it owns alone.
uint8_t* image_u8(DetSample& s, const char* op) {
  TCV_CHECK(s.image.defined() && s.image.dtype() == DType::u8 && s.image.dim() == 3 &&
                s.image.size(0) == 3,
            "[", op, "] expects a u8 (3, H, W) image, got ",
            s.image.defined() ? dtype_name(s.image.dtype()) : "undefined", " ",
            s.image.defined() ? s.image.shape_str() : "");
  if (!s.image.is_contiguous()) s.image = s.image.contiguous();
  return s.image.data<uint8_t>();
}

uint8_t* image_u8(Tensor& image, const char* op) {
  TCV_CHECK(image.defined() && image.dtype() == DType::u8 && image.dim() == 3 && image.size(0) == 3,
            "[", op, "] expects a u8 (3, H, W) image, got ",
            image.defined() ? dtype_name(image.dtype()) : "undefined", " ",
            image.defined() ? image.shape_str() : "");
  if (!image.is_contiguous()) image = image.contiguous();
  return image.data<uint8_t>();
}

void apply_lut(Tensor& image, const std::array<uint8_t, 256>& lut, const char* op) {
  uint8_t* p = image_u8(image, op);
  const int64_t n = image.numel();
  for (int64_t k = 0; k < n; ++k) p[k] = lut[p[k]];
}

// Truncation toward zero after clipping to [0, 255], as numpy's astype(uint8) on clipped floats.
inline uint8_t clip_trunc(float v) {
  return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
}

// OpenCV's float RGB <-> HSV (H in degrees, S in [0, 1], V as the input).
inline void rgb_to_hsv(float r, float g, float b, float& h, float& s, float& v) {
  v = std::max({r, g, b});
  const float vmin = std::min({r, g, b});
  float diff = v - vmin;
  s = diff / (std::fabs(v) + FLT_EPSILON);
  diff = static_cast<float>(60.0 / (diff + FLT_EPSILON));
  if (v == r)
    h = (g - b) * diff;
  else if (v == g)
    h = (b - r) * diff + 120.0f;
  else
    h = (r - g) * diff + 240.0f;
  if (h < 0) h += 360.0f;
}

inline void hsv_to_rgb(float h, float s, float v, float& r, float& g, float& b) {
  if (s == 0) {
    r = g = b = v;
    return;
  }
  static const int sector_data[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                        {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
  h *= 6.0f / 360.0f;
  while (h < 0) h += 6;
  while (h >= 6) h -= 6;
  int sector = static_cast<int>(std::floor(h));
  h -= static_cast<float>(sector);
  if (sector < 0 || sector >= 6) {
    sector = 0;
    h = 0;
  }
  const float tab[4] = {v, v * (1.0f - s), v * (1.0f - s * h), v * (1.0f - s * (1.0f - h))};
  b = tab[sector_data[sector][0]];
  g = tab[sector_data[sector][1]];
  r = tab[sector_data[sector][2]];
}

template <typename F>
void map_hsv(Tensor& image, const char* op, F&& f) {
  uint8_t* p = image_u8(image, op);
  const int64_t HW = image.size(1) * image.size(2);
  for (int64_t k = 0; k < HW; ++k) {
    float h, s, v;
    rgb_to_hsv(p[k], p[HW + k], p[2 * HW + k], h, s, v);
    f(h, s);
    float r, g, b;
    hsv_to_rgb(h, s, v, r, g, b);
    p[k] = clip_trunc(r);
    p[HW + k] = clip_trunc(g);
    p[2 * HW + k] = clip_trunc(b);
  }
}

}  // namespace

// ---- deterministic ops ------------------------------------------------------------

void det_hflip(DetSample& s) {
  s.image = hflip(s.image);
  const auto W = static_cast<double>(s.image.size(2));
  for (Box& b : s.target.boxes) b = {W - b[2], b[1], W - b[0], b[3]};
}

void det_expand(DetSample& s, int64_t top, int64_t left, int64_t height, int64_t width,
                const std::array<uint8_t, 3>& fill) {
  const uint8_t* src = image_u8(s, "det_expand");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  TCV_CHECK(top >= 0 && left >= 0 && top + H <= height && left + W <= width, "[det_expand] a ", W,
            "x", H, " image at (left ", left, ", top ", top, ") does not fit a ", width, "x",
            height, " canvas");
  Tensor out = empty({3, height, width}, {.dtype = DType::u8});
  uint8_t* d = out.data<uint8_t>();
  for (int64_t c = 0; c < 3; ++c) {
    uint8_t* plane = d + c * height * width;
    std::fill_n(plane, top * width, fill[static_cast<size_t>(c)]);
    for (int64_t y = 0; y < H; ++y) {
      uint8_t* row = plane + (top + y) * width;
      std::fill_n(row, left, fill[static_cast<size_t>(c)]);
      std::copy_n(src + (c * H + y) * W, W, row + left);
      std::fill_n(row + left + W, width - left - W, fill[static_cast<size_t>(c)]);
    }
    std::fill_n(plane + (top + H) * width, (height - top - H) * width,
                fill[static_cast<size_t>(c)]);
  }
  s.image = out;
  const auto dx = static_cast<double>(left), dy = static_cast<double>(top);
  for (Box& b : s.target.boxes) b = {b[0] + dx, b[1] + dy, b[2] + dx, b[3] + dy};
}

void det_crop(DetSample& s, int64_t x1, int64_t y1, int64_t x2, int64_t y2) {
  image_u8(s, "det_crop");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  TCV_CHECK(x1 >= 0 && y1 >= 0 && x1 < x2 && y1 < y2 && x2 <= W && y2 <= H, "[det_crop] window [",
            x1, ", ", y1, ", ", x2, ", ", y2, ") is empty or outside the ", W, "x", H, " image");
  s.image = s.image.narrow(1, y1, y2 - y1).narrow(2, x1, x2 - x1).contiguous();
  DetTarget& t = s.target;
  std::vector<uint8_t> keep(t.boxes.size());
  const auto fx1 = static_cast<double>(x1), fy1 = static_cast<double>(y1),
             fx2 = static_cast<double>(x2), fy2 = static_cast<double>(y2);
  for (size_t k = 0; k < t.boxes.size(); ++k) {
    Box& b = t.boxes[k];
    const double cx = 0.5 * (b[0] + b[2]), cy = 0.5 * (b[1] + b[3]);
    keep[k] = fx1 < cx && cx < fx2 && fy1 < cy && cy < fy2;
    b = {std::max(b[0], fx1) - fx1, std::max(b[1], fy1) - fy1, std::min(b[2], fx2) - fx1,
         std::min(b[3], fy2) - fy1};
  }
  t.filter(keep);
}

void det_resize(DetSample& s, int64_t height, int64_t width) {
  image_u8(s, "det_resize");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  s.image = resize(s.image, height, width, Antialias::off);
  const double sx = static_cast<double>(width) / static_cast<double>(W);
  const double sy = static_cast<double>(height) / static_cast<double>(H);
  for (Box& b : s.target.boxes) b = {b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy};
}

void det_drop_objects(DetSample& s, bool keep_difficult, bool keep_crowd) {
  DetTarget& t = s.target;
  std::vector<uint8_t> keep(t.boxes.size());
  for (size_t k = 0; k < keep.size(); ++k) {
    const Box& b = t.boxes[k];
    keep[k] = (keep_difficult || !t.difficult[k]) && (keep_crowd || !t.iscrowd[k]) && b[2] > b[0] &&
              b[3] > b[1];
  }
  t.filter(keep);
}

std::vector<double> box_iou_with(const std::vector<Box>& boxes, const Box& r) {
  std::vector<double> out(boxes.size());
  const double ra = (r[2] - r[0]) * (r[3] - r[1]);
  for (size_t k = 0; k < boxes.size(); ++k) {
    const Box& b = boxes[k];
    const double iw = std::max(0.0, std::min(b[2], r[2]) - std::max(b[0], r[0]));
    const double ih = std::max(0.0, std::min(b[3], r[3]) - std::max(b[1], r[1]));
    const double inter = iw * ih;
    const double uni = (b[2] - b[0]) * (b[3] - b[1]) + ra - inter;
    out[k] = uni > 0 ? inter / uni : 0.0;
  }
  return out;
}

// ---- photometric ops ---------------------------------------------------------------

void scale_intensity(Tensor& image, double alpha) {
  std::array<uint8_t, 256> lut{};
  const auto a = static_cast<float>(alpha);
  for (int v = 0; v < 256; ++v) lut[static_cast<size_t>(v)] = clip_trunc(static_cast<float>(v) * a);
  apply_lut(image, lut, "scale_intensity");
}

void shift_intensity(Tensor& image, int64_t shift) {
  std::array<uint8_t, 256> lut{};
  for (int64_t v = 0; v < 256; ++v)
    lut[static_cast<size_t>(v)] = static_cast<uint8_t>(std::clamp<int64_t>(v + shift, 0, 255));
  apply_lut(image, lut, "shift_intensity");
}

void shift_hue(Tensor& image, double delta_degrees) {
  const auto d = static_cast<float>(delta_degrees);
  map_hsv(image, "shift_hue", [d](float& h, float&) {
    h += d;
    if (h > 360) h -= 360;
    if (h < 0) h += 360;
  });
}

void scale_saturation(Tensor& image, double factor) {
  const auto f = static_cast<float>(factor);
  map_hsv(image, "scale_saturation", [f](float&, float& s) { s *= f; });
}

void permute_channels(Tensor& image, const std::array<int, 3>& perm) {
  const uint8_t* p = image_u8(image, "permute_channels");
  for (int c : perm)
    TCV_CHECK(c >= 0 && c < 3, "[permute_channels] channel ", c, " is not 0, 1 or 2");
  const int64_t HW = image.size(1) * image.size(2);
  Tensor out = empty(image.shape(), {.dtype = DType::u8});
  uint8_t* d = out.data<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    std::copy_n(p + perm[static_cast<size_t>(c)] * HW, HW, d + c * HW);
  image = out;
}

// ---- random transforms ----------------------------------------------------------

void PhotometricDistort::operator()(DetSample& s, Rng& rng) const {
  image_u8(s, "PhotometricDistort");
  static const std::array<std::array<int, 3>, 6> perms{
      {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}};
  bool owned = false;  // the ops write in place: copy the image before the first
  for (const int64_t op : rng.permutation(5)) {
    if (rng.uniform() >= p) continue;
    if (!owned) {
      s.image = s.image.clone();
      owned = true;
    }
    switch (op) {
      case 0:
        scale_intensity(s.image, rng.uniform(contrast[0], contrast[1]));
        break;
      case 1:
        shift_hue(s.image, rng.uniform(-hue_delta, hue_delta));
        break;
      case 2:
        scale_saturation(s.image, rng.uniform(saturation[0], saturation[1]));
        break;
      case 3:
        shift_intensity(s.image, rng.randint(-brightness_shift, brightness_shift + 1));
        break;
      default:
        if (channel_swap) permute_channels(s.image, perms[static_cast<size_t>(rng.randint(0, 6))]);
        break;
    }
  }
}

void DetRandomFlip::operator()(DetSample& s, Rng& rng) const {
  if (rng.uniform() < p) det_hflip(s);
}

void DetRandomExpand::operator()(DetSample& s, Rng& rng) const {
  if (rng.uniform() >= p) return;
  image_u8(s, "DetRandomExpand");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  double ws = rng.uniform(1.0, max_scale), hs = ws;
  for (int t = 0; t < 50; ++t) {
    const double scale = rng.uniform(1.0, max_scale);
    const double lo = std::max(0.5, 1.0 / (scale * scale)), hi = std::min(2.0, scale * scale);
    const double ratio = std::sqrt(rng.uniform(lo, hi));
    ws = scale * ratio;
    hs = scale / ratio;
    if (ws >= 1 && hs >= 1) break;
  }
  ws = std::max(ws, 1.0);
  hs = std::max(hs, 1.0);
  // A canvas of 4 x 4 times an image near data.max_pixels would take 16 times
  // its memory (a decompression bomb's second act): keep it within max_pixels.
  const double wh = static_cast<double>(W) * static_cast<double>(H);
  const auto max_px = static_cast<double>(max_pixels);
  if (wh > max_px) return;
  if (ws * hs * wh > max_px) {
    const double f = std::sqrt(max_px / (ws * hs * wh));
    ws = std::max(1.0, ws * f);
    hs = std::max(1.0, std::min(hs * f, max_px / (ws * wh)));
  }
  const int64_t pad_w = rng.randint(0, static_cast<int64_t>(ws * static_cast<double>(W)) - W + 1);
  const int64_t pad_h = rng.randint(0, static_cast<int64_t>(hs * static_cast<double>(H)) - H + 1);
  const int64_t left = rng.randint(0, pad_w + 1), top = rng.randint(0, pad_h + 1);
  det_expand(s, top, left, H + pad_h, W + pad_w, fill);
}

std::optional<std::array<int64_t, 4>> iou_crop_window(const std::vector<Box>& boxes, int64_t H,
                                                      int64_t W, double min_iou, double min_scale,
                                                      int trials, Rng& rng) {
  for (int t = 0; t < trials; ++t) {
    const double scale = rng.uniform(min_scale, 1.0);
    const double lo = std::max(0.5, scale * scale), hi = std::min(2.0, 1.0 / (scale * scale));
    const double ratio = std::sqrt(rng.uniform(lo, hi));
    const auto w = static_cast<int64_t>(scale * ratio * static_cast<double>(W));
    const auto h = static_cast<int64_t>(scale / ratio * static_cast<double>(H));
    if (w < 1 || h < 1 || w > W || h > H) continue;
    const int64_t left = rng.randint(0, W - w + 1), top = rng.randint(0, H - h + 1);
    const Box rect{static_cast<double>(left), static_cast<double>(top),
                   static_cast<double>(left + w), static_cast<double>(top + h)};
    const std::vector<double> iou = box_iou_with(boxes, rect);
    if (iou.empty() || *std::max_element(iou.begin(), iou.end()) < min_iou) continue;
    bool any_centre = false;
    for (const Box& b : boxes) {
      const double cx = 0.5 * (b[0] + b[2]), cy = 0.5 * (b[1] + b[3]);
      any_centre = any_centre || (rect[0] < cx && cx < rect[2] && rect[1] < cy && cy < rect[3]);
    }
    if (any_centre) return std::array<int64_t, 4>{left, top, left + w, top + h};
  }
  return std::nullopt;
}

void DetRandomIouCrop::operator()(DetSample& s, Rng& rng) const {
  image_u8(s, "DetRandomIouCrop");
  if (s.target.boxes.empty()) return;
  const int64_t H = s.image.size(1), W = s.image.size(2);
  const auto n_modes = static_cast<int64_t>(min_ious.size()) + 2;  // + whole image, any window
  while (true) {
    const int64_t mode = rng.randint(0, n_modes);
    if (mode == 0) return;
    const double min_iou = mode <= static_cast<int64_t>(min_ious.size())
                               ? min_ious[static_cast<size_t>(mode - 1)]
                               : -1.0;
    const auto win = iou_crop_window(s.target.boxes, H, W, min_iou, min_scale, trials, rng);
    if (win) {
      det_crop(s, (*win)[0], (*win)[1], (*win)[2], (*win)[3]);
      return;
    }
  }
}

DetTransform ssd_train_transform(const SsdAugmentOptions& o) {
  TCV_CHECK(o.size > 0, "[ssd_train_transform] size must be positive, got ", o.size);
  return [o](DetSample& s, Rng& rng) {
    det_drop_objects(s, o.keep_difficult, o.keep_crowd);
    if (o.photometric) o.distort(s, rng);
    o.flip(s, rng);
    if (o.expand) o.expand_opts(s, rng);
    if (o.crop) o.crop_opts(s, rng);
    det_resize(s, o.size, o.size);
    det_drop_objects(s, true, true);  // boxes a crop left without area
  };
}

DetTransform det_eval_transform(int64_t size) {
  TCV_CHECK(size > 0, "[det_eval_transform] size must be positive, got ", size);
  return [size](DetSample& s, Rng&) { det_resize(s, size, size); };
}

}  // namespace tcv::data
