#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)
#define TCV_RESAMPLE_VBMI 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define TCV_RESAMPLE_AVX2 1
#include <immintrin.h>
#endif

namespace tcv::data {

// ---- Rng ----------------------------------------------------------------------

uint32_t Rng::next_u32() {
  if (used_ == 4) {
    words_ = philox4x32({static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32),
                         static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    ++block_;
    used_ = 0;
  }
  return words_[used_++];
}

double Rng::uniform() {
  const uint64_t a = next_u32() >> 5, b = next_u32() >> 6;
  return static_cast<double>(a * 67108864u + b) * (1.0 / 9007199254740992.0);
}

int64_t Rng::randint(int64_t low, int64_t high) {
  TCV_CHECK(low < high, "[Rng::randint] empty range [", low, ", ", high, ")");
  const double r = static_cast<double>(high - low);
  const auto k = static_cast<int64_t>(std::floor(uniform() * r));
  return low + std::min<int64_t>(k, high - low - 1);
}

double Rng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::gamma(double shape) {
  TCV_CHECK(shape > 0, "[Rng::gamma] shape must be positive, got ", shape);
  if (shape < 1.0) return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::beta(double a, double b) {
  const double x = gamma(a), y = gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[randint(0, i + 1)]);
  return p;
}

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

// ---- PIL's bilinear resampling (libImaging/Resample.c) ----------------------------
//
// Separable: a horizontal pass over the source rows the vertical pass needs, into
// a u8 (f32 for f32 images) intermediate, then a vertical pass. Each output takes
// a normalised triangle filter whose support widens with the scale factor when
// shrinking (antialiasing). u8 images use PIL's 22-bit fixed-point weights and
// rounding, so results equal PIL's Image.resize(..., BILINEAR) bit for bit.

constexpr int kPrecisionBits = 32 - 8 - 2;

// The vectorised horizontal pass takes kBlock outputs at a time from one load
// of kWindow source bytes (a byte permute picks each tap's bytes).
#if defined(TCV_RESAMPLE_VBMI)
constexpr int64_t kBlock = 16, kWindow = 64;
#else
constexpr int64_t kBlock = 8, kWindow = 16;
#endif

// Weights of one axis: output o reads `taps` inputs from first[o] with weights
// w[o * ksize ...] (f64) and w8 (fixed point). Where the input is long enough,
// every output gets the same number of taps (the most any output has): shorter
// windows move inside the input and get zero weights, which leaves the sums as
// PIL's and lets the inner loop have a fixed length.
struct AxisWeights {
  int64_t ksize = 0, taps = 0;
  bool fixed = false;
  std::vector<int64_t> first, count;
  std::vector<double> w;
  std::vector<int32_t> w8;
  // With fixed taps, for the horizontal pass: w8 tap-major (tap t of output o
  // at w8t[t * out + o]), and per block of kBlock outputs whether all its taps
  // lie within kWindow bytes of its first one, and then each tap's offsets from
  // there (block_idx[(block * taps + t) * kBlock + j]).
  std::vector<int32_t> w8t;
  std::vector<uint8_t> block_fits, block_idx;
};

AxisWeights pil_bilinear_weights(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;  // the triangle's support is 1
  const double ss = 1.0 / filterscale;
  AxisWeights a;
  a.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const auto ks = static_cast<size_t>(a.ksize), no = static_cast<size_t>(out);
  std::vector<int64_t> lo(no), n(no);
  std::vector<double> k(no * ks, 0.0);
  for (size_t o = 0; o < no; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    lo[o] = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    n[o] = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - lo[o];
    double* ko = k.data() + o * ks;
    double ww = 0.0;
    for (int64_t x = 0; x < n[o]; ++x) {
      const double t = std::abs((static_cast<double>(x + lo[o]) - center + 0.5) * ss);
      ko[x] = t < 1.0 ? 1.0 - t : 0.0;
      ww += ko[x];
    }
    if (ww != 0.0)
      for (int64_t x = 0; x < n[o]; ++x) ko[x] /= ww;
    a.taps = std::max(a.taps, n[o]);
  }
  a.fixed = in >= a.taps;
  a.first.resize(no);
  a.count.resize(no);
  a.w.assign(no * ks, 0.0);
  a.w8.assign(no * ks, 0);
  for (size_t o = 0; o < no; ++o) {
    const int64_t first = a.fixed ? std::min(lo[o], in - a.taps) : lo[o];
    a.first[o] = first;
    a.count[o] = a.fixed ? a.taps : n[o];
    for (int64_t x = 0; x < n[o]; ++x) {
      const double v = k[o * ks + static_cast<size_t>(x)];
      const size_t at = o * ks + static_cast<size_t>(lo[o] - first + x);
      a.w[at] = v;
      a.w8[at] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits)
                                            : 0.5 + v * (1 << kPrecisionBits));
    }
  }
  if (a.fixed) {
    a.w8t.resize(static_cast<size_t>(a.taps) * no);
    for (size_t o = 0; o < no; ++o)
      for (int64_t t = 0; t < a.taps; ++t)
        a.w8t[static_cast<size_t>(t) * no + o] = a.w8[o * ks + static_cast<size_t>(t)];
    const auto bw = static_cast<size_t>(kBlock);
    const size_t blocks = no / bw, taps = static_cast<size_t>(a.taps);
    a.block_fits.assign(blocks, 0);
    a.block_idx.assign(blocks * taps * bw, 0);
    for (size_t b = 0; b < blocks; ++b) {
      const int64_t base = a.first[b * bw];
      if (a.first[b * bw + bw - 1] + a.taps - base > kWindow) continue;
      a.block_fits[b] = 1;
      for (size_t t = 0; t < taps; ++t)
        for (size_t j = 0; j < bw; ++j)
          a.block_idx[(b * taps + t) * bw + j] =
              static_cast<uint8_t>(a.first[b * bw + j] + static_cast<int64_t>(t) - base);
    }
  }
  return a;
}

inline uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Outputs [o0, o1) of one row of the horizontal pass, with the tap count fixed
// at compile time (K > 0) or read per output (K == 0).
template <int K>
void resample_span_u8(const uint8_t* __restrict src, uint8_t* __restrict dst, int64_t o0,
                      int64_t o1, const AxisWeights& a) {
  const int64_t* first = a.first.data();
  const int64_t* count = a.count.data();
  const int32_t* w8 = a.w8.data();
  const int64_t ks = a.ksize;
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* p = src + first[o];
    const int32_t* k = w8 + o * ks;
    int32_t ss = 1 << (kPrecisionBits - 1);
    const int64_t n = K > 0 ? K : count[o];
    for (int64_t t = 0; t < n; ++t) ss += static_cast<int32_t>(p[t]) * k[t];
    dst[o] = clip8(ss);
  }
}

// GCC 12 takes the _mm512_undefined_* inside AVX-512 intrinsics for
// uninitialized reads.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// One row of the horizontal pass. With AVX-512 VBMI (AVX2), 16 (8) outputs at a
// time: one load of the 64 (16) source bytes they read, a byte permute per tap,
// 32-bit multiply-adds; the same integer arithmetic as the scalar code. `src_end`
// bounds what may be loaded.
template <int K>
void resample_row_u8(const uint8_t* __restrict src, const uint8_t* src_end, uint8_t* __restrict dst,
                     int64_t out, const AxisWeights& a) {
  int64_t o = 0;
#if defined(TCV_RESAMPLE_VBMI)
  if constexpr (K > 0) {
    const __m512i round = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
    const __m512i zero = _mm512_setzero_si512();
    const int32_t* wt = a.w8t.data();
    const uint8_t* idx = a.block_idx.data();
    for (size_t b = 0; o + 16 <= out; ++b, o += 16) {
      if (!a.block_fits[b]) {
        resample_span_u8<K>(src, dst, o, o + 16, a);
        continue;
      }
      const uint8_t* p = src + a.first[static_cast<size_t>(o)];
      const int64_t avail = src_end - p;
      const __mmask64 m = avail >= 64 ? ~__mmask64{0} : (__mmask64{1} << avail) - 1;
      const __m512i window = _mm512_maskz_loadu_epi8(m, p);
      __m512i acc = round;
      for (int t = 0; t < K; ++t) {
        const __m512i at = _mm512_zextsi128_si512(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + (b * K + t) * 16)));
        const __m512i v =
            _mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi8(at, window)));
        const __m512i k = _mm512_loadu_si512(wt + t * out + o);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, k));
      }
      acc = _mm512_max_epi32(_mm512_srai_epi32(acc, kPrecisionBits), zero);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + o), _mm512_cvtusepi32_epi8(acc));
    }
  }
#elif defined(TCV_RESAMPLE_AVX2)
  if constexpr (K > 0) {
    const __m256i round = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
    const int32_t* wt = a.w8t.data();
    const uint8_t* idx = a.block_idx.data();
    for (size_t b = 0; o + 8 <= out; ++b, o += 8) {
      const uint8_t* p = src + a.first[static_cast<size_t>(o)];
      if (!a.block_fits[b] || src_end - p < 16) {
        resample_span_u8<K>(src, dst, o, o + 8, a);
        continue;
      }
      const __m128i window = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      __m256i acc = round;
      for (int t = 0; t < K; ++t) {
        const __m128i at = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(idx + (b * K + t) * 8));
        const __m256i v = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(window, at));
        const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wt + t * out + o));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, k));
      }
      // >> 22, then saturating packs clamp to [0, 255] as clip8 does.
      acc = _mm256_srai_epi32(acc, kPrecisionBits);
      const __m128i w16 =
          _mm_packs_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + o), _mm_packus_epi16(w16, w16));
    }
  }
#else
  (void)src_end;
#endif
  resample_span_u8<K>(src, dst, o, out, a);
}
#pragma GCC diagnostic pop

void resample_row(const uint8_t* src, const uint8_t* src_end, uint8_t* dst, int64_t out,
                  const AxisWeights& a) {
  switch (a.fixed ? a.taps : 0) {
    case 2:
      return resample_row_u8<2>(src, src_end, dst, out, a);
    case 3:
      return resample_row_u8<3>(src, src_end, dst, out, a);
    case 4:
      return resample_row_u8<4>(src, src_end, dst, out, a);
    case 5:
      return resample_row_u8<5>(src, src_end, dst, out, a);
    case 6:
      return resample_row_u8<6>(src, src_end, dst, out, a);
    case 7:
      return resample_row_u8<7>(src, src_end, dst, out, a);
    default:
      return resample_row_u8<0>(src, src_end, dst, out, a);
  }
}

void resample_row(const float* __restrict src, const float*, float* __restrict dst, int64_t out,
                  const AxisWeights& a) {
  for (int64_t o = 0; o < out; ++o) {
    const float* p = src + a.first[static_cast<size_t>(o)];
    const double* k = a.w.data() + o * a.ksize;
    double ss = 0.0;
    for (int64_t t = 0; t < a.count[static_cast<size_t>(o)]; ++t) ss += p[t] * k[t];
    dst[o] = static_cast<float>(ss);
  }
}

// Output row yy of the vertical pass: rows[t] are the taps' source rows.
void resample_col(const uint8_t* const* rows, const int32_t* k, int64_t n, uint8_t* dst,
                  int64_t width, std::vector<int32_t>& acc) {
  acc.assign(static_cast<size_t>(width), 1 << (kPrecisionBits - 1));
  int32_t* __restrict a = acc.data();
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* __restrict r = rows[t];
    const int32_t kt = k[t];
    if (kt == 0) continue;  // a padding tap
    for (int64_t x = 0; x < width; ++x) a[x] += static_cast<int32_t>(r[x]) * kt;
  }
  for (int64_t x = 0; x < width; ++x) dst[x] = clip8(a[x]);
}

void resample_col(const float* const* rows, const double* k, int64_t n, float* dst, int64_t width,
                  std::vector<double>& acc) {
  acc.assign(static_cast<size_t>(width), 0.0);
  double* __restrict a = acc.data();
  for (int64_t t = 0; t < n; ++t) {
    const float* __restrict r = rows[t];
    const double kt = k[t];
    for (int64_t x = 0; x < width; ++x) a[x] += r[x] * kt;
  }
  for (int64_t x = 0; x < width; ++x) dst[x] = static_cast<float>(a[x]);
}

// Resamples the (h, w) window at (top, left) of every plane of `src` (C, H, W),
// which the window lies inside, to `dst` (C, oh, ow), as PIL crops then resizes.
template <typename T>
void pil_resized_crop(const T* src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                      int64_t h, int64_t w, T* dst, int64_t oh, int64_t ow) {
  using Acc = std::conditional_t<std::is_same_v<T, uint8_t>, int32_t, double>;
  const T* src_end = src + C * H * W;
  // Scratch kept per thread: no allocation per image once warm.
  thread_local std::vector<T> tmp;
  thread_local std::vector<Acc> acc;
  thread_local std::vector<const T*> rows;
  const bool need_h = ow != w, need_v = oh != h;
  const AxisWeights ax = need_h ? pil_bilinear_weights(w, ow) : AxisWeights{};
  const AxisWeights ay = need_v ? pil_bilinear_weights(h, oh) : AxisWeights{};
  // Source rows the vertical pass reads (all of them without one).
  int64_t y0 = 0, y1 = h;
  if (need_v) {
    y0 = oh > 0 ? ay.first[0] : 0;
    y1 = 0;
    for (int64_t o = 0; o < oh; ++o)
      y1 = std::max(y1, ay.first[static_cast<size_t>(o)] + ay.count[static_cast<size_t>(o)]);
  }
  for (int64_t c = 0; c < C; ++c) {
    const T* plane = src + (c * H + top) * W + left;  // row y of the window: plane + y * W
    T* out = dst + c * oh * ow;
    // Rows after the horizontal pass: row y at base + (y - y0) * stride.
    const T* base = plane;
    int64_t stride = W;
    if (need_h) {
      tmp.resize(static_cast<size_t>((y1 - y0) * ow));
      for (int64_t y = y0; y < y1; ++y)
        resample_row(plane + y * W, src_end, tmp.data() + (y - y0) * ow, ow, ax);
      base = tmp.data() - y0 * ow;
      stride = ow;
    }
    if (!need_v) {
      for (int64_t y = 0; y < oh; ++y) std::copy_n(base + y * stride, ow, out + y * ow);
      continue;
    }
    rows.resize(static_cast<size_t>(ay.ksize));
    for (int64_t o = 0; o < oh; ++o) {
      const int64_t f = ay.first[static_cast<size_t>(o)], n = ay.count[static_cast<size_t>(o)];
      for (int64_t t = 0; t < n; ++t) rows[static_cast<size_t>(t)] = base + (f + t) * stride;
      if constexpr (std::is_same_v<T, uint8_t>)
        resample_col(rows.data(), ay.w8.data() + o * ay.ksize, n, out + o * ow, ow, acc);
      else
        resample_col(rows.data(), ay.w.data() + o * ay.ksize, n, out + o * ow, ow, acc);
    }
  }
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
