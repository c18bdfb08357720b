#include "data/transforms.h"

#include <algorithm>
#include <cmath>

#include "data/resample.h"

namespace tcv::data {

// ---- helpers --------------------------------------------------------------------

namespace {

// A (C, H, W) view of an image, checked; (H, W) becomes (1, H, W).
Tensor check_image(const Tensor& img, const char* op) {
  TCV_CHECK(img.defined(), "[", op, "] undefined image");
  Tensor t = img.dim() == 2 ? img.unsqueeze(0) : img;
  TCV_CHECK(t.dim() == 3 && (t.dtype() == DType::u8 || t.dtype() == DType::f32), "[", op,
            "] expects a u8 or f32 image (C, H, W), got ", dtype_name(img.dtype()), " ",
            img.shape_str());
  return t.contiguous();
}

// The image's values as f32 (u8 not rescaled).
Tensor raw_f32(const Tensor& img) {
  return img.dtype() == DType::f32 ? img.contiguous() : img.to(DType::f32);
}

enum class Cast { round, truncate };

// f32 values back to `dtype`: u8 clamps to [0, 255] and rounds half to even
// (torch.round) or truncates (Tensor.to(uint8)), as the torchvision op does.
Tensor cast_back(const Tensor& f, DType dtype, Cast cast) {
  if (dtype == DType::f32) return f;
  Tensor out = empty(f.shape(), {.dtype = DType::u8});
  const float* s = f.data<float>();
  uint8_t* d = out.data<uint8_t>();
  const int64_t n = f.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = cast == Cast::round ? std::nearbyint(s[i]) : s[i];
    v = std::clamp(v, 0.0f, 255.0f);
    d[i] = static_cast<uint8_t>(v);
  }
  return out;
}

float bound_of(DType dtype) {
  return dtype == DType::u8 ? 255.0f : 1.0f;
}

// torchvision's _blend: ratio * a + (1 - ratio) * b, clamped to the dtype's range;
// b has one value per pixel (bc == 1) or per element.
Tensor blend(const Tensor& img, const float* b, bool b_per_pixel, bool b_scalar, double ratio) {
  const Tensor a = raw_f32(img);
  const int64_t C = a.size(0), HW = a.size(1) * a.size(2);
  const float r = static_cast<float>(ratio), q = static_cast<float>(1.0 - ratio);
  const float hi = bound_of(img.dtype());
  Tensor out = empty(a.shape());
  const float* s = a.data<float>();
  float* d = out.data<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < HW; ++k) {
      const float bv = b_scalar ? b[0] : b_per_pixel ? b[k] : b[c * HW + k];
      d[c * HW + k] = std::clamp(r * s[c * HW + k] + q * bv, 0.0f, hi);
    }
  return cast_back(out, img.dtype(), Cast::truncate);
}

int64_t round_half_even(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

}  // namespace

// ---- functional ops -------------------------------------------------------------

Tensor resize(const Tensor& image, int64_t oh, int64_t ow, Antialias antialias) {
  const Tensor img = check_image(image, "resize");
  TCV_CHECK(oh > 0 && ow > 0, "[resize] output size must be positive, got (", oh, ", ", ow, ")");
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  TCV_CHECK(H > 0 && W > 0, "[resize] empty image ", img.shape_str());
  if (oh == H && ow == W) return img;
  if (antialias == Antialias::on) return resized_crop(img, 0, 0, H, W, oh, ow, antialias);
  // Source index and weights per output row/column, as torch's upsample_bilinear2d.
  auto axis = [](int64_t in, int64_t out, std::vector<int64_t>& i0, std::vector<int64_t>& i1,
                 std::vector<float>& l1) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    i0.resize(out);
    i1.resize(out);
    l1.resize(out);
    for (int64_t o = 0; o < out; ++o) {
      const float src = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
      const auto k = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
      i0[o] = k;
      i1[o] = std::min(k + 1, in - 1);
      l1[o] = std::clamp(src - static_cast<float>(k), 0.0f, 1.0f);
    }
  };
  std::vector<int64_t> y0, y1, x0, x1;
  std::vector<float> ly, lx;
  axis(H, oh, y0, y1, ly);
  axis(W, ow, x0, x1, lx);
  const Tensor f = raw_f32(img);
  Tensor out = empty({C, oh, ow});
  const float* s = f.data<float>();
  float* d = out.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    const float* sc = s + c * H * W;
    for (int64_t y = 0; y < oh; ++y) {
      const float* r0 = sc + y0[y] * W;
      const float* r1 = sc + y1[y] * W;
      const float h1 = ly[y], h0 = 1.0f - h1;
      float* dr = d + (c * oh + y) * ow;
      for (int64_t x = 0; x < ow; ++x) {
        const float w1 = lx[x], w0 = 1.0f - w1;
        dr[x] = h0 * (w0 * r0[x0[x]] + w1 * r0[x1[x]]) + h1 * (w0 * r1[x0[x]] + w1 * r1[x1[x]]);
      }
    }
  }
  return cast_back(out, img.dtype(), Cast::round);
}

Tensor resized_crop(const Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w,
                    int64_t oh, int64_t ow, Antialias antialias) {
  const Tensor img = check_image(image, "resized_crop");
  TCV_CHECK(h > 0 && w > 0 && oh > 0 && ow > 0, "[resized_crop] crop (", h, ", ", w,
            ") and output (", oh, ", ", ow, ") sizes must be positive");
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  const bool inside = top >= 0 && left >= 0 && top + h <= H && left + w <= W;
  if (antialias == Antialias::off || !inside)
    return resize(crop(img, top, left, h, w), oh, ow, antialias);
  Tensor out = empty({C, oh, ow}, {.dtype = img.dtype()});
  if (img.dtype() == DType::u8)
    pil_resized_crop(img.data<uint8_t>(), C, H, W, top, left, h, w, out.data<uint8_t>(), oh, ow);
  else
    pil_resized_crop(img.data<float>(), C, H, W, top, left, h, w, out.data<float>(), oh, ow);
  return out;
}

Tensor resize_shorter(const Tensor& image, int64_t size, int64_t max_size, Antialias antialias) {
  const Tensor img = check_image(image, "resize");
  TCV_CHECK(size > 0, "[resize] size must be positive, got ", size);
  const int64_t h = img.size(1), w = img.size(2);
  const int64_t shorter = std::min(h, w), longer = std::max(h, w);
  int64_t new_short = size;
  auto new_long = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(longer) /
                                       static_cast<double>(shorter));
  if (max_size > 0) {
    TCV_CHECK(max_size > size, "[resize] max_size (", max_size, ") must exceed size (", size, ")");
    if (new_long > max_size) {
      new_short =
          static_cast<int64_t>(static_cast<double>(max_size) * static_cast<double>(new_short) /
                               static_cast<double>(new_long));
      new_long = max_size;
    }
  }
  return w <= h ? resize(img, new_long, new_short, antialias)
                : resize(img, new_short, new_long, antialias);
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w) {
  const Tensor img = check_image(image, "crop");
  TCV_CHECK(h > 0 && w > 0, "[crop] crop size must be positive, got (", h, ", ", w, ")");
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  Tensor out = zeros({C, h, w}, {.dtype = img.dtype()});
  const size_t es = img.element_size();
  const auto* s = static_cast<const char*>(img.data_ptr());
  auto* d = static_cast<char*>(out.data_ptr());
  const int64_t x_lo = std::max<int64_t>(0, -left), x_hi = std::min(w, W - left);
  if (x_hi <= x_lo) return out;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = top + y;
      if (sy < 0 || sy >= H) continue;
      std::copy_n(s + ((c * H + sy) * W + left + x_lo) * es, (x_hi - x_lo) * es,
                  d + ((c * h + y) * w + x_lo) * es);
    }
  return out;
}

Tensor pad(const Tensor& image, int64_t left, int64_t top, int64_t right, int64_t bottom,
           double fill) {
  const Tensor img = check_image(image, "pad");
  TCV_CHECK(left >= 0 && top >= 0 && right >= 0 && bottom >= 0,
            "[pad] padding must be non-negative, got (", left, ", ", top, ", ", right, ", ", bottom,
            ")");
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  Tensor out = full({C, H + top + bottom, W + left + right}, fill, {.dtype = img.dtype()});
  out.narrow(1, top, H).narrow(2, left, W).copy_(img);
  return out;
}

Tensor center_crop(const Tensor& image, int64_t ch, int64_t cw) {
  Tensor img = check_image(image, "center_crop");
  TCV_CHECK(ch > 0 && cw > 0, "[center_crop] size must be positive, got (", ch, ", ", cw, ")");
  int64_t H = img.size(1), W = img.size(2);
  if (cw > W || ch > H) {
    img = pad(img, cw > W ? (cw - W) / 2 : 0, ch > H ? (ch - H) / 2 : 0,
              cw > W ? (cw - W + 1) / 2 : 0, ch > H ? (ch - H + 1) / 2 : 0);
    H = img.size(1);
    W = img.size(2);
    if (cw == W && ch == H) return img;
  }
  const int64_t top = round_half_even(static_cast<double>(H - ch) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(W - cw) / 2.0);
  return crop(img, top, left, ch, cw);
}

Tensor hflip(const Tensor& image) {
  const Tensor img = check_image(image, "hflip");
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  Tensor out = empty(img.shape(), {.dtype = img.dtype()});
  auto flip_rows = [&](const auto* s, auto* d) {
    for (int64_t r = 0; r < C * H; ++r) std::reverse_copy(s + r * W, s + (r + 1) * W, d + r * W);
  };
  if (img.dtype() == DType::u8)
    flip_rows(img.data<uint8_t>(), out.data<uint8_t>());
  else
    flip_rows(img.data<float>(), out.data<float>());
  return out;
}

Tensor rgb_to_grayscale(const Tensor& image) {
  const Tensor img = check_image(image, "rgb_to_grayscale");
  TCV_CHECK(img.size(0) == 3 || img.size(0) == 1,
            "[rgb_to_grayscale] expects 1 or 3 channels, got ", img.size(0));
  if (img.size(0) == 1) return img;
  const Tensor f = raw_f32(img);
  const int64_t HW = f.size(1) * f.size(2);
  Tensor out = empty({1, f.size(1), f.size(2)});
  const float* s = f.data<float>();
  float* d = out.data<float>();
  for (int64_t k = 0; k < HW; ++k)
    d[k] = 0.2989f * s[k] + 0.587f * s[HW + k] + 0.114f * s[2 * HW + k];
  return cast_back(out, img.dtype(), Cast::truncate);
}

Tensor adjust_brightness(const Tensor& image, double factor) {
  const Tensor img = check_image(image, "adjust_brightness");
  TCV_CHECK(factor >= 0, "[adjust_brightness] factor must be non-negative, got ", factor);
  const float zero = 0.0f;
  return blend(img, &zero, false, true, factor);
}

Tensor adjust_contrast(const Tensor& image, double factor) {
  const Tensor img = check_image(image, "adjust_contrast");
  TCV_CHECK(factor >= 0, "[adjust_contrast] factor must be non-negative, got ", factor);
  TCV_CHECK(img.size(0) == 1 || img.size(0) == 3, "[adjust_contrast] expects 1 or 3 channels, got ",
            img.size(0));
  const Tensor g = raw_f32(rgb_to_grayscale(img));
  const float* p = g.data<float>();
  double acc = 0;
  for (int64_t k = 0; k < g.numel(); ++k) acc += p[k];
  const auto mean = static_cast<float>(acc / static_cast<double>(std::max<int64_t>(g.numel(), 1)));
  return blend(img, &mean, false, true, factor);
}

Tensor adjust_saturation(const Tensor& image, double factor) {
  const Tensor img = check_image(image, "adjust_saturation");
  TCV_CHECK(factor >= 0, "[adjust_saturation] factor must be non-negative, got ", factor);
  TCV_CHECK(img.size(0) == 1 || img.size(0) == 3,
            "[adjust_saturation] expects 1 or 3 channels, got ", img.size(0));
  if (img.size(0) == 1) return img;
  const Tensor g = raw_f32(rgb_to_grayscale(img));
  return blend(img, g.data<float>(), true, false, factor);
}

Tensor adjust_hue(const Tensor& image, double hue_factor) {
  const Tensor img = check_image(image, "adjust_hue");
  TCV_CHECK(hue_factor >= -0.5 && hue_factor <= 0.5, "[adjust_hue] hue_factor must be in ",
            "[-0.5, 0.5], got ", hue_factor);
  TCV_CHECK(img.size(0) == 1 || img.size(0) == 3, "[adjust_hue] expects 1 or 3 channels, got ",
            img.size(0));
  if (img.size(0) == 1) return img;
  const Tensor f = to_float(img);
  const int64_t HW = f.size(1) * f.size(2);
  Tensor out = empty(f.shape());
  const float* s = f.data<float>();
  float* d = out.data<float>();
  const auto hf = static_cast<float>(hue_factor);
  for (int64_t k = 0; k < HW; ++k) {
    // torchvision's _rgb2hsv, hue shift, _hsv2rgb, element by element.
    const float r = s[k], g = s[HW + k], b = s[2 * HW + k];
    const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float sat = cr / (eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : cr;
    const float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
    float h = 0;
    if (maxc == r)
      h = bc - gc;
    else if (maxc == g)
      h = 2.0f + rc - bc;
    else
      h = 4.0f + gc - rc;
    h = std::fmod(h / 6.0f + 1.0f, 1.0f);
    h = h + hf;
    h = h - std::floor(h);  // Python's % 1.0
    const float v = maxc;
    const float i_f = std::floor(h * 6.0f), fr = h * 6.0f - i_f;
    const int i = ((static_cast<int>(i_f) % 6) + 6) % 6;
    const float p = std::clamp(v * (1.0f - sat), 0.0f, 1.0f);
    const float q = std::clamp(v * (1.0f - sat * fr), 0.0f, 1.0f);
    const float t = std::clamp(v * (1.0f - sat * (1.0f - fr)), 0.0f, 1.0f);
    const float rr[6] = {v, q, p, p, t, v}, gg[6] = {t, v, v, q, p, p}, bb[6] = {p, p, t, v, v, q};
    d[k] = rr[i];
    d[HW + k] = gg[i];
    d[2 * HW + k] = bb[i];
  }
  if (img.dtype() == DType::f32) return out;
  // convert_image_dtype(float -> uint8): x * (255 + 1 - 1e-3), truncated.
  Tensor u = empty(out.shape(), {.dtype = DType::u8});
  uint8_t* ud = u.data<uint8_t>();
  for (int64_t k = 0; k < out.numel(); ++k)
    ud[k] = static_cast<uint8_t>(std::clamp(d[k] * 255.999f, 0.0f, 255.0f));
  return u;
}

Tensor to_float(const Tensor& image) {
  const Tensor img = check_image(image, "to_float");
  if (img.dtype() == DType::f32) return img;
  Tensor out = empty(img.shape());
  const uint8_t* __restrict s = img.data<uint8_t>();
  float* __restrict d = out.data<float>();
  const int64_t n = img.numel();
  for (int64_t k = 0; k < n; ++k) d[k] = static_cast<float>(s[k]) / 255.0f;
  return out;
}

std::vector<std::pair<float, float>> normalize_coeffs(const std::vector<double>& mean,
                                                      const std::vector<double>& std, int64_t C,
                                                      const char* op) {
  auto pick = [&](const std::vector<double>& v, const char* what, int64_t c) {
    TCV_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == C, "[", op, "] ", what, " has ",
              v.size(), " values for ", C, " channels (give 1 or ", C, ")");
    return static_cast<float>(v.size() == 1 ? v[0] : v[static_cast<size_t>(c)]);
  };
  std::vector<std::pair<float, float>> out;
  for (int64_t c = 0; c < C; ++c) {
    out.emplace_back(pick(mean, "mean", c), pick(std, "std", c));
    TCV_CHECK(out.back().second != 0.0f, "[", op, "] std of channel ", c, " is zero");
  }
  return out;
}

Tensor normalize(const Tensor& image, const std::vector<double>& mean,
                 const std::vector<double>& std) {
  const Tensor img = check_image(image, "normalize");
  const int64_t C = img.size(0), HW = img.size(1) * img.size(2);
  const auto coeffs = normalize_coeffs(mean, std, C, "normalize");
  Tensor out = empty(img.shape());
  float* __restrict d = out.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    const auto [m, sd] = coeffs[static_cast<size_t>(c)];
    float* __restrict dc = d + c * HW;
    if (img.dtype() == DType::u8) {
      // One pass from u8; the same float operations as to_float then normalize.
      const uint8_t* __restrict s = img.data<uint8_t>() + c * HW;
      for (int64_t k = 0; k < HW; ++k) dc[k] = (static_cast<float>(s[k]) / 255.0f - m) / sd;
    } else {
      const float* __restrict s = img.data<float>() + c * HW;
      for (int64_t k = 0; k < HW; ++k) dc[k] = (s[k] - m) / sd;
    }
  }
  return out;
}

// ---- transforms -----------------------------------------------------------------

Tensor Resize::operator()(const Tensor& img, Rng&) const {
  return w > 0 ? resize(img, size, w) : resize_shorter(img, size);
}

Tensor CenterCrop::operator()(const Tensor& img, Rng&) const {
  return center_crop(img, size, size);
}

std::array<int64_t, 4> RandomResizedCrop::params(int64_t H, int64_t W, Rng& rng) const {
  TCV_CHECK(scale[0] <= scale[1] && ratio[0] <= ratio[1] && ratio[0] > 0,
            "[RandomResizedCrop] scale and ratio must be (min, max) ranges with ratio > 0");
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double lr0 = std::log(ratio[0]), lr1 = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.uniform(lr0, lr1));
    const int64_t w = round_half_even(std::sqrt(target * aspect));
    const int64_t h = round_half_even(std::sqrt(target / aspect));
    if (0 < w && w <= W && 0 < h && h <= H) {
      const int64_t i = rng.randint(0, H - h + 1);
      const int64_t j = rng.randint(0, W - w + 1);
      return {i, j, h, w};
    }
  }
  const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
  int64_t w = W, h = H;
  if (in_ratio < ratio[0]) {
    h = round_half_even(static_cast<double>(w) / ratio[0]);
  } else if (in_ratio > ratio[1]) {
    w = round_half_even(static_cast<double>(h) * ratio[1]);
  }
  return {(H - h) / 2, (W - w) / 2, h, w};
}

Tensor RandomResizedCrop::operator()(const Tensor& image, Rng& rng) const {
  const Tensor img = check_image(image, "RandomResizedCrop");
  const auto [i, j, h, w] = params(img.size(1), img.size(2), rng);
  return resized_crop(img, i, j, h, w, size, size, antialias);
}

Tensor RandomCrop::operator()(const Tensor& image, Rng& rng) const {
  Tensor img = check_image(image, "RandomCrop");
  if (padding > 0) img = pad(img, padding, padding, padding, padding, fill);
  if (pad_if_needed && img.size(2) < size) {
    const int64_t p = size - img.size(2);
    img = pad(img, p, 0, p, 0, fill);
  }
  if (pad_if_needed && img.size(1) < size) {
    const int64_t p = size - img.size(1);
    img = pad(img, 0, p, 0, p, fill);
  }
  const int64_t H = img.size(1), W = img.size(2);
  TCV_CHECK(H >= size && W >= size, "[RandomCrop] crop size ", size,
            " is larger than the (padded) image ", img.shape_str());
  if (H == size && W == size) return img;
  const int64_t i = rng.randint(0, H - size + 1);
  const int64_t j = rng.randint(0, W - size + 1);
  return crop(img, i, j, size, size);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& img, Rng& rng) const {
  return rng.uniform() < p ? hflip(img) : check_image(img, "RandomHorizontalFlip");
}

Tensor ColorJitter::operator()(const Tensor& image, Rng& rng) const {
  Tensor img = check_image(image, "ColorJitter");
  const auto order = rng.permutation(4);
  auto factor = [&](double v, bool centred_on_one) -> std::optional<double> {
    if (v <= 0) return std::nullopt;
    return centred_on_one ? rng.uniform(std::max(0.0, 1.0 - v), 1.0 + v) : rng.uniform(-v, v);
  };
  const auto b = factor(brightness, true), c = factor(contrast, true), s = factor(saturation, true),
             h = factor(std::min(hue, 0.5), false);
  for (const int64_t fn : order) {
    if (fn == 0 && b) img = adjust_brightness(img, *b);
    if (fn == 1 && c) img = adjust_contrast(img, *c);
    if (fn == 2 && s) img = adjust_saturation(img, *s);
    if (fn == 3 && h) img = adjust_hue(img, *h);
  }
  return img;
}

Tensor Compose::operator()(const Tensor& img, Rng& rng) const {
  Tensor x = img;
  for (const auto& t : transforms_) x = t(x, rng);
  return x;
}

Tensor Compose::apply_deferring(const Tensor& img, Rng& rng, Deferred& deferred) const {
  deferred = Deferred{};
  // The tail: [RandomHorizontalFlip] [ToFloat] [NormalizeImage | ToFloat].
  size_t k = transforms_.size();
  const NormalizeImage* norm = nullptr;
  bool to_float_only = false;
  if (k > 0 && (norm = transforms_[k - 1].target<NormalizeImage>()) != nullptr) {
    --k;
    if (k > 0 && transforms_[k - 1].target<ToFloat>() != nullptr) --k;
  } else if (k > 0 && transforms_[k - 1].target<ToFloat>() != nullptr) {
    to_float_only = true;
    --k;
  }
  const RandomHorizontalFlip* flip =
      k > 0 ? transforms_[k - 1].target<RandomHorizontalFlip>() : nullptr;
  if (flip != nullptr) --k;
  if (k == transforms_.size()) return (*this)(img, rng);
  Tensor x = img;
  for (size_t i = 0; i < k; ++i) x = transforms_[i](x, rng);
  if (x.dtype() != DType::u8 || (x.dim() != 3 && x.dim() != 2)) {
    for (size_t i = k; i < transforms_.size(); ++i) x = transforms_[i](x, rng);
    return x;
  }
  if (flip != nullptr) deferred.flip = rng.uniform() < flip->p;
  if (norm != nullptr || to_float_only) {
    deferred.normalize = true;
    deferred.mean = norm != nullptr ? norm->mean : std::vector<double>{0.0};
    deferred.std = norm != nullptr ? norm->std : std::vector<double>{1.0};
  }
  return x;
}

Tensor apply_deferring(const Transform& t, const Tensor& img, Rng& rng, Deferred& deferred) {
  deferred = Deferred{};
  if (const Compose* c = t.target<Compose>()) return c->apply_deferring(img, rng, deferred);
  return t(img, rng);
}

// ---- batch transforms -------------------------------------------------------------

Tensor one_hot(const Tensor& labels, int64_t num_classes, double smoothing) {
  TCV_CHECK(labels.dim() == 1 && !is_floating(labels.dtype()),
            "[one_hot] expects integer labels (B), got ", dtype_name(labels.dtype()), " ",
            labels.shape_str());
  TCV_CHECK(num_classes > 0 && smoothing >= 0 && smoothing < 1,
            "[one_hot] needs num_classes > 0 and smoothing in [0, 1), got ", num_classes, ", ",
            smoothing);
  const auto y = labels.to_vector<int64_t>();
  const auto B = static_cast<int64_t>(y.size());
  const auto off = static_cast<float>(smoothing / static_cast<double>(num_classes));
  const auto on = static_cast<float>(1.0 - smoothing) + off;
  Tensor out = full({B, num_classes}, off);  // (B, K)
  float* d = out.data<float>();
  for (int64_t i = 0; i < B; ++i) {
    TCV_CHECK(y[i] >= 0 && y[i] < num_classes, "[one_hot] label ", y[i], " of sample ", i,
              " is outside [0, ", num_classes, ")");
    d[i * num_classes + y[i]] = on;
  }
  return out;
}

double mixup(Tensor& x, Tensor& y, int64_t num_classes, double alpha, Rng& rng, double smoothing) {
  TCV_CHECK(alpha > 0, "[mixup] alpha must be positive, got ", alpha);
  TCV_CHECK(x.dtype() == DType::f32 && x.dim() >= 1, "[mixup] expects f32 inputs (B, ...), got ",
            dtype_name(x.dtype()), " ", x.shape_str());
  Tensor soft = y.dim() == 2 && is_floating(y.dtype()) ? y.to(DType::f32).contiguous()
                                                       : one_hot(y, num_classes, smoothing);
  TCV_CHECK(soft.size(0) == x.size(0), "[mixup] ", x.size(0), " inputs but ", soft.size(0),
            " targets");
  const double lam = rng.beta(alpha, alpha);
  const auto mix = [lam](const Tensor& t) {
    const Tensor c = t.contiguous();
    const int64_t B = c.size(0), n = B > 0 ? c.numel() / B : 0;
    Tensor out = empty(c.shape());
    const float* s = c.data<float>();
    float* d = out.data<float>();
    const auto a = static_cast<float>(lam), b = static_cast<float>(1.0 - lam);
    for (int64_t i = 0; i < B; ++i) {
      const int64_t j = (i + B - 1) % B;  // roll(1, 0)
      for (int64_t k = 0; k < n; ++k) d[i * n + k] = a * s[i * n + k] + b * s[j * n + k];
    }
    return out;
  };
  x = mix(x);
  y = mix(soft);
  return lam;
}

}  // namespace tcv::data
