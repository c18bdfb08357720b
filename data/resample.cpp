// PIL's bilinear resampling (libImaging/Resample.c), for the antialiased
// resizes of data/transforms.cpp.
//
// Separable: a horizontal pass over the source rows the vertical pass needs, into
// a u8 (f32 for f32 images) intermediate, then a vertical pass. Each output takes
// a normalised triangle filter whose support widens with the scale factor when
// shrinking (antialiasing). u8 images use PIL's 22-bit fixed-point weights and
// rounding, so results equal PIL's Image.resize(..., BILINEAR) bit for bit.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)
#define TCV_RESAMPLE_VBMI 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define TCV_RESAMPLE_AVX2 1
#include <immintrin.h>
#endif

namespace tcv::data {

namespace {

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
  // One instantiation per fixed tap count 2..7 (the unrolled loops); 0 for any count.
  using Row = void (*)(const uint8_t*, const uint8_t*, uint8_t*, int64_t, const AxisWeights&);
  static constexpr Row kRows[] = {resample_row_u8<0>, resample_row_u8<0>, resample_row_u8<2>,
                                  resample_row_u8<3>, resample_row_u8<4>, resample_row_u8<5>,
                                  resample_row_u8<6>, resample_row_u8<7>};
  const int64_t taps = a.fixed ? a.taps : 0;
  kRows[taps >= 2 && taps <= 7 ? taps : 0](src, src_end, dst, out, a);
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

template <typename T>
void resized_crop_impl(const T* src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
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

void pil_resized_crop(const uint8_t* src, int64_t C, int64_t H, int64_t W, int64_t top,
                      int64_t left, int64_t h, int64_t w, uint8_t* dst, int64_t oh, int64_t ow) {
  resized_crop_impl(src, C, H, W, top, left, h, w, dst, oh, ow);
}

void pil_resized_crop(const float* src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                      int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow) {
  resized_crop_impl(src, C, H, W, top, left, h, w, dst, oh, ow);
}

}  // namespace tcv::data
