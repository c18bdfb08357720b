#include "kernels/cpu/winograd.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/base.h"

#include "kernels/cpu/blocked.h"
#include "kernels/cpu/dnnl_common.h"

namespace tcv::kernels::cpu {

namespace {

// A vector of B floats. Loads and stores go through memcpy at addresses aligned
// to the vector (the blocked tensors' and the scratch's are): one move each,
// where an unaligned 32-byte one is split in two under GCC's generic tuning.
// (GCC drops vector_size on an alias template's dependent size: one per B.)
template <int64_t B>
struct VecOf;
template <>
struct VecOf<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<16> {
  typedef float type __attribute__((vector_size(64)));
};
template <int64_t B>
using Vec = typename VecOf<B>::type;

// (By reference: a 64-byte vector passed by value warns of its ABI where
// AVX-512 is off, though the B = 16 code runs only where it is on.)
template <typename V>
[[gnu::always_inline]] inline void load(V& v, const float* p) {
  std::memcpy(&v, __builtin_assume_aligned(p, sizeof(V)), sizeof v);
}
template <typename V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(__builtin_assume_aligned(p, sizeof(V)), &v, sizeof v);
}

using dnnl_util::Buf;

/// The per-thread grow-only buffer `slot` (dnnl_common.h) as floats.
float* floats(Buf slot, int64_t count) {
  return static_cast<float*>(dnnl_util::buffer(slot, static_cast<size_t>(count) * sizeof(float)));
}

/// The rows of the matrix products: 6 tiles at a time, two channel blocks wide.
constexpr int64_t kRows = 6;
/// Bytes of transformed inputs and products one tile block may take (per
/// thread; about half of a 1 MiB L2, a third of 2 MiB ones, all of 512 KiB ones').
constexpr int64_t kBlockBytes = 384 * 1024;
/// The fewest tiles of a weight-gradient block (wide layers: 512 channels on
/// 4x4 maps ran 0.78x direct's speed at 6 tiles a block, 1.03x at 64).
constexpr int64_t kWeightBlock = 64;
/// The most input or output channels one pass over a block takes: wider
/// layers run in chunks of this many, the products of the input chunks added.
constexpr int64_t kChunk = 512;
/// Layers whose transformed filters pass this many channel pairs (4 MiB; they
/// come from L3 or memory) take at least kWideBlock tiles a block, so that
/// each filter read serves that many tiles (PSPNet's 4096 -> 512 layer: 0.98x
/// direct's speed at 6 tiles a block, 1.6-1.8x at 48).
constexpr int64_t kWidePairs = 256 * 256;
constexpr int64_t kWideBlock = 48;
/// Weight gradients of at least this many channel pairs keep one set of sums
/// that the threads share, each thread adding the products of its own
/// positions, instead of a set per thread added at the end: on 4x4 maps at 512
/// channels, 21 ms against 24.5 (and half the memory), at 256 on 8x8 about 7 %
/// faster; at 128 and 64 channels, 10-60 % slower.
constexpr int64_t kSharedSumsPairs = 256 * 256;
/// Bytes of the transformed tiles of one block of the shared sums (all
/// threads' together): each block adds into all the sums once.
constexpr int64_t kSharedBlockBytes = 4 << 20;

/// The distance in floats between the 16 positions' rows of a block's
/// transformed tiles, `floats` of them, plus one cache line when they would
/// fall on one L1 set: a transform's 16 stores of a tile went to one set of
/// 8 ways when the distance was a multiple of 4 KiB, as 64 tiles of 64
/// channels are.
inline int64_t spread(int64_t floats) {
  constexpr int64_t kWay = 4096 / sizeof(float), kLine = 64 / sizeof(float);
  return floats % kWay == 0 ? floats + kLine : floats;
}

/// Transformed tiles in a buffer: position p, tile i, channel c at
/// base[p · pos + i · row + c].
struct Tiles {
  float* base;
  int64_t pos, row;
  /// The same buffer from tile i on.
  Tiles from(int64_t i) const { return {base + i * row, pos, row}; }
};

/// The row of `channels` floats a weight-gradient block's tiles take: one
/// cache line longer from 128 channels (a multiple of 128), since its products
/// walk the tiles one row after another, 6 output channels or 2 vectors of
/// input channels at a time, and rows of 512 floats (2 KiB) put all those
/// lines on 2 of the L1's 64 sets (ResNet-18-CIFAR's weight gradients at batch
/// 64: 512 channels on 4x4 maps 14.8 ms against 18.2-20.1, 256 on 8x8
/// 13.4-14.1 against 15.5-16.4; 64 channels, whose rows take 16 sets, gained
/// nothing).
inline int64_t tile_row(int64_t channels) {
  return channels % 128 == 0 ? channels + 16 : channels;
}

/// One convolution as the kernels see it: `ci` input and `co` output channels,
/// dilation dil_h x dil_w.
struct Shape {
  int64_t n, ci, h, w, co, oh, ow, pad_h, pad_w, dil_h, dil_w;
};

// The algorithms, each as three 1-D maps whose tensor products make the 2-D
// one (Lavin and Gray, 2015): `input` Bᵀ (a window of In inputs to N values),
// `filter` G (3 taps to N), `output` Aᵀ (N products to Out outputs); a tile of
// Out x Out outputs reads the In x In window at origin(first output) and takes
// N² products per channel pair. The weight gradient swaps the roles of filter
// and output: `gradient` A (Out output gradients to N), `taps` Gᵀ (N sums to
// 3 taps).

/// F(2x2, 3x3), stride 1 (dilated: the window's inputs d apart): forward and
/// backward-data, and as F(3x3, 2x2) the weight gradient. 16 products where
/// direct convolution takes 36; coefficients 0, ±1, ±1/2.
struct Stride1 {
  static constexpr int N = 4, In = 4, Out = 2;
  static int64_t origin(int64_t y, int64_t pad) { return y - pad; }
  template <typename V>
  static void input(const V (&d)[In], V (&t)[N]) {
    t[0] = d[0] - d[2], t[1] = d[1] + d[2], t[2] = d[2] - d[1], t[3] = d[1] - d[3];
  }
  template <typename V>
  static void output(const V (&m)[N], V (&y)[Out]) {
    y[0] = m[0] + m[1] + m[2], y[1] = m[1] - m[2] - m[3];
  }
  template <typename D>
  static void filter(const D (&g)[3], D (&u)[N]) {
    u[0] = g[0], u[1] = 0.5 * (g[0] + g[1] + g[2]), u[2] = 0.5 * (g[0] - g[1] + g[2]), u[3] = g[2];
  }
  template <typename V>
  static void gradient(const V (&h)[Out], V (&q)[N]) {
    q[0] = h[0], q[1] = h[0] + h[1], q[2] = h[0] - h[1], q[3] = -h[1];
  }
  template <typename D>
  static void taps(const D (&m)[N], D (&g)[3]) {
    g[0] = m[0] + 0.5 * (m[1] + m[2]), g[1] = 0.5 * (m[1] - m[2]),
    g[2] = 0.5 * (m[1] + m[2]) + m[3];
  }
};

/// The forward pass and weight gradient of a 3x3 stride-2 layer (padding 1) by
/// its polyphase split: in 1-D, y[j] = w0·x[2j] + w1·x[2j+1] + w2·x[2j+2] of the
/// padded x is F(2, 2) over the even inputs (taps w0, w2: 3 products for 2
/// outputs) plus w1 times the odd ones (2). 25 products for a 2x2 tile against
/// direct's 36; the coefficients are 0 and ±1, and each output reads its own
/// 3x3 window only.
struct Stride2 {
  static constexpr int N = 5, In = 5, Out = 2;
  static int64_t origin(int64_t y, int64_t pad) { return 2 * y - pad; }
  template <typename V>
  static void input(const V (&d)[In], V (&t)[N]) {
    t[0] = d[0] - d[2], t[1] = d[2], t[2] = d[4] - d[2], t[3] = d[1], t[4] = d[3];
  }
  template <typename V>
  static void output(const V (&m)[N], V (&y)[Out]) {
    y[0] = m[0] + m[1] + m[3], y[1] = m[1] + m[2] + m[4];
  }
  template <typename D>
  static void filter(const D (&g)[3], D (&u)[N]) {
    u[0] = g[0], u[1] = g[0] + g[2], u[2] = g[2], u[3] = g[1], u[4] = g[1];
  }
  template <typename V>
  static void gradient(const V (&h)[Out], V (&q)[N]) {
    q[0] = h[0], q[1] = h[0] + h[1], q[2] = h[1], q[3] = h[0], q[4] = h[1];
  }
  template <typename D>
  static void taps(const D (&m)[N], D (&g)[3]) {
    g[0] = m[0] + m[1], g[1] = m[3] + m[4], g[2] = m[1] + m[2];
  }
};

/// The backward-data pass of that stride-2 layer, a tile of 4x4 input
/// gradients from the 3x3 window of dy at half its position: in 1-D,
/// dx[2u] = w1·dy[u] and dx[2u+1] = w2·dy[u] + w0·dy[u+1], the odd ones F(2, 2).
/// `filter` takes the forward's taps as they are (no flip); 25 products for 16
/// outputs against direct's 36.
struct Stride2Data {
  static constexpr int N = 5, In = 3, Out = 4;
  static int64_t origin(int64_t y, int64_t) { return y / 2; }
  template <typename V>
  static void input(const V (&d)[In], V (&t)[N]) {
    t[0] = d[0] - d[1], t[1] = d[1], t[2] = d[2] - d[1], t[3] = d[0], t[4] = d[1];
  }
  template <typename V>
  static void output(const V (&m)[N], V (&y)[Out]) {
    y[0] = m[3], y[1] = m[0] + m[1], y[2] = m[4], y[3] = m[1] + m[2];
  }
  template <typename D>
  static void filter(const D (&g)[3], D (&u)[N]) {
    u[0] = g[2], u[1] = g[0] + g[2], u[2] = g[0], u[3] = g[1], u[4] = g[1];
  }
};

/// out = f applied to each of the K columns of `in` (R x K), f a 1-D map of R
/// values to C: the first half of a 2-D transform (the second applies f to
/// each row of out).
template <int R, int C, int K, typename T, typename F>
[[gnu::always_inline]] inline void columns(const T (&in)[R][K], T (&out)[C][K], F f) {
#pragma GCC unroll 5
  for (int j = 0; j < K; ++j) {
    T col[R], r[C];
#pragma GCC unroll 5
    for (int i = 0; i < R; ++i) col[i] = in[i][j];
    f(col, r);
#pragma GCC unroll 5
    for (int i = 0; i < C; ++i) out[i][j] = r[i];
  }
}

/// The N² transformed filters of every (output, input) channel pair, packed for
/// the products: [pos][panel][ci][width], a panel being 2·B output channels
/// (fewer in the last), f(o, i, r, s) the 3x3 filter. Computed in f64, rounded once.
/// Per (panel, input), the panel's filters are gathered into a 9 x width tile and
/// transformed four output channels at a time, then each position's results
/// stored as one run (one filter at a time in scalar f64, with the 16 positions' stores
/// on lines evicted before the next filter came, this took 4.7 ms of the 21 ms
/// forward pass of a 512-channel layer on 4x4 maps).
template <typename S, int64_t B, typename Filter>
void transform_filters(const Shape& s, Filter f, float* u) {
  typedef double D4 __attribute__((vector_size(32)));
  typedef float F4 __attribute__((vector_size(16)));
  constexpr int N = S::N;
  const int64_t panel = 2 * B, panels = (s.co + panel - 1) / panel, pos_stride = s.ci * s.co;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t i = 0; i < s.ci; ++i) {
      const int64_t width = std::min(panel, s.co - p * panel);  // a multiple of B
      float tile[9][panel];
      for (int64_t j = 0; j < width; ++j)
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) tile[r * 3 + c][j] = f(p * panel + j, i, r, c);
      float res[N * N][panel];  // the panel's transformed filters, position by position
      for (int64_t j = 0; j < width; j += 4) {
        D4 g[3][3];
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) {
            F4 v;
            std::memcpy(&v, &tile[r * 3 + c][j], sizeof v);
            g[r][c] = __builtin_convertvector(v, D4);
          }
        D4 q[N][3];  // G g
        columns(g, q, [](const D4(&a)[3], D4(&b)[N]) { S::filter(a, b); });
        for (int r = 0; r < N; ++r) {  // (G g) Gᵀ: the rows
          D4 v[N];
          S::filter(q[r], v);
          for (int c = 0; c < N; ++c) {
            const F4 rounded = __builtin_convertvector(v[c], F4);
            std::memcpy(&res[r * N + c][j], &rounded, sizeof rounded);
          }
        }
      }
      // Each position's run stored in one go, its cache line written whole:
      // stored 16 bytes at a time, interleaved with the other positions'
      // (their lines a multiple of 4 KiB apart, so in one L1 set), a
      // 512-channel layer's forward pass at batch 1, mostly this transform,
      // took 2.5-2.6 ms against 1.9-2.4.
      float* const dst = u + p * s.ci * panel + i * width;
      for (int q = 0; q < N * N; ++q)
        std::memcpy(dst + q * pos_stride, res[q], width * sizeof(float));
    }
}

/// The vector instructions of the products, per block width: intrinsics
/// where they are there (GCC builds a broadcast of a vector extension's scalar
/// lane by lane), else the vector extension. Aligned loads and stores.
template <int64_t B>
struct Simd {
  using V = Vec<B>;
  static void zero(V& v) { v = V{}; }
  static void load(V& v, const float* p) { cpu::load(v, p); }
  static void store(float* p, const V& v) { cpu::store(p, v); }
  static void broadcast(V& v, const float* p) {
    for (int64_t i = 0; i < B; ++i) v[i] = *p;
  }
  static void fma(V& acc, const V& a, const V& b) { acc += a * b; }
  static void add(V& acc, const V& v) { acc += v; }
};
#if defined(__AVX512F__)
template <>
struct Simd<16> {
  using V = __m512;
  static void zero(V& v) { v = _mm512_setzero_ps(); }
  static void load(V& v, const float* p) { v = _mm512_load_ps(p); }
  static void store(float* p, const V& v) { _mm512_store_ps(p, v); }
  static void broadcast(V& v, const float* p) { v = _mm512_set1_ps(*p); }
  static void fma(V& acc, const V& a, const V& b) { acc = _mm512_fmadd_ps(a, b, acc); }
  static void add(V& acc, const V& v) { acc = _mm512_add_ps(acc, v); }
};
#endif
#if defined(__AVX2__) && defined(__FMA__)
template <>
struct Simd<8> {
  using V = __m256;
  static void zero(V& v) { v = _mm256_setzero_ps(); }
  static void load(V& v, const float* p) { v = _mm256_load_ps(p); }
  static void store(float* p, const V& v) { _mm256_store_ps(p, v); }
  static void broadcast(V& v, const float* p) { v = _mm256_broadcast_ss(p); }
  static void fma(V& acc, const V& a, const V& b) { acc = _mm256_fmadd_ps(a, b, acc); }
  static void add(V& acc, const V& v) { acc = _mm256_add_ps(acc, v); }
};
#endif

/// c[r][0, NV·B) (=, or += with Accumulate) Σ_k a[r·a_row + k·a_step] ·
/// b[k·b_step + (0, NV·B)] for R rows r (6 but at the end): R·NV vector accumulators that stay in
/// registers over the whole sum. b and c aligned to the vector.
template <int64_t B, int NV, bool Accumulate, int R = kRows>
[[gnu::always_inline]] inline void product_rows(const float* a, int64_t a_row, int64_t a_step,
                                                const float* b, int64_t b_step, int64_t steps,
                                                float* c, int64_t ldc) {
  using S = Simd<B>;
  typename S::V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) S::zero(acc[r][j]);
  for (int64_t k = 0; k < steps; ++k) {
    typename S::V bv[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) S::load(bv[j], b + k * b_step + j * B);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      typename S::V av;
      S::broadcast(av, a + r * a_row + k * a_step);
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) S::fma(acc[r][j], av, bv[j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      float* dst = c + r * ldc + j * B;
      if constexpr (Accumulate) {
        typename S::V old;
        S::load(old, dst);
        S::add(old, acc[r][j]);
        S::store(dst, old);
      } else {
        S::store(dst, acc[r][j]);
      }
    }
}

/// product_rows for `rows` (1 to kRows) rows, NV vectors wide. Inlined: as a
/// call, forward and backward-data ran 2-4 % slower at 64 channels.
template <int64_t B, int NV, bool Accumulate>
[[gnu::always_inline]] inline void products(int64_t rows, const float* a, int64_t a_row,
                                            int64_t a_step, const float* b, int64_t b_step,
                                            int64_t steps, float* c, int64_t ldc) {
  static_assert(kRows == 6);
  switch (rows) {
    case 6:
      return product_rows<B, NV, Accumulate, 6>(a, a_row, a_step, b, b_step, steps, c, ldc);
    case 5:
      return product_rows<B, NV, Accumulate, 5>(a, a_row, a_step, b, b_step, steps, c, ldc);
    case 4:
      return product_rows<B, NV, Accumulate, 4>(a, a_row, a_step, b, b_step, steps, c, ldc);
    case 3:
      return product_rows<B, NV, Accumulate, 3>(a, a_row, a_step, b, b_step, steps, c, ldc);
    case 2:
      return product_rows<B, NV, Accumulate, 2>(a, a_row, a_step, b, b_step, steps, c, ldc);
    default:
      return product_rows<B, NV, Accumulate, 1>(a, a_row, a_step, b, b_step, steps, c, ldc);
  }
}

/// Where tile t (over the whole batch) sits: image, first output row and
/// column, and how many of its Out rows and Out columns are inside the map.
struct Tile {
  int64_t n, y, x;
  int rows, cols;
};

/// The Out x Out output tiles of a batch, t = (image, phase, tile row, tile
/// column). Dilated by d, the outputs split into d_h x d_w phases (y mod d_h,
/// x mod d_w) that are each an undilated convolution of the inputs of the same
/// phase: a tile's outputs and its input window are d apart. Every phase has as
/// many tiles as the largest; a smaller one's last tiles are partly or wholly outside.
template <int Out>
struct Tiling {
  int64_t dil_h, dil_w, oh, ow, per_row, per_phase, per_image, count;
  Tiling(const Shape& s)
      : dil_h(s.dil_h),
        dil_w(s.dil_w),
        oh(s.oh),
        ow(s.ow),
        per_row(((s.ow + dil_w - 1) / dil_w + Out - 1) / Out),
        per_phase(((s.oh + dil_h - 1) / dil_h + Out - 1) / Out * per_row),
        per_image(per_phase * dil_h * dil_w),
        count(winograd_tiles(s.n, s.oh, s.ow, dil_h, dil_w, Out)) {}
  Tile operator[](int64_t t) const {
    const int64_t r = t % per_image, phase = r / per_phase, q = r % per_phase;
    const int64_t y = phase / dil_w + Out * dil_h * (q / per_row);
    const int64_t x = phase % dil_w + Out * dil_w * (q % per_row);
    const auto inside = [](int64_t at, int64_t d, int64_t size) {
      int n = 0;
      for (int i = 0; i < Out; ++i) n += at + i * d < size;
      return n;
    };
    return {t / per_image, y, x, inside(y, dil_h, oh), inside(x, dil_w, ow)};
  }
  /// Tiles per block: what fits kBlockBytes at `floats_per_tile`, in whole
  /// kRows groups (at stride 2, 64 -> 128 channels: 18 tiles, not 20 with a
  /// 2-row tail, ran forward and backward-data 9-10 % faster; at least
  /// kWideBlock with more than kWidePairs filters) but at least `least`, few
  /// enough for four blocks a thread, and the blocks as many as a multiple of
  /// `threads` and of equal size but for the last, so that every thread gets
  /// the same work (a 256-tile layer in blocks of 36: 144 and 112 tiles).
  int64_t per_block(int64_t floats_per_tile, int64_t least, int threads,
                    int64_t filter_pairs = 0) const {
    int64_t fit = kBlockBytes / (floats_per_tile * int64_t{sizeof(float)});
    if (fit > kRows) fit -= fit % kRows;
    if (filter_pairs > kWidePairs) fit = std::max(fit, kWideBlock);
    const int64_t fair = (count + 4 * threads - 1) / (4 * threads);
    const int64_t target = std::max({int64_t{1}, least, std::min(fit, fair)});
    int64_t blocks = (count + target - 1) / target;
    if (blocks > threads) blocks = (blocks + threads - 1) / threads * threads;
    return (count + blocks - 1) / blocks;
  }
};

/// Bᵀ d B of the In x In input window of tiles [t0, t0 + count), channels
/// [c0, c0 + width), into tile i, channel c - c0 of `v` (zeros outside the image).
template <typename S, int64_t B>
void transform_inputs(const Shape& s, const Tiling<S::Out>& tiling, const float* in, int64_t t0,
                      int64_t count, int64_t c0, int64_t width, Tiles v) {
  using V = Vec<B>;
  constexpr int N = S::N, In = S::In;
  const int64_t blocks = s.ci / B;
  for (int64_t ti = 0; ti < count; ++ti) {
    const Tile t = tiling[t0 + ti];
    const int64_t y0 = S::origin(t.y, s.pad_h), x0 = S::origin(t.x, s.pad_w);
    const int64_t dh = s.dil_h, dw = s.dil_w;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + (In - 1) * dh < s.h && x0 + (In - 1) * dw < s.w;
    for (int64_t cb = c0 / B; cb < (c0 + width) / B; ++cb) {
      const float* img = in + (t.n * blocks + cb) * s.h * s.w * B;
      V d[In][In];
#pragma GCC unroll 5
      for (int i = 0; i < In; ++i)
#pragma GCC unroll 5
        for (int j = 0; j < In; ++j) {
          const int64_t yy = y0 + i * dh, xx = x0 + j * dw;
          if (inside || (yy >= 0 && yy < s.h && xx >= 0 && xx < s.w))
            load(d[i][j], img + (yy * s.w + xx) * B);
          else
            d[i][j] = V{};
        }
      V e[N][In];  // Bᵀ d
      columns(d, e, [](const V(&a)[In], V(&b)[N]) { S::input(a, b); });
      float* dst = v.base + ti * v.row + cb * B - c0;
#pragma GCC unroll 5
      for (int i = 0; i < N; ++i) {  // (Bᵀ d) B: the rows
        V t[N];
        S::input(e[i], t);
#pragma GCC unroll 5
        for (int j = 0; j < N; ++j) store(dst + (i * N + j) * v.pos, t[j]);
      }
    }
  }
}

/// The convolution with the transformed filters u (transform_filters), in
/// blocks of tiles and, on wide layers, chunks of at most kChunk input and
/// output channels: the products of the input chunks add up in the output
/// chunk's transformed outputs, which are transformed back once complete.
template <typename S, int64_t B>
void convolve(const Shape& s, const float* in, const float* u, const float* bias, bool relu,
              float* out) {
  using V = Vec<B>;
  constexpr int N = S::N, P = N * N, Out = S::Out;
  const Tiling<Out> tiling(s);
  if (tiling.count == 0) return;  // no outputs
  const int nthreads = omp_get_max_threads();
  const int64_t ci_chunk = std::min(s.ci, kChunk), co_chunk = std::min(s.co, kChunk);
  const int64_t per_block =
      tiling.per_block(P * (ci_chunk + co_chunk), kRows, nthreads, s.ci * s.co);
  const int64_t blocks = (tiling.count + per_block - 1) / per_block;
  const int64_t panel = 2 * B;
  // Floats per position of the transformed inputs and outputs.
  const int64_t v_pos = spread(per_block * ci_chunk), m_pos = spread(per_block * co_chunk);

#pragma omp parallel num_threads(static_cast <int>(std::min <int64_t>(nthreads, blocks)))
  {
    float* const vt = floats(Buf::winograd_tiles, P * (v_pos + m_pos));  // [pos][tile][ci]
    float* const mt = vt + P * v_pos;                                    // [pos][tile][co]
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t t0 = blk * per_block, count = std::min(per_block, tiling.count - t0);
      for (int64_t o0 = 0; o0 < s.co; o0 += co_chunk) {
        const int64_t ow = std::min(co_chunk, s.co - o0);
        for (int64_t c0 = 0; c0 < s.ci; c0 += ci_chunk) {
          const int64_t cw = std::min(ci_chunk, s.ci - c0);
          if (o0 == 0 || ci_chunk < s.ci)  // once a block where one chunk holds them all
            transform_inputs<S, B>(s, tiling, in, t0, count, c0, cw, Tiles{vt, v_pos, cw});
          // The P products: tiles x cw by cw x ow.
          for (int p = 0; p < P; ++p)
            for (int64_t o = o0; o < o0 + ow; o += panel) {
              const int64_t width = std::min(panel, s.co - o);
              const float* b = u + p * s.ci * s.co + o * s.ci + c0 * width;
              for (int64_t r = 0; r < count; r += kRows) {
                const int64_t rows = std::min(kRows, count - r);
                const float* a = vt + p * v_pos + r * cw;
                float* c = mt + p * m_pos + r * ow + (o - o0);
                const bool add = c0 > 0;
                if (width == panel && !add)
                  products<B, 2, false>(rows, a, cw, 1, b, panel, cw, c, ow);
                else if (width == panel)
                  products<B, 2, true>(rows, a, cw, 1, b, panel, cw, c, ow);
                else if (!add)
                  products<B, 1, false>(rows, a, cw, 1, b, B, cw, c, ow);
                else
                  products<B, 1, true>(rows, a, cw, 1, b, B, cw, c, ow);
              }
            }
        }
        // Outputs: Aᵀ m A, the bias, the ReLU; the last row and column of
        // tiles may hang over the map.
        const int64_t cb_out = s.co / B;
        for (int64_t ti = 0; ti < count; ++ti) {
          const Tile t = tiling[t0 + ti];
          for (int64_t ob = o0 / B; ob < (o0 + ow) / B; ++ob) {
            const float* src = mt + ti * ow + ob * B - o0;
            V m[N][N];
#pragma GCC unroll 25
            for (int p = 0; p < P; ++p) load(m[p / N][p % N], src + p * m_pos);
            V e[Out][N];  // Aᵀ m
            columns(m, e, [](const V(&a)[N], V(&b)[Out]) { S::output(a, b); });
            V b{};
            if (bias) std::memcpy(&b, bias + ob * B, sizeof b);  // any alignment
            float* img = out + (t.n * cb_out + ob) * s.oh * s.ow * B;
            for (int i = 0; i < t.rows; ++i) {
              V r[Out];  // (Aᵀ m) A: the rows
              S::output(e[i], r);
              float* row = img + ((t.y + i * s.dil_h) * s.ow + t.x) * B;
#pragma GCC unroll 4
              for (int j = 0; j < Out; ++j) {
                V v = r[j] + b;
                if (relu) v = v > V{} ? v : V{};
                if (j < t.cols) store(row + j * s.dil_w * B, v);
              }
            }
          }
        }
      }
    }
  }
}

/// A h Aᵀ of dy's Out x Out tiles [t0, t0 + count) into tile i, channel k of
/// `h` (zeros outside the map).
template <typename S, int64_t B>
void transform_gradients(const Shape& s, const Tiling<S::Out>& tiling, const float* dy, int64_t t0,
                         int64_t count, Tiles h) {
  using V = Vec<B>;
  constexpr int N = S::N, Out = S::Out;
  const int64_t blocks = s.co / B;
  for (int64_t ti = 0; ti < count; ++ti) {
    const Tile t = tiling[t0 + ti];
    if (t.rows == 0 || t.cols == 0) {  // wholly outside: no gradient
      for (int p = 0; p < N * N; ++p) std::fill_n(h.base + p * h.pos + ti * h.row, s.co, 0.0f);
      continue;
    }
    const int64_t down = s.dil_h * s.ow * B, right = s.dil_w * B;
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const float* img = dy + ((t.n * blocks + kb) * s.oh + t.y) * s.ow * B + t.x * B;
      V g[Out][Out];
#pragma GCC unroll 4
      for (int i = 0; i < Out; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < Out; ++j)
          if (i < t.rows && j < t.cols)
            load(g[i][j], img + i * down + j * right);
          else
            g[i][j] = V{};
      V q[N][Out];  // A h
      columns(g, q, [](const V(&a)[Out], V(&b)[N]) { S::gradient(a, b); });
      float* dst = h.base + ti * h.row + kb * B;
#pragma GCC unroll 5
      for (int a = 0; a < N; ++a) {  // (A h) Aᵀ: the rows
        V r[N];
        S::gradient(q[a], r);
#pragma GCC unroll 5
        for (int b = 0; b < N; ++b) store(dst + (a * N + b) * h.pos, r[b]);
      }
    }
  }
}

/// The P products co x count by count x ci of a block's transformed gradients
/// h (tile, co) and inputs v (tile, ci), positions [p0, p1) and output
/// channels [k0, k1), into (Accumulate: added to) m[pos][k][ci].
template <int64_t B, bool Accumulate>
void weight_products(const Shape& s, Tiles h, Tiles v, int64_t count, int p0, int p1, int64_t k0,
                     int64_t k1, float* m) {
  const int64_t panel = 2 * B;
  for (int p = p0; p < p1; ++p)
    for (int64_t k = k0; k < k1; k += kRows)
      for (int64_t c = 0; c < s.ci; c += panel) {
        const float* a = h.base + p * h.pos + k;
        const float* b = v.base + p * v.pos + c;
        float* out = m + (p * s.co + k) * s.ci + c;
        const int64_t rows = std::min(kRows, k1 - k);
        if (s.ci - c >= panel)
          products<B, 2, Accumulate>(rows, a, 1, h.row, b, v.row, count, out, s.ci);
        else
          products<B, 1, Accumulate>(rows, a, 1, h.row, b, v.row, count, out, s.ci);
      }
}

/// A weight-gradient block of `per_block` tiles in this thread's tile buffer:
/// its transformed inputs v (tile, ci) and gradients h (tile, co), P positions.
struct WeightTiles {
  Tiles v, h;
};
WeightTiles weight_tiles(const Shape& s, int64_t per_block, int P) {
  const int64_t v_row = tile_row(s.ci), h_row = tile_row(s.co);
  const int64_t v_pos = spread(per_block * v_row), h_pos = spread(per_block * h_row);
  float* const base = floats(Buf::winograd_tiles, P * (v_pos + h_pos));
  return {{base, v_pos, v_row}, {base + P * v_pos, h_pos, h_row}};
}

/// The sums M[pos][k][ci] of the weight gradient's products over the batch's
/// tiles, a set per thread: the tiles in blocks, a thread's blocks added into
/// its own set. Returns the sets (`team` of them, P·co·ci floats apart).
template <typename S, int64_t B>
const float* weight_sums_per_thread(const Shape& s, const Tiling<S::Out>& tiling, const float* x,
                                    const float* dy, int& team) {
  constexpr int P = S::N * S::N;
  const int nthreads = omp_get_max_threads();
  // At least kWeightBlock tiles a block where there are enough: each block
  // adds into the thread's sums once (P·s.co·ci floats).
  const int64_t per_block =
      tiling.per_block(P * (s.ci + s.co),
                       std::min(kWeightBlock, (tiling.count + nthreads - 1) / nthreads), nthreads);
  const int64_t blocks = (tiling.count + per_block - 1) / per_block;
  team = static_cast<int>(std::min<int64_t>(nthreads, blocks));
  const int64_t m_size = P * s.co * s.ci;
  float* const partial = floats(Buf::winograd_sums, team * m_size);
#pragma omp parallel num_threads(team)
  {
    float* const m = partial + omp_get_thread_num() * m_size;  // [pos][k][ci]
    std::fill_n(m, m_size, 0.0f);
    const auto [v, h] = weight_tiles(s, per_block, P);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t t0 = blk * per_block, count = std::min(per_block, tiling.count - t0);
      transform_inputs<S, B>(s, tiling, x, t0, count, 0, s.ci, v);
      transform_gradients<S, B>(s, tiling, dy, t0, count, h);
      weight_products<B, true>(s, h, v, count, 0, P, 0, s.co, m);
    }
  }
  return partial;
}

/// The same sums as one set that the threads share: per block of tiles, the
/// threads transform a share of its tiles each, then each adds the products
/// of its own positions (and, past P threads, a share of the output channels).
/// The sums take the buffer of the transformed filters, which the forward pass
/// has already grown to their size.
template <typename S, int64_t B>
const float* weight_sums_shared(const Shape& s, const Tiling<S::Out>& tiling, const float* x,
                                const float* dy) {
  constexpr int P = S::N * S::N;
  const int64_t per_block_max = std::max<int64_t>(
      1, std::min(kSharedBlockBytes / (P * (s.ci + s.co) * int64_t{sizeof(float)}), tiling.count));
  const int64_t blocks = (tiling.count + per_block_max - 1) / per_block_max;
  const int64_t per_block = (tiling.count + blocks - 1) / blocks;
  float* const m = floats(Buf::winograd_filters, P * s.co * s.ci);  // [pos][k][ci]
  const auto [v, h] = weight_tiles(s, per_block, P);
#pragma omp parallel
  {
    const int64_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
    // Work items: the P positions, each cut into `parts` runs of rows of k.
    const int64_t parts = (threads + P - 1) / P, items = P * parts;
    const int64_t row_groups = (s.co + kRows - 1) / kRows;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t t0 = blk * per_block, count = std::min(per_block, tiling.count - t0);
      const int64_t lo = count * thread / threads, hi = count * (thread + 1) / threads;
      transform_inputs<S, B>(s, tiling, x, t0 + lo, hi - lo, 0, s.ci, v.from(lo));
      transform_gradients<S, B>(s, tiling, dy, t0 + lo, hi - lo, h.from(lo));
#pragma omp barrier
      for (int64_t item = items * thread / threads; item < items * (thread + 1) / threads; ++item) {
        const int p = static_cast<int>(item / parts);
        const int64_t part = item % parts;
        const int64_t k0 = row_groups * part / parts * kRows;
        const int64_t k1 = std::min(s.co, row_groups * (part + 1) / parts * kRows);
        if (blk == 0)
          weight_products<B, false>(s, h, v, count, p, p + 1, k0, k1, m);
        else
          weight_products<B, true>(s, h, v, count, p, p + 1, k0, k1, m);
      }
#pragma omp barrier
    }
  }
  return m;
}

/// dw = Σ over the batch's tiles of Gᵀ [(A h Aᵀ) ⊙ (Bᵀ d B)] G: the P products
/// co x tiles by tiles x ci summed over blocks of tiles (weight_sums_per_thread
/// or, on wide layers, weight_sums_shared), the threads' sums added in thread
/// order and transformed in f64. db = Σ dy.
template <typename S, int64_t B>
void weight_gradient(const Shape& s, const float* x, const float* dy, float* dw, float* db) {
  constexpr int N = S::N, P = N * N;
  const Tiling<S::Out> tiling(s);
  if (tiling.count == 0) {  // no outputs: no gradient
    std::fill_n(dw, s.co * s.ci * 9, 0.0f);
    if (db) std::fill_n(db, s.co, 0.0f);
    return;
  }
  int team = 1;
  const float* const partial = s.ci * s.co >= kSharedSumsPairs
                                   ? weight_sums_shared<S, B>(s, tiling, x, dy)
                                   : weight_sums_per_thread<S, B>(s, tiling, x, dy, team);
  const int64_t m_size = P * s.co * s.ci;
  // Gᵀ M G per filter, M the threads' sums, for runs of kRun input channels:
  // the sums of a run are read as contiguous rows, added in thread order in f64.
  constexpr int64_t kRun = 64;
  const int64_t runs = (s.ci + kRun - 1) / kRun;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < s.co; ++o)
    for (int64_t run = 0; run < runs; ++run) {
      const int64_t i0 = run * kRun, n = std::min(kRun, s.ci - i0);
      double mm[P][kRun];
      for (int p = 0; p < P; ++p) {
        const float* src = partial + (p * s.co + o) * s.ci + i0;
        for (int64_t i = 0; i < n; ++i) mm[p][i] = src[i];
        for (int t = 1; t < team; ++t)
          for (int64_t i = 0; i < n; ++i) mm[p][i] += src[t * m_size + i];
      }
      float* const out = dw + (o * s.ci + i0) * 9;
      for (int64_t i = 0; i < n; ++i) {
        double q[3][N];  // Gᵀ M: rows a of M (position a·N + b) combined
        for (int b = 0; b < N; ++b) {
          double col[N], g[3];
          for (int a = 0; a < N; ++a) col[a] = mm[a * N + b][i];
          S::taps(col, g);
          for (int r = 0; r < 3; ++r) q[r][b] = g[r];
        }
        for (int r = 0; r < 3; ++r) {  // (Gᵀ M) G
          double g[3];
          S::taps(q[r], g);
          for (int c = 0; c < 3; ++c) out[i * 9 + r * 3 + c] = static_cast<float>(g[c]);
        }
      }
    }
  if (db) {
    using V = Vec<B>;
    const int64_t blocks_k = s.co / B, plane = s.oh * s.ow;
#pragma omp parallel for schedule(static)
    for (int64_t kb = 0; kb < blocks_k; ++kb) {
      V sum{};
      for (int64_t n = 0; n < s.n; ++n) {
        const float* src = dy + (n * blocks_k + kb) * plane * B;
        for (int64_t q = 0; q < plane; ++q) {
          V v;
          load(v, src + q * B);
          sum += v;
        }
      }
      std::memcpy(db + kb * B, &sum, sizeof sum);  // any alignment
    }
  }
}

/// The convolution of `in` by algorithm S with the filters f(o, i, r, c):
/// transform_filters, then convolve.
template <typename S, typename Filter>
void run(const Shape& s, const float* in, Filter f, const float* bias, bool relu, float* out) {
  float* u = floats(Buf::winograd_filters, S::N * S::N * s.ci * s.co);
  with_channel_block([&](auto blk) {
    constexpr int64_t B = decltype(blk)::value;
    transform_filters<S, B>(s, f, u);
    convolve<S, B>(s, in, u, bias, relu, out);
  });
}

}  // namespace

int64_t winograd_tiles(int64_t n, int64_t oh, int64_t ow, int64_t dil_h, int64_t dil_w,
                       int64_t tile) {
  return n * dil_h * dil_w * (((oh + dil_h - 1) / dil_h + tile - 1) / tile) *
         (((ow + dil_w - 1) / dil_w + tile - 1) / tile);
}

void winograd_forward(const WinogradGeom& g, const float* x, const float* weight, const float* bias,
                      bool relu, float* y) {
  const Shape s{g.n, g.c, g.h, g.w, g.k, g.oh, g.ow, g.pad_h, g.pad_w, g.dil_h, g.dil_w};
  const auto f = [&](int64_t o, int64_t i, int r, int c) {
    return weight[((o * g.c + i) * 3 + r) * 3 + c];
  };
  if (g.stride == 2)
    run<Stride2>(s, x, f, bias, relu, y);
  else
    run<Stride1>(s, x, f, bias, relu, y);
}

void winograd_backward_data(const WinogradGeom& g, const float* dy, const float* weight,
                            float* dx) {
  if (g.stride == 2) {
    // Tiles of 4x4 input gradients, each from the 3x3 window of dy at half
    // its position; the taps as they are.
    const Shape s{g.n, g.k, g.oh, g.ow, g.c, g.h, g.w, 0, 0, 1, 1};
    run<Stride2Data>(
        s, dy,
        [&](int64_t o, int64_t i, int r, int c) { return weight[((i * g.c + o) * 3 + r) * 3 + c]; },
        nullptr, false, dx);
    return;
  }
  // dx = conv(dy, w') with w'(c, k, r, s) = w(k, c, 2 - r, 2 - s), the same
  // dilation d, padding 2·d - pad.
  const Shape s{
      g.n,     g.k,    g.oh, g.ow, g.c, g.h, g.w, 2 * g.dil_h - g.pad_h, 2 * g.dil_w - g.pad_w,
      g.dil_h, g.dil_w};
  run<Stride1>(
      s, dy,
      [&](int64_t o, int64_t i, int r, int c) {
        return weight[((i * g.c + o) * 3 + (2 - r)) * 3 + (2 - c)];
      },
      nullptr, false, dx);
}

void winograd_backward_weights(const WinogradGeom& g, const float* x, const float* dy,
                               float* dweight, float* dbias) {
  const Shape s{g.n, g.c, g.h, g.w, g.k, g.oh, g.ow, g.pad_h, g.pad_w, g.dil_h, g.dil_w};
  with_channel_block([&](auto blk) {
    constexpr int64_t B = decltype(blk)::value;
    if (g.stride == 2)
      weight_gradient<Stride2, B>(s, x, dy, dweight, dbias);
    else
      weight_gradient<Stride1, B>(s, x, dy, dweight, dbias);
  });
}

}  // namespace tcv::kernels::cpu
