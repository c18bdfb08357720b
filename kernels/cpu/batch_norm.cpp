// Batch norm: direct per-channel SIMD loops for every float dtype; bf16 data
// (mixed precision) with f32 parameters and statistics, computed in f32.
//
// Measured for (64, 32, 28, 28) forward+backward on 2 threads: these loops take
// 0.7-0.9 ms, oneDNN 2.6's plain-NCHW batch norm (ncsp_bnorm) 5.5-9.6 ms, and its
// blocked kernel needs four reorders around it. PyTorch 1.13 takes about 2 ms.
// The oneDNN path stays available (the *_onednn functions) as a cross-check.
#include "kernels/cpu/batch_norm.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/batch_norm_coef.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/dnnl_common.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {

namespace {

using dnnl::memory;
using namespace dnnl_util;

template <typename T>
const T* opt_ptr(const KTensor* t) {
  return t ? t->ptr<T>() : nullptr;
}
template <typename T>
T* opt_mut(const KTensor* t) {
  return t ? t->ptr<T>() : nullptr;
}

// ------------------------------------------------------------- reference

// Planes smaller than this (late stages of small-input networks: 2x2, 4x4 maps)
// are summed straight into doubles; a SIMD reduction's setup and final
// horizontal add cost more than the few elements it covers.
constexpr int64_t kSmallPlane = 8;

// The plane reductions in T lanes, out of line so that every data type D
// reaches the same machine code: bf16 data is widened to T first (plane_in),
// and then sums exactly as the same values stored in T do. (Inlined into each
// instantiation, the compiler may vectorize the bf16 and the f32 loops with
// different lane counts, which reorders the sums: it did on AVX2.)
template <typename T>
[[gnu::noinline]] T plane_sum(const T* x, int64_t l) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < l; ++i) s += x[i];
  return s;
}

// Σ(x − m) and Σ(x − m)².
template <typename T>
[[gnu::noinline]] std::pair<T, T> plane_centered_sums(const T* x, T m, int64_t l) {
  T p1 = 0, p2 = 0;
#pragma omp simd reduction(+ : p1, p2)
  for (int64_t i = 0; i < l; ++i) {
    const T xc = x[i] - m;
    p1 += xc;
    p2 += xc * xc;
  }
  return {p1, p2};
}

// Σdy, Σdy·(x − m) and Σ(x − m).
template <typename T>
[[gnu::noinline]] std::array<T, 3> plane_grad_sums(const T* x, const T* dy, T m, int64_t l) {
  T a = 0, b = 0, xs = 0;
#pragma omp simd reduction(+ : a, b, xs)
  for (int64_t i = 0; i < l; ++i) {
    const T xc = x[i] - m;
    a += dy[i];
    b += dy[i] * xc;
    xs += xc;
  }
  return {a, b, xs};
}

// One plane of D data as T values: the data itself when D is T, else widened
// into `buf`.
template <typename T, typename D>
const T* plane_in(const D* p, int64_t l, std::vector<T>& buf) {
  if constexpr (std::is_same_v<T, D>) {
    return p;
  } else {
    buf.resize(static_cast<size_t>(l));
    for (int64_t i = 0; i < l; ++i) buf[static_cast<size_t>(i)] = static_cast<T>(p[i]);
    return buf.data();
  }
}

// Channels are independent, so threads split them. Each (n, c) plane is reduced
// with SIMD lanes in T, planes are combined in double.
//
// The statistics are taken about m, the batch mean rounded to T, and corrected
// by d = mean(x - m), the part of the mean that T cannot hold:
//   var = mean((x - m)^2) - d^2,   y = (x - m) * scale + (b - d * scale).
// Folding the mean into the shift (y = x * scale + (b - mean * scale)) or
// leaving out d loses about |mean| / std ulps: 1e-3 relative in f32 for a mean
// of 1000 and a std of 0.01 (BatchNorm.F32LargeMeanSmallSpreadMatchesF64). Here
// x - m is computed without loss for x near m, for one more add per element.
// y null: statistics only (and `rest`, when given, the part of each mean its
// rounding to T lost).
template <typename T, typename D = T>
void forward_loops(const BatchNormGeom& g, bool training, const D* x, const T* w, const T* b, D* y,
                   T* mean, T* var, T* rest = nullptr) {
  const int64_t count = g.n * g.l, l = g.l;
  parallel_for(
      g.c, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.n * g.l, 1)),
      [&](int64_t lo, int64_t hi) {
        std::vector<T> buf;
        for (int64_t c = lo; c < hi; ++c) {
          T m = mean[c];
          double d = 0;
          if (training) {
            double s = 0;
            for (int64_t n = 0; n < g.n; ++n) {
              const T* xp = plane_in(x + (n * g.c + c) * l, l, buf);
              if (l < kSmallPlane) {
                for (int64_t i = 0; i < l; ++i) s += static_cast<double>(xp[i]);
                continue;
              }
              s += plane_sum(xp, l);
            }
            m = static_cast<T>(s / static_cast<double>(count));
            double s1 = 0, s2 = 0;
            for (int64_t n = 0; n < g.n; ++n) {
              const T* xp = plane_in(x + (n * g.c + c) * l, l, buf);
              if (l < kSmallPlane) {
                for (int64_t i = 0; i < l; ++i) {
                  const double xc = static_cast<double>(xp[i] - m);
                  s1 += xc;
                  s2 += xc * xc;
                }
                continue;
              }
              const auto [p1, p2] = plane_centered_sums(xp, m, l);
              s1 += p1;
              s2 += p2;
            }
            d = s1 / static_cast<double>(count);
            mean[c] = static_cast<T>(static_cast<double>(m) + d);
            var[c] = static_cast<T>(std::max(0.0, s2 / static_cast<double>(count) - d * d));
            if (rest)
              rest[c] = static_cast<T>(static_cast<double>(m) + d - static_cast<double>(mean[c]));
          }
          if (!y) continue;  // statistics only
          const double invstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + g.eps);
          const double scale = invstd * (w ? static_cast<double>(w[c]) : 1.0);
          const T scale_t = static_cast<T>(scale);
          const T shift = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) - d * scale);
          const T lo = T(0), hi = T(6);
          const bool relu = g.act == BnAct::relu, relu6 = g.act == BnAct::relu6;
          for (int64_t n = 0; n < g.n; ++n) {
            const D* xp = x + (n * g.c + c) * l;
            D* yp = y + (n * g.c + c) * l;
#pragma omp simd
            for (int64_t i = 0; i < l; ++i) {
              const T v = (static_cast<T>(xp[i]) - m) * scale_t + shift;
              const T a = relu6 && v < lo ? lo : v;
              yp[i] = static_cast<D>(relu && !(v > T(0)) ? T(0) : (relu6 && hi < a ? hi : a));
            }
          }
        }
      });
}

// The saved mean is the batch mean rounded to T; in training the part it lost,
// d = mean(x - mean), is measured again and taken out of sum(dy * (x - mean))
// and of dx, as in the forward.
// With the group's sums (gdy, gdyx: Σdy, Σdy·xhat over gcount values) there is
// no reduction pass, and d is the group's (grest, the part of the group's mean
// that `mean` lost; null: 0).
template <typename T, typename D = T>
void backward_loops(const BatchNormGeom& g, bool training, const D* x, const D* dy, const T* w,
                    const T* mean, const T* var, D* dx, T* dw, T* db, const T* gdy = nullptr,
                    const T* gdyx = nullptr, const T* grest = nullptr, double gcount = 0) {
  const double count = gdy ? gcount : static_cast<double>(g.n * g.l);
  const int64_t l = g.l;
  parallel_for(g.c, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.n * g.l, 1)),
               [&](int64_t lo, int64_t hi) {
                 std::vector<T> xbuf, dybuf;
                 for (int64_t c = lo; c < hi; ++c) {
                   const T m = mean[c];
                   const double invstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + g.eps);
                   double sum_dy = 0, sum_dy_xc = 0, sum_xc = 0;
                   for (int64_t n = 0; n < (gdy ? 0 : g.n); ++n) {
                     const T* xp = plane_in(x + (n * g.c + c) * l, l, xbuf);
                     const T* dyp = plane_in(dy + (n * g.c + c) * l, l, dybuf);
                     if (l < kSmallPlane) {
                       for (int64_t i = 0; i < l; ++i) {
                         const double xc = static_cast<double>(xp[i] - m);
                         const double dyi = static_cast<double>(dyp[i]);
                         sum_dy += dyi;
                         sum_dy_xc += dyi * xc;
                         sum_xc += xc;
                       }
                       continue;
                     }
                     const auto [a, b, xs] = plane_grad_sums(xp, dyp, m, l);
                     sum_dy += a;
                     sum_dy_xc += b;
                     sum_xc += xs;
                   }
                   const BnBackwardCoef k = bn_backward_coef(c, sum_dy, sum_dy_xc, sum_xc, invstd,
                                                             count, training, w, gdy, gdyx, grest);
                   if (dw) dw[c] = static_cast<T>(k.dweight);
                   if (db) db[c] = static_cast<T>(k.dbias);
                   if (!dx) continue;
                   const T k_dy = static_cast<T>(k.k_dy);
                   const T k_xt = static_cast<T>(k.k_x);
                   const T k_0 = static_cast<T>(k.k_0);
                   for (int64_t n = 0; n < g.n; ++n) {
                     const D* xp = x + (n * g.c + c) * l;
                     const D* dyp = dy + (n * g.c + c) * l;
                     D* dxp = dx + (n * g.c + c) * l;
#pragma omp simd
                     for (int64_t i = 0; i < l; ++i)
                       dxp[i] = static_cast<D>(static_cast<T>(dyp[i]) * k_dy -
                                               (static_cast<T>(xp[i]) - m) * k_xt - k_0);
                   }
                 }
               });
}

// ------------------------------------------------------------- blocked

// The same computations on the blocked layout (nChw16c or nChw8c, kB channels
// a block: channel_block()): a thread takes whole blocks and runs the kB
// channels of a block in the SIMD lanes, reading each cache line once. Partial
// sums are f32 over chunks of a plane, combined in double.
constexpr int64_t kChunk = 256;

// Adds f(value of lane j at pixel i) into acc[k][j] over one plane of one image.
template <int K, int64_t kB, typename F>
void plane_sums(int64_t l, double (&acc)[K][kB], F f) {
  for (int64_t i0 = 0; i0 < l; i0 += kChunk) {
    const int64_t i1 = std::min(l, i0 + kChunk);
    float part[K][kB] = {};
    for (int64_t i = i0; i < i1; ++i) {
      float v[K][kB];
      f(i, v);
      for (int k = 0; k < K; ++k)
#pragma omp simd
        for (int64_t j = 0; j < kB; ++j) part[k][j] += v[k][j];
    }
    for (int k = 0; k < K; ++k)
      for (int64_t j = 0; j < kB; ++j) acc[k][j] += part[k][j];
  }
}

template <int64_t kB>
void forward_blocked(const BatchNormGeom& g, bool training, const float* x, const float* w,
                     const float* b, float* y, float* mean, float* var, float* rest = nullptr) {
  const int64_t blocks = g.c / kB, l = g.l;
  const double count = static_cast<double>(g.n * l);
  parallel_for(
      blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.n * l * kB, 1)),
      [&](int64_t lo, int64_t hi) {
        for (int64_t cb = lo; cb < hi; ++cb) {
          const float* xb = x + cb * l * kB;
          const int64_t image = blocks * l * kB;  // one image's elements
          float m[kB];
          double d[kB] = {};
          for (int64_t j = 0; j < kB; ++j) m[j] = mean[cb * kB + j];
          if (training) {
            double s[1][kB] = {};
            for (int64_t n = 0; n < g.n; ++n) {
              const float* xp = xb + n * image;
              plane_sums<1, kB>(l, s, [&](int64_t i, float(&v)[1][kB]) {
                for (int64_t j = 0; j < kB; ++j) v[0][j] = xp[i * kB + j];
              });
            }
            for (int64_t j = 0; j < kB; ++j) m[j] = static_cast<float>(s[0][j] / count);
            double s12[2][kB] = {};
            for (int64_t n = 0; n < g.n; ++n) {
              const float* xp = xb + n * image;
              plane_sums<2, kB>(l, s12, [&](int64_t i, float(&v)[2][kB]) {
                for (int64_t j = 0; j < kB; ++j) {
                  const float xc = xp[i * kB + j] - m[j];
                  v[0][j] = xc;
                  v[1][j] = xc * xc;
                }
              });
            }
            for (int64_t j = 0; j < kB; ++j) {
              d[j] = s12[0][j] / count;
              const double mu = static_cast<double>(m[j]) + d[j];
              mean[cb * kB + j] = static_cast<float>(mu);
              var[cb * kB + j] = static_cast<float>(std::max(0.0, s12[1][j] / count - d[j] * d[j]));
              if (rest) rest[cb * kB + j] = static_cast<float>(mu - mean[cb * kB + j]);
            }
          }
          if (!y) continue;  // statistics only
          float scale[kB], shift[kB];
          for (int64_t j = 0; j < kB; ++j) {
            const int64_t c = cb * kB + j;
            const double sc = (w ? static_cast<double>(w[c]) : 1.0) /
                              std::sqrt(static_cast<double>(var[c]) + g.eps);
            scale[j] = static_cast<float>(sc);
            shift[j] = static_cast<float>((b ? static_cast<double>(b[c]) : 0.0) - d[j] * sc);
          }
          const bool relu = g.act == BnAct::relu, relu6 = g.act == BnAct::relu6;
          for (int64_t n = 0; n < g.n; ++n) {
            const float* xp = xb + n * image;
            float* yp = y + cb * l * kB + n * image;
            for (int64_t i = 0; i < l; ++i)
#pragma omp simd
              for (int64_t j = 0; j < kB; ++j) {
                const float v = (xp[i * kB + j] - m[j]) * scale[j] + shift[j];
                const float a = relu6 && v < 0.0f ? 0.0f : v;
                yp[i * kB + j] = relu && !(v > 0.0f) ? 0.0f : (relu6 && 6.0f < a ? 6.0f : a);
              }
          }
        }
      });
}

template <int64_t kB>
void backward_blocked(const BatchNormGeom& g, bool training, const float* x, const float* dy,
                      const float* w, const float* mean, const float* var, float* dx, float* dw,
                      float* db, const float* gdy, const float* gdyx, const float* grest,
                      double gcount) {
  const int64_t blocks = g.c / kB, l = g.l;
  const double count = gdy ? gcount : static_cast<double>(g.n * l);
  parallel_for(blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.n * l * kB, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t cb = lo; cb < hi; ++cb) {
                   const int64_t image = blocks * l * kB, base = cb * l * kB;
                   float m[kB];
                   for (int64_t j = 0; j < kB; ++j) m[j] = mean[cb * kB + j];
                   double s[3][kB] = {};  // sum dy, sum dy * (x - m), sum (x - m)
                   for (int64_t n = 0; n < (gdy ? 0 : g.n); ++n) {
                     const float* xp = x + base + n * image;
                     const float* dyp = dy + base + n * image;
                     plane_sums<3, kB>(l, s, [&](int64_t i, float(&v)[3][kB]) {
                       for (int64_t j = 0; j < kB; ++j) {
                         const float xc = xp[i * kB + j] - m[j], dyi = dyp[i * kB + j];
                         v[0][j] = dyi;
                         v[1][j] = dyi * xc;
                         v[2][j] = xc;
                       }
                     });
                   }
                   float k_dy[kB], k_x[kB], k_0[kB];
                   for (int64_t j = 0; j < kB; ++j) {
                     const int64_t c = cb * kB + j;
                     const double invstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + g.eps);
                     const BnBackwardCoef k =
                         bn_backward_coef(c, s[0][j], s[1][j], s[2][j], invstd, count, training, w,
                                          gdy, gdyx, grest);
                     if (dw) dw[c] = static_cast<float>(k.dweight);
                     if (db) db[c] = static_cast<float>(k.dbias);
                     k_dy[j] = static_cast<float>(k.k_dy);
                     k_x[j] = static_cast<float>(k.k_x);
                     k_0[j] = static_cast<float>(k.k_0);
                   }
                   if (!dx) continue;
                   for (int64_t n = 0; n < g.n; ++n) {
                     const float* xp = x + base + n * image;
                     const float* dyp = dy + base + n * image;
                     float* dxp = dx + base + n * image;
                     for (int64_t i = 0; i < l; ++i)
#pragma omp simd
                       for (int64_t j = 0; j < kB; ++j)
                         dxp[i * kB + j] =
                             dyp[i * kB + j] * k_dy[j] - (xp[i * kB + j] - m[j]) * k_x[j] - k_0[j];
                   }
                 }
               });
}

void check_blocked(const BatchNormGeom& g, const KTensor& x) {
  TCV_CHECK(
      x.blocked && ((x.dtype == DType::f32 && whole_channel_blocks(g.c)) || x.dtype == DType::bf16),
      "[batch_norm] the blocked layout needs f32 data with channels in whole blocks of ",
      channel_block(), ", or bf16 (channels last)");
}

// The blocked loops for this CPU's block size (check_blocked has passed).
template <typename... A>
void forward_blocked_any(const A&... a) {
  with_channel_block([&](auto b) { forward_blocked<decltype(b)::value>(a...); });
}
template <typename... A>
void backward_blocked_any(const A&... a) {
  with_channel_block([&](auto b) { backward_blocked<decltype(b)::value>(a...); });
}

// ------------------------------------------------------------- channels last (bf16)

// bf16 activations are held channels last (kernels/cpu/blocked.h): pixel p's C
// channels are contiguous. Threads take blocks of pixels and run the channels
// in the SIMD lanes; each block's sums are f32 over at most kChunk pixels,
// blocks are combined in double. The statistics follow forward_loops (taken
// about m, the batch mean rounded to f32, corrected by d = mean(x - m)).

// bf16 <-> f32 on the raw bits, in forms the compiler vectorizes: widening is a
// shift, narrowing rounds to nearest even (NaN stays a quiet NaN).
inline float widen(BFloat16 v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
}
inline BFloat16 narrow(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  BFloat16 r;
  r.bits = (u & 0x7fffffffu) > 0x7f800000u
               ? uint16_t{0x7fc0}
               : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return r;
}

// Per-channel sums over all pixels of channels-last data, K of them: pixel
// blocks of kChunk summed in f32, blocks combined in double. add(acc, p)
// adds pixel p's contributions to acc[k * C + c].
template <int K, typename Add>
void nhwc_sums(const BatchNormGeom& g, std::vector<double> (&sums)[K], Add add) {
  const int64_t c = g.c, pixels = g.n * g.l;
  const int64_t blocks = (pixels + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(blocks * K * c));
  parallel_for(blocks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(static_cast<size_t>(K * c));
    for (int64_t bi = lo; bi < hi; ++bi) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t p1 = std::min(pixels, (bi + 1) * kChunk);
      for (int64_t p = bi * kChunk; p < p1; ++p) add(acc.data(), p);
      double* out = part.data() + bi * K * c;
      for (int64_t j = 0; j < K * c; ++j) out[j] = acc[static_cast<size_t>(j)];
    }
  });
  for (int k = 0; k < K; ++k) sums[k].assign(static_cast<size_t>(c), 0.0);
  for (int64_t bi = 0; bi < blocks; ++bi)
    for (int k = 0; k < K; ++k)
      for (int64_t j = 0; j < c; ++j)
        sums[k][static_cast<size_t>(j)] += part[static_cast<size_t>((bi * K + k) * c + j)];
}

void forward_nhwc(const BatchNormGeom& g, bool training, const BFloat16* x, const float* w,
                  const float* b, BFloat16* y, float* mean, float* var, float* rest = nullptr) {
  const int64_t c = g.c, pixels = g.n * g.l;
  const double count = static_cast<double>(pixels);
  std::vector<float> m(static_cast<size_t>(c)), scale(static_cast<size_t>(c)),
      shift(static_cast<size_t>(c));
  std::vector<double> d(static_cast<size_t>(c), 0.0);
  if (training) {
    std::vector<double> s[1];
    nhwc_sums<1>(g, s, [&](float* acc, int64_t p) {
      const BFloat16* xp = x + p * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) acc[j] += widen(xp[j]);
    });
    for (int64_t j = 0; j < c; ++j) m[j] = static_cast<float>(s[0][j] / count);
    const float* mp = m.data();
    std::vector<double> s12[2];
    nhwc_sums<2>(g, s12, [&](float* acc, int64_t p) {
      const BFloat16* xp = x + p * c;
      float* a1 = acc;
      float* a2 = acc + c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float xc = widen(xp[j]) - mp[j];
        a1[j] += xc;
        a2[j] += xc * xc;
      }
    });
    for (int64_t j = 0; j < c; ++j) {
      d[j] = s12[0][j] / count;
      mean[j] = static_cast<float>(static_cast<double>(m[j]) + d[j]);
      var[j] = static_cast<float>(std::max(0.0, s12[1][j] / count - d[j] * d[j]));
      if (rest) rest[j] = static_cast<float>(static_cast<double>(m[j]) + d[j] - mean[j]);
    }
  } else {
    for (int64_t j = 0; j < c; ++j) m[j] = mean[j];
  }
  if (!y) return;  // statistics only
  for (int64_t j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(var[j]) + g.eps);
    const double sc = invstd * (w ? static_cast<double>(w[j]) : 1.0);
    scale[j] = static_cast<float>(sc);
    shift[j] = static_cast<float>((b ? static_cast<double>(b[j]) : 0.0) - d[j] * sc);
  }
  const bool relu = g.act == BnAct::relu, relu6 = g.act == BnAct::relu6;
  const float* mp = m.data();
  const float* sp = scale.data();
  const float* hp = shift.data();
  // Captured by value: loads through the closure would keep the loop scalar.
  parallel_for(pixels, std::max<int64_t>(1, kGrain / std::max<int64_t>(c, 1)),
               [=](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   const BFloat16* xp = x + p * c;
                   BFloat16* yp = y + p * c;
#pragma omp simd
                   for (int64_t j = 0; j < c; ++j) {
                     // The activations as forward_loops applies them.
                     const float v = (widen(xp[j]) - mp[j]) * sp[j] + hp[j];
                     const float a = relu6 && v < 0.0f ? 0.0f : v;
                     yp[j] = narrow(relu && !(v > 0.0f) ? 0.0f : (relu6 && 6.0f < a ? 6.0f : a));
                   }
                 }
               });
}

void backward_nhwc(const BatchNormGeom& g, bool training, const BFloat16* x, const BFloat16* dy,
                   const float* w, const float* mean, const float* var, BFloat16* dx, float* dw,
                   float* db, const float* gdy, const float* gdyx, const float* grest,
                   double gcount) {
  const int64_t c = g.c, pixels = g.n * g.l;
  const double count = gdy ? gcount : static_cast<double>(pixels);
  std::vector<double> s[3];
  if (!gdy) {
    nhwc_sums<3>(g, s, [&](float* acc, int64_t p) {
      const BFloat16* xp = x + p * c;
      const BFloat16* dp = dy + p * c;
      float* a0 = acc;
      float* a1 = acc + c;
      float* a2 = acc + 2 * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float xc = widen(xp[j]) - mean[j], gy = widen(dp[j]);
        a0[j] += gy;
        a1[j] += gy * xc;
        a2[j] += xc;
      }
    });
  }
  std::vector<float> k_dy(static_cast<size_t>(c)), k_xt(static_cast<size_t>(c)),
      k_0(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(var[j]) + g.eps);
    const BnBackwardCoef k = bn_backward_coef(j, s[0][j], s[1][j], s[2][j], invstd, count, training,
                                              w, gdy, gdyx, grest);
    if (dw) dw[j] = static_cast<float>(k.dweight);
    if (db) db[j] = static_cast<float>(k.dbias);
    k_dy[j] = static_cast<float>(k.k_dy);
    k_xt[j] = static_cast<float>(k.k_x);
    k_0[j] = static_cast<float>(k.k_0);
  }
  if (!dx) return;
  const float* a = k_dy.data();
  const float* bx = k_xt.data();
  const float* z = k_0.data();
  parallel_for(pixels, std::max<int64_t>(1, kGrain / std::max<int64_t>(c, 1)),
               [=](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   const BFloat16* xp = x + p * c;
                   const BFloat16* dp = dy + p * c;
                   BFloat16* op = dx + p * c;
#pragma omp simd
                   for (int64_t j = 0; j < c; ++j)
                     op[j] = narrow(widen(dp[j]) * a[j] - (widen(xp[j]) - mean[j]) * bx[j] - z[j]);
                 }
               });
}

// ------------------------------------------------------------- oneDNN

struct BnEntry {
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_backward bwd;
  memory::desc data_md, stat_md;
};

Cache<BnEntry>& bn_cache() {
  static Cache<BnEntry> cache;
  return cache;
}

const BnEntry& entry(const BatchNormGeom& g, bool training, bool has_w, bool has_b) {
  int64_t eps_bits;
  const double eps = g.eps;
  static_assert(sizeof(eps_bits) == sizeof(eps));
  std::memcpy(&eps_bits, &eps, sizeof(eps));
  const Key key{g.n, g.c, g.l, eps_bits, training, has_w, has_b};
  return bn_cache().get(key, [&] {
    auto e = std::make_unique<BnEntry>();
    e->data_md = plain_md({g.n, g.c, g.l, 1});
    e->stat_md = plain_md({g.c});
    auto flags = dnnl::normalization_flags::none;
    if (has_w) flags |= dnnl::normalization_flags::use_scale;
    if (has_b) flags |= dnnl::normalization_flags::use_shift;
    if (!training) flags |= dnnl::normalization_flags::use_global_stats;
    const dnnl::primitive_attr attr = default_attr();
    const float eps_f = static_cast<float>(g.eps);
    e->fwd_pd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, e->data_md,
                                                eps_f, flags),
        attr, engine());
    e->fwd = dnnl::batch_normalization_forward(e->fwd_pd);
    const auto bwd_prop =
        has_w || has_b ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
    e->bwd_pd = dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(bwd_prop, e->data_md, e->data_md, eps_f, flags),
        attr, engine(), e->fwd_pd);
    e->bwd = dnnl::batch_normalization_backward(e->bwd_pd);
    return e;
  });
}

void forward_dnnl(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor* w,
                  const KTensor* b, const KTensor& y, const KTensor& mean, const KTensor& var) {
  TCV_CHECK(g.act == BnAct::none,
            "[batch_norm] the oneDNN path (a cross-check) has no fused activation");
  try {
    const BnEntry& e = entry(g, training, w != nullptr, b != nullptr);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e.data_md, x.data)},
                                         {DNNL_ARG_DST, wrap(e.data_md, y.data)},
                                         {DNNL_ARG_MEAN, wrap(e.stat_md, mean.data)},
                                         {DNNL_ARG_VARIANCE, wrap(e.stat_md, var.data)},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad(e.fwd_pd)}};
    if (w) args.emplace(DNNL_ARG_SCALE, wrap(e.stat_md, w->data));
    if (b) args.emplace(DNNL_ARG_SHIFT, wrap(e.stat_md, b->data));
    e.fwd.execute(stream(), args);
  } catch (const dnnl::error& err) {
    rethrow("batch_norm", err);
  }
}

void check_f32(const KTensor& t) {
  TCV_CHECK(t.dtype == DType::f32 && t.is_contiguous(),
            "[batch_norm] oneDNN path expects contiguous f32 tensors, got ", dtype_name(t.dtype));
}

template <typename T>
void update_running(const BatchNormGeom& g, const RunningStats& r, const T* mean, const T* var) {
  const double count = static_cast<double>(g.n * g.l), m = r.momentum;
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  T* rm = r.mean->ptr<T>();
  T* rv = r.var->ptr<T>();
  for (int64_t c = 0; c < g.c; ++c) {
    rm[c] = static_cast<T>((1 - m) * static_cast<double>(rm[c]) + m * static_cast<double>(mean[c]));
    rv[c] = static_cast<T>((1 - m) * static_cast<double>(rv[c]) +
                           m * unbias * static_cast<double>(var[c]));
  }
}

}  // namespace

void batch_norm_forward_train(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                              const KTensor* bias, const KTensor& y, const KTensor& mean,
                              const KTensor& var, const RunningStats& running) {
  if (g.blocked && x.dtype == DType::bf16) {
    check_blocked(g, x);
    forward_nhwc(g, true, x.ptr<BFloat16>(), opt_ptr<float>(weight), opt_ptr<float>(bias),
                 y.ptr<BFloat16>(), mean.ptr<float>(), var.ptr<float>());
    if (running.mean) update_running<float>(g, running, mean.ptr<float>(), var.ptr<float>());
    return;
  }
  if (g.blocked) {
    check_blocked(g, x);
    forward_blocked_any(g, true, x.ptr<float>(), opt_ptr<float>(weight), opt_ptr<float>(bias),
                        y.ptr<float>(), mean.ptr<float>(), var.ptr<float>());
    if (running.mean) update_running<float>(g, running, mean.ptr<float>(), var.ptr<float>());
    return;
  }
  if (x.dtype == DType::bf16) {  // bf16 data, f32 parameters and statistics
    forward_loops<float, BFloat16>(g, true, x.ptr<BFloat16>(), opt_ptr<float>(weight),
                                   opt_ptr<float>(bias), y.ptr<BFloat16>(), mean.ptr<float>(),
                                   var.ptr<float>());
    if (running.mean) update_running<float>(g, running, mean.ptr<float>(), var.ptr<float>());
    return;
  }
  TCV_DISPATCH_FLOAT(x.dtype, "batch_norm", {
    forward_loops<scalar_t>(g, true, x.ptr<scalar_t>(), opt_ptr<scalar_t>(weight),
                            opt_ptr<scalar_t>(bias), y.ptr<scalar_t>(), mean.ptr<scalar_t>(),
                            var.ptr<scalar_t>());
    if (running.mean)
      update_running<scalar_t>(g, running, mean.ptr<scalar_t>(), var.ptr<scalar_t>());
  });
}

void batch_norm_stats(const BatchNormGeom& g, const KTensor& x, const KTensor& mean,
                      const KTensor& var, const KTensor* mean_rest) {
  if (g.blocked && x.dtype == DType::bf16) {
    check_blocked(g, x);
    return forward_nhwc(g, true, x.ptr<BFloat16>(), nullptr, nullptr, nullptr, mean.ptr<float>(),
                        var.ptr<float>(), opt_mut<float>(mean_rest));
  }
  if (g.blocked) {
    check_blocked(g, x);
    return forward_blocked_any(g, true, x.ptr<float>(), nullptr, nullptr, nullptr,
                               mean.ptr<float>(), var.ptr<float>(), opt_mut<float>(mean_rest));
  }
  if (x.dtype == DType::bf16)
    return forward_loops<float, BFloat16>(g, true, x.ptr<BFloat16>(), nullptr, nullptr, nullptr,
                                          mean.ptr<float>(), var.ptr<float>(),
                                          opt_mut<float>(mean_rest));
  TCV_DISPATCH_FLOAT(x.dtype, "batch_norm_stats", {
    forward_loops<scalar_t, scalar_t>(g, true, x.ptr<scalar_t>(), nullptr, nullptr, nullptr,
                                      mean.ptr<scalar_t>(), var.ptr<scalar_t>(),
                                      opt_mut<scalar_t>(mean_rest));
  });
}

void batch_norm_forward_eval(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                             const KTensor* bias, const KTensor& mean, const KTensor& var,
                             const KTensor& y) {
  if (g.blocked && x.dtype == DType::bf16) {
    check_blocked(g, x);
    return forward_nhwc(g, false, x.ptr<BFloat16>(), opt_ptr<float>(weight), opt_ptr<float>(bias),
                        y.ptr<BFloat16>(), const_cast<float*>(mean.ptr<float>()),
                        const_cast<float*>(var.ptr<float>()));
  }
  if (g.blocked) {
    check_blocked(g, x);
    return forward_blocked_any(g, false, x.ptr<float>(), opt_ptr<float>(weight),
                               opt_ptr<float>(bias), y.ptr<float>(), mean.ptr<float>(),
                               var.ptr<float>());
  }
  if (x.dtype == DType::bf16)
    return forward_loops<float, BFloat16>(g, false, x.ptr<BFloat16>(), opt_ptr<float>(weight),
                                          opt_ptr<float>(bias), y.ptr<BFloat16>(),
                                          mean.ptr<float>(), var.ptr<float>());
  TCV_DISPATCH_FLOAT(x.dtype, "batch_norm", {
    forward_loops<scalar_t>(g, false, x.ptr<scalar_t>(), opt_ptr<scalar_t>(weight),
                            opt_ptr<scalar_t>(bias), y.ptr<scalar_t>(), mean.ptr<scalar_t>(),
                            var.ptr<scalar_t>());
  });
}

void batch_norm_backward(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                         const KTensor* weight, const KTensor& mean, const KTensor& var,
                         const KTensor* dx, const KTensor* dweight, const KTensor* dbias,
                         const GroupGradSums* group) {
  check_group_grad_sums(group, training, dweight, dbias);
  const double gcount = group ? group->count : 0.0;
  if (g.blocked && x.dtype == DType::bf16) {
    check_blocked(g, x);
    TCV_CHECK(dy.blocked && (!dx || dx->blocked),
              "[batch_norm_backward] x, dy and dx must all be in the blocked layout");
    return backward_nhwc(g, training, x.ptr<BFloat16>(), dy.ptr<BFloat16>(), opt_ptr<float>(weight),
                         mean.ptr<float>(), var.ptr<float>(), opt_mut<BFloat16>(dx),
                         opt_mut<float>(dweight), opt_mut<float>(dbias),
                         group ? opt_ptr<float>(group->sum_dy) : nullptr,
                         group ? opt_ptr<float>(group->sum_dy_xhat) : nullptr,
                         group ? opt_ptr<float>(group->mean_rest) : nullptr, gcount);
  }
  if (g.blocked) {
    check_blocked(g, x);
    TCV_CHECK(dy.blocked && (!dx || dx->blocked),
              "[batch_norm_backward] x, dy and dx must all be in the blocked layout");
    return backward_blocked_any(g, training, x.ptr<float>(), dy.ptr<float>(),
                                opt_ptr<float>(weight), mean.ptr<float>(), var.ptr<float>(),
                                opt_mut<float>(dx), opt_mut<float>(dweight), opt_mut<float>(dbias),
                                group ? opt_ptr<float>(group->sum_dy) : nullptr,
                                group ? opt_ptr<float>(group->sum_dy_xhat) : nullptr,
                                group ? opt_ptr<float>(group->mean_rest) : nullptr, gcount);
  }
  if (x.dtype == DType::bf16)
    return backward_loops<float, BFloat16>(
        g, training, x.ptr<BFloat16>(), dy.ptr<BFloat16>(), opt_ptr<float>(weight),
        mean.ptr<float>(), var.ptr<float>(), opt_mut<BFloat16>(dx), opt_mut<float>(dweight),
        opt_mut<float>(dbias), group ? opt_ptr<float>(group->sum_dy) : nullptr,
        group ? opt_ptr<float>(group->sum_dy_xhat) : nullptr,
        group ? opt_ptr<float>(group->mean_rest) : nullptr, gcount);
  TCV_DISPATCH_FLOAT(x.dtype, "batch_norm_backward", {
    backward_loops<scalar_t>(g, training, x.ptr<scalar_t>(), dy.ptr<scalar_t>(),
                             opt_ptr<scalar_t>(weight), mean.ptr<scalar_t>(), var.ptr<scalar_t>(),
                             opt_mut<scalar_t>(dx), opt_mut<scalar_t>(dweight),
                             opt_mut<scalar_t>(dbias),
                             group ? opt_ptr<scalar_t>(group->sum_dy) : nullptr,
                             group ? opt_ptr<scalar_t>(group->sum_dy_xhat) : nullptr,
                             group ? opt_ptr<scalar_t>(group->mean_rest) : nullptr, gcount);
  });
}

void batch_norm_forward_train_onednn(const BatchNormGeom& g, const KTensor& x,
                                     const KTensor* weight, const KTensor* bias, const KTensor& y,
                                     const KTensor& mean, const KTensor& var) {
  check_f32(x);
  forward_dnnl(g, true, x, weight, bias, y, mean, var);
}

void batch_norm_forward_eval_onednn(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                                    const KTensor* bias, const KTensor& mean, const KTensor& var,
                                    const KTensor& y) {
  check_f32(x);
  forward_dnnl(g, false, x, weight, bias, y, mean, var);
}

void batch_norm_backward_onednn(const BatchNormGeom& g, bool training, const KTensor& x,
                                const KTensor& dy, const KTensor* weight, const KTensor& mean,
                                const KTensor& var, const KTensor* dx, const KTensor* dweight,
                                const KTensor* dbias) {
  check_f32(x);
  check_f32(dy);
  // The primitive's flags come from which affine parameters exist; gradients
  // nobody asked for land in scratch buffers.
  const bool has_w = weight != nullptr, has_b = dbias != nullptr;
  TCV_CHECK(has_w || !dweight, "[batch_norm_backward] dweight requested without weight");
  try {
    const BnEntry& e = entry(g, training, has_w, has_b);
    const size_t data_bytes = e.data_md.get_size(), stat_bytes = e.stat_md.get_size();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, wrap(e.data_md, x.data)},
        {DNNL_ARG_DIFF_DST, wrap(e.data_md, dy.data)},
        {DNNL_ARG_MEAN, wrap(e.stat_md, mean.data)},
        {DNNL_ARG_VARIANCE, wrap(e.stat_md, var.data)},
        {DNNL_ARG_DIFF_SRC, wrap(e.data_md, dx ? dx->data : buffer(Buf::diff_src, data_bytes))},
        {DNNL_ARG_SCRATCHPAD, scratchpad(e.bwd_pd)}};
    if (has_w) {
      args.emplace(DNNL_ARG_SCALE, wrap(e.stat_md, weight->data));
      args.emplace(
          DNNL_ARG_DIFF_SCALE,
          wrap(e.stat_md, dweight ? dweight->data : buffer(Buf::diff_weights, stat_bytes)));
    }
    if (has_b) {
      // The primitive takes the shift as an argument although no gradient reads it.
      args.emplace(DNNL_ARG_SHIFT, wrap(e.stat_md, buffer(Buf::dst, stat_bytes)));
      args.emplace(DNNL_ARG_DIFF_SHIFT, wrap(e.stat_md, dbias->data));
    }
    e.bwd.execute(stream(), args);
  } catch (const dnnl::error& err) {
    rethrow("batch_norm_backward", err);
  }
}

}  // namespace tcv::kernels::cpu
