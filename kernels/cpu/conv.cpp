// Convolution: oneDNN for f32 and bf16 (autocast, on CPUs with bf16
// instructions), im2col + OpenBLAS GEMM for f64, direct loops as the test oracle.
//
// Measured on this repo's 2-thread AVX-512 box (bench/bench_conv.cpp shapes):
// oneDNN's plain-NCHW convolutions fall back to im2col+GEMM (92 and 176 GFLOP/s
// fwd+bwd), its blocked nChw16c kernels run at 208 and 231 GFLOP/s including the
// reorders in and out. So primitives are created with format_tag::any. Row-major
// tensors are reordered at the boundary (the reorders cached too); activations
// already in nChw16c (KTensor::blocked, from an earlier layer) are read as they
// are, and outputs are written blocked where the engine asks for it, which on
// ResNet-18-CIFAR removes the activation reorders and 7% of a training step.
#include "kernels/cpu/conv.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/blocked.h"
#include "kernels/cpu/dnnl_common.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/winograd.h"

namespace tcv::kernels::cpu {

namespace {

using dnnl::memory;
using namespace dnnl_util;

// ------------------------------------------------------------- reference

// Calls f(input offset iy * w + ix, tap r * s_ + s) for each tap of output
// (oy, ox) that falls inside the input (the padding reads nothing).
template <typename F>
inline void for_taps(const Conv2dGeom& g, int64_t oy, int64_t ox, F f) {
  for (int64_t r = 0; r < g.r; ++r) {
    const int64_t iy = oy * g.stride[0] - g.pad[0] + r * g.dilation[0];
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t s = 0; s < g.s; ++s) {
      const int64_t ix = ox * g.stride[1] - g.pad[1] + s * g.dilation[1];
      if (ix < 0 || ix >= g.w) continue;
      f(iy * g.w + ix, r * g.s + s);
    }
  }
}

template <typename T>
void forward_ref(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y) {
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  parallel_for(g.n * g.k,
               std::max<int64_t>(1, kGrain / std::max<int64_t>(g.oh * g.ow * cg * g.r * g.s, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t nk = lo; nk < hi; ++nk) {
                   const int64_t n = nk / g.k, k = nk % g.k, grp = k / kg;
                   T* yp = y + nk * g.oh * g.ow;
                   for (int64_t oy = 0; oy < g.oh; ++oy)
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       T acc = b ? b[k] : T(0);
                       for (int64_t c = 0; c < cg; ++c) {
                         const T* xp = x + (n * g.c + grp * cg + c) * g.h * g.w;
                         const T* wp = w + (k * cg + c) * g.r * g.s;
                         for_taps(g, oy, ox, [&](int64_t i, int64_t t) { acc += xp[i] * wp[t]; });
                       }
                       yp[oy * g.ow + ox] = acc;
                     }
                 }
               });
}

template <typename T>
void backward_ref(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  const int64_t plane = g.oh * g.ow;
  if (dx) {
    // Each thread owns whole images, so the scatter into dx needs no atomics.
    parallel_for(
        g.n,
        std::max<int64_t>(1, kGrain / std::max<int64_t>(g.k * g.oh * g.ow * cg * g.r * g.s, 1)),
        [&](int64_t lo, int64_t hi) {
          std::fill(dx + lo * g.c * g.h * g.w, dx + hi * g.c * g.h * g.w, T(0));
          for (int64_t n = lo; n < hi; ++n)
            for (int64_t k = 0; k < g.k; ++k) {
              const int64_t grp = k / kg;
              const T* dyp = dy + (n * g.k + k) * plane;
              for (int64_t oy = 0; oy < g.oh; ++oy)
                for (int64_t ox = 0; ox < g.ow; ++ox) {
                  const T d = dyp[oy * g.ow + ox];
                  for (int64_t c = 0; c < cg; ++c) {
                    T* dxp = dx + (n * g.c + grp * cg + c) * g.h * g.w;
                    const T* wp = w + (k * cg + c) * g.r * g.s;
                    for_taps(g, oy, ox, [&](int64_t i, int64_t t) { dxp[i] += d * wp[t]; });
                  }
                }
            }
        });
  }
  if (dw || db) {
    parallel_for(
        g.k,
        std::max<int64_t>(1, kGrain / std::max<int64_t>(g.n * g.oh * g.ow * cg * g.r * g.s, 1)),
        [&](int64_t lo, int64_t hi) {
          for (int64_t k = lo; k < hi; ++k) {
            const int64_t grp = k / kg;
            T* dwp = dw ? dw + k * cg * g.r * g.s : nullptr;
            if (dwp) std::fill(dwp, dwp + cg * g.r * g.s, T(0));
            T bias_acc = 0;
            for (int64_t n = 0; n < g.n; ++n) {
              const T* dyp = dy + (n * g.k + k) * plane;
              for (int64_t oy = 0; oy < g.oh; ++oy)
                for (int64_t ox = 0; ox < g.ow; ++ox) {
                  const T d = dyp[oy * g.ow + ox];
                  bias_acc += d;
                  if (!dwp) continue;
                  for (int64_t c = 0; c < cg; ++c) {
                    const T* xp = x + (n * g.c + grp * cg + c) * g.h * g.w;
                    for_taps(g, oy, ox,
                             [&](int64_t i, int64_t t) { dwp[c * g.r * g.s + t] += d * xp[i]; });
                  }
                }
            }
            if (db) db[k] = bias_acc;
          }
        });
  }
}

// ------------------------------------------------------------- im2col + GEMM
// f64 (gradient checks, f64 golden runs of whole networks): per image and
// group, the (cg·r·s, oh·ow) column matrix of the receptive fields and one GEMM
// with the (kg, cg·r·s) weights, about 50x the direct loops on ResNet layers.

/// col[(c·r + i)·s + j, oy·ow + ox] = x[c, oy·sh − ph + i·dh, ox·sw − pw + j·dw] (0 outside).
template <typename T>
void im2col(const Conv2dGeom& g, const T* x, int64_t cg, T* col) {
  const int64_t rows = cg * g.r * g.s, plane = g.oh * g.ow;
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(plane, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t row = lo; row < hi; ++row) {
                   const int64_t c = row / (g.r * g.s), i = row / g.s % g.r, j = row % g.s;
                   const T* xc = x + c * g.h * g.w;
                   T* out = col + row * plane;
                   for (int64_t oy = 0; oy < g.oh; ++oy) {
                     const int64_t iy = oy * g.stride[0] - g.pad[0] + i * g.dilation[0];
                     T* o = out + oy * g.ow;
                     if (iy < 0 || iy >= g.h) {
                       std::fill_n(o, g.ow, T(0));
                       continue;
                     }
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       const int64_t ix = ox * g.stride[1] - g.pad[1] + j * g.dilation[1];
                       o[ox] = ix >= 0 && ix < g.w ? xc[iy * g.w + ix] : T(0);
                     }
                   }
                 }
               });
}

/// dx[c, ...] += col[...]: the adjoint of im2col. Each thread owns whole channels.
template <typename T>
void col2im(const Conv2dGeom& g, const T* col, int64_t cg, T* dx) {
  const int64_t plane = g.oh * g.ow, rs = g.r * g.s;
  parallel_for(cg, std::max<int64_t>(1, kGrain / std::max<int64_t>(plane * rs, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t c = lo; c < hi; ++c) {
                   T* dxc = dx + c * g.h * g.w;
                   std::fill_n(dxc, g.h * g.w, T(0));
                   for (int64_t k = 0; k < rs; ++k) {
                     const int64_t i = k / g.s, j = k % g.s;
                     const T* in = col + (c * rs + k) * plane;
                     for (int64_t oy = 0; oy < g.oh; ++oy) {
                       const int64_t iy = oy * g.stride[0] - g.pad[0] + i * g.dilation[0];
                       if (iy < 0 || iy >= g.h) continue;
                       for (int64_t ox = 0; ox < g.ow; ++ox) {
                         const int64_t ix = ox * g.stride[1] - g.pad[1] + j * g.dilation[1];
                         if (ix >= 0 && ix < g.w) dxc[iy * g.w + ix] += in[oy * g.ow + ox];
                       }
                     }
                   }
                 }
               });
}

template <typename T>
void forward_gemm(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y) {
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  const int64_t rows = cg * g.r * g.s, plane = g.oh * g.ow;
  if (plane == 0) return;
  std::vector<T> col(static_cast<size_t>(rows * plane));
  const DType dt = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      im2col(g, x + (n * g.c + grp * cg) * g.h * g.w, cg, col.data());
      T* yg = y + (n * g.k + grp * kg) * plane;
      gemm(dt, Trans::no, Trans::no, kg, plane, rows, 1.0, w + grp * kg * rows, rows, col.data(),
           plane, 0.0, yg, plane);
      if (b)
        for (int64_t k = 0; k < kg; ++k)
          for (int64_t p = 0; p < plane; ++p) yg[k * plane + p] += b[grp * kg + k];
    }
}

template <typename T>
void backward_gemm(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  const int64_t rows = cg * g.r * g.s, plane = g.oh * g.ow;
  if (dw) std::fill_n(dw, g.k * rows, T(0));
  if (db) std::fill_n(db, g.k, T(0));
  if (plane == 0) {
    if (dx) std::fill_n(dx, g.n * g.c * g.h * g.w, T(0));
    return;
  }
  std::vector<T> col(static_cast<size_t>(rows * plane));
  const DType dt = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* dyg = dy + (n * g.k + grp * kg) * plane;
      const T* wg = w + grp * kg * rows;
      if (dx) {
        // dcol (rows, plane) = wᵀ · dy, then scattered back into dx.
        gemm(dt, Trans::yes, Trans::no, rows, plane, kg, 1.0, wg, rows, dyg, plane, 0.0, col.data(),
             plane);
        col2im(g, col.data(), cg, dx + (n * g.c + grp * cg) * g.h * g.w);
      }
      if (dw) {
        // dw (kg, rows) += dy · colᵀ.
        im2col(g, x + (n * g.c + grp * cg) * g.h * g.w, cg, col.data());
        gemm(dt, Trans::no, Trans::yes, kg, rows, plane, 1.0, dyg, plane, col.data(), plane, 1.0,
             dw + grp * kg * rows, rows);
      }
    }
  if (db)
    for (int64_t k = 0; k < g.k; ++k) {
      T acc = 0;
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t p = 0; p < plane; ++p) acc += dy[(n * g.k + k) * plane + p];
      db[k] = acc;
    }
}

// ------------------------------------------------------------- oneDNN

/// The largest scratchpad a Winograd pass may ask for (see make_entry): PSPNet's
/// 3x3 conv over 4096 channels at 32x32 (batch 4) asks 456 MiB forward and
/// backward-data (1.4x and 3x faster than direct), 1 GiB backward-weights.
constexpr size_t kWinogradScratchpadLimit = size_t(512) << 20;

struct ConvEntry {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Layout x_fwd, w_fwd, y_fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  Layout dy_bd, w_bd, dx_bd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
  Layout x_bw, dy_bw, dw_bw;
  // bf16 channels-last weight gradients as a matmul (weights_gemm_fits).
  bool weights_gemm = false;
  dnnl::matmul::primitive_desc wg_pd;
  dnnl::matmul wg;
  memory::desc wg_dyt, wg_col, wg_dw;  // (K, P) view of dy, (P, R·S·C), (K, R·S·C) f32
  // f32 weight gradients of an input with fewer channels than a block
  // (few_channel_weights) instead of bwd_weights.
  bool few_channels = false;
  // The passes that run winograd_forward / _backward_data / _backward_weights
  // instead of fwd / bwd_data / bwd_weights (winograd2_passes, on blocked
  // activations).
  bool wino2_fwd = false, wino2_bwd_data = false, wino2_bwd_weights = false;
  memory::desc bias_md;
  ConvBlockedLayouts blocked;
};

Cache<ConvEntry>& conv_cache() {
  static Cache<ConvEntry> cache;
  return cache;
}

// ------------------------------------------------------------- kept weights

// Weights in a primitive's forward layout, kept between calls for as long as
// their bytes hold the same values (conv2d_forward's WeightReuse): evaluation
// reorders each parameter once instead of at every batch (ResNet-18-CIFAR
// evaluation, 2 threads: 7% faster at batch 8, where 11M weights are large
// against the work, unchanged at batch 64; bench Resnet18CifarEval). Keyed by
// the weight's first byte; the engine drops an entry before the storage's
// bytes are freed, so an address is never mistaken for another tensor's.
class KeptWeights {
 public:
  // The weight in `l`'s wanted layout: the kept copy when `version` and the
  // layout match, else reordered into it (made or resized as needed).
  memory get(const Layout& l, void* data, uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    Kept& k = map_[data];
    count_.store(map_.size(), std::memory_order_relaxed);
    const size_t n = l.want.get_size();
    if (!k.bytes || k.nbytes != n) {
      k.bytes.reset(static_cast<char*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
      TCV_CHECK(k.bytes, "[conv2d] cannot allocate ", n, " bytes for a kept weight");
      bytes_.fetch_add(n - k.nbytes, std::memory_order_relaxed);
      k.nbytes = n;
      k.valid = false;
    }
    if (!k.valid || k.version != version || !(k.md == l.want)) {
      memory src = wrap(l.plain, data), dst = wrap(l.want, k.bytes.get());
      l.to_want->execute(stream(), src, dst);
      k.version = version;
      k.md = l.want;
      k.valid = true;
    }
    return wrap(l.want, k.bytes.get());
  }
  void forget(const void* lo, size_t nbytes) {
    if (count_.load(std::memory_order_relaxed) == 0) return;
    const char* begin = static_cast<const char*>(lo);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = map_.lower_bound(begin); it != map_.end() && it->first < begin + nbytes;) {
      bytes_.fetch_sub(it->second.nbytes, std::memory_order_relaxed);
      it = map_.erase(it);
    }
    count_.store(map_.size(), std::memory_order_relaxed);
  }
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  size_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  struct Kept {
    std::unique_ptr<char, Free> bytes;
    size_t nbytes = 0;
    uint64_t version = 0;
    memory::desc md;
    bool valid = false;
  };
  std::mutex mu_;
  std::map<const void*, Kept, std::less<>> map_;
  std::atomic<size_t> bytes_{0}, count_{0};
};

KeptWeights& kept_weights() {
  static KeptWeights* k = new KeptWeights;  // outlives storages freed at exit
  return *k;
}

// bf16 weight gradients of a channels-last layer as one matrix product:
// dW (K, R·S·C) = dyᵀ (K, P) · col (P, R·S·C) over the P = N·OH·OW output
// pixels, col holding each pixel's receptive field (x itself for a 1x1
// stride-1 layer without padding), on oneDNN's bf16 matmul (AMX), summing in
// f32. oneDNN 2.6's own bf16 backward-weights kernels ran 2-5x slower than f32
// on this repo's AMX Xeon below 32x32 outputs and on 1x1 layers (2.4 s for
// 512 channels at 4x4, batch 64, where f32 takes 0.24 s), and its faster
// alternatives read NCHW, which would cost a conversion of x and dy each.
// Used while col stays within kWeightsGemmLimit; oneDNN's kernel otherwise.
constexpr size_t kWeightsGemmLimit = size_t(128) << 20;

bool weights_gemm_fits(const Conv2dGeom& g) {
  const bool plain_1x1 = g.r == 1 && g.s == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                         g.pad[0] == 0 && g.pad[1] == 0;
  const size_t col = plain_1x1 ? 0
                               : static_cast<size_t>(g.n * g.oh * g.ow) *
                                     static_cast<size_t>(g.r * g.s * g.c) * sizeof(BFloat16);
  return g.groups == 1 && col <= kWeightsGemmLimit;
}

// ------------------------------------------------------------- few input channels

// The weight gradient of an f32 convolution whose input has fewer channels
// than a block (an image's 1 or 3: a network's first layer), from row-major x
// and blocked dy. oneDNN's backward-weights pads such an input to a whole
// block, 8 or 16 times the work for one channel, or runs a GEMM on row-major
// dy, which the blocked dy is converted to (fmnist_cnn's first layer, AVX2:
// 3.8 ms of a 20 ms step). Here the kB output channels of a block run in the
// SIMD lanes against broadcast input values, one tap at a time. Each image is
// a task (its input zero-padded once), its row sums are f32 and are added in
// double; the images' sums are added in image order, so the result does not
// depend on the number of threads. Any order of summation is within direct
// convolution's bound (tests/support/error_bound.h).
bool few_channels_fit(const Conv2dGeom& g) {
  return g.groups == 1 && !whole_channel_blocks(g.c) && whole_channel_blocks(g.k);
}

template <int64_t kB>
void few_channel_weights(const Conv2dGeom& g, const float* x, const float* dy, float* dw,
                         float* db) {
  const int64_t taps = g.c * g.r * g.s, blocks = g.k / kB, plane = g.oh * g.ow;
  const int64_t sh = g.stride[0], sw = g.stride[1], dh = g.dilation[0], dwl = g.dilation[1];
  // The padded input rows and columns the windows reach.
  const int64_t hp = (g.oh - 1) * sh + (g.r - 1) * dh + 1,
                wp = (g.ow - 1) * sw + (g.s - 1) * dwl + 1;
  const int64_t sums = g.k * (taps + 1);  // per image: (K, taps) then the bias's (K)
  std::vector<double> part(static_cast<size_t>(g.n * sums));
  parallel_for(g.n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> xp(static_cast<size_t>(g.c * hp * wp));
    for (int64_t n = lo; n < hi; ++n) {
      std::fill(xp.begin(), xp.end(), 0.0f);
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t i = 0; i < hp; ++i) {
          const int64_t ih = i - g.pad[0];
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < wp; ++j) {
            const int64_t iw = j - g.pad[1];
            if (iw >= 0 && iw < g.w)
              xp[(c * hp + i) * wp + j] = x[((n * g.c + c) * g.h + ih) * g.w + iw];
          }
        }
      double* out = part.data() + n * sums;
      for (int64_t cb = 0; cb < blocks; ++cb) {
        const float* d = dy + (n * blocks + cb) * plane * kB;
        for (int64_t t = 0; t < (db ? taps + 1 : taps); ++t) {  // t == taps: the bias
          const int64_t c = t / (g.r * g.s), r = t / g.s % g.r, q = t % g.s;
          double acc[kB] = {};
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            const float* drow = d + oh * g.ow * kB;
            const float* xrow = xp.data() + (c * hp + oh * sh + r * dh) * wp + q * dwl;
            float a0[kB] = {}, a1[kB] = {};
            int64_t ow = 0;
            if (t < taps) {
              for (; ow + 1 < g.ow; ow += 2) {
                const float x0 = xrow[ow * sw], x1 = xrow[(ow + 1) * sw];
#pragma omp simd
                for (int64_t j = 0; j < kB; ++j) {
                  a0[j] += drow[ow * kB + j] * x0;
                  a1[j] += drow[(ow + 1) * kB + j] * x1;
                }
              }
              for (; ow < g.ow; ++ow)
#pragma omp simd
                for (int64_t j = 0; j < kB; ++j) a0[j] += drow[ow * kB + j] * xrow[ow * sw];
            } else {
              for (; ow < g.ow; ++ow)
#pragma omp simd
                for (int64_t j = 0; j < kB; ++j) a0[j] += drow[ow * kB + j];
            }
            for (int64_t j = 0; j < kB; ++j) acc[j] += static_cast<double>(a0[j]) + a1[j];
          }
          for (int64_t j = 0; j < kB; ++j) {
            const int64_t k = cb * kB + j;
            out[t < taps ? k * taps + t : g.k * taps + k] = acc[j];
          }
        }
      }
    }
  });
  for (int64_t i = 0; i < sums; ++i) {
    double total = 0;
    for (int64_t n = 0; n < g.n; ++n) total += part[static_cast<size_t>(n * sums + i)];
    if (i < g.k * taps) {
      if (dw) dw[i] = static_cast<float>(total);
    } else if (db) {
      db[i - g.k * taps] = static_cast<float>(total);
    }
  }
}

std::unique_ptr<ConvEntry> make_entry(const Conv2dGeom& g, const WinogradPasses& wino,
                                      const Winograd2Passes& wino2, ConvAct act, DType dtype) {
  const memory::dims x_dims{g.n, g.c, g.h, g.w}, y_dims{g.n, g.k, g.oh, g.ow};
  const memory::dims w_dims =
      g.groups == 1 ? memory::dims{g.k, g.c, g.r, g.s}
                    : memory::dims{g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s};
  const memory::dims strides{g.stride[0], g.stride[1]};
  const memory::dims dil{g.dilation[0] - 1, g.dilation[1] - 1};
  const memory::dims pad_l{g.pad[0], g.pad[1]};
  // Right padding that makes oneDNN's output size equal ours (floor division).
  const memory::dims pad_r{
      (g.oh - 1) * g.stride[0] + (g.r - 1) * g.dilation[0] + 1 - g.h - g.pad[0],
      (g.ow - 1) * g.stride[1] + (g.s - 1) * g.dilation[1] + 1 - g.w - g.pad[1]};
  // f32, or bf16 (autocast): bf16 data, weights, bias and gradients; oneDNN
  // accumulates in f32 and rounds each result once.
  const auto dt = dnnl_dtype(dtype);
  const auto any = memory::format_tag::any;
  // bf16 activations are channels last in every pass (the blocked layout
  // tcv keeps them in, what oneDNN's AMX kernels take).
  const auto act_tag = dtype == DType::bf16 ? memory::format_tag::nhwc : any;
  const memory::desc x_any(x_dims, dt, act_tag), y_any(y_dims, dt, act_tag), w_any(w_dims, dt, any);
  const memory::desc b_md = g.has_bias ? plain_md({g.k}, dt) : memory::desc();
  const dnnl::primitive_attr attr = default_attr();
  // The forward pass may end in an activation, applied as oneDNN writes y.
  dnnl::primitive_attr fwd_attr = default_attr();
  if (act == ConvAct::relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    fwd_attr.set_post_ops(po);
  }

  // `wino`: the passes that may run Winograd F(4x4, 3x3) (winograd_passes;
  // kernels/cpu/conv.h says why). Direct where oneDNN has no Winograd kernel
  // (CPUs without AVX-512) and where the pass's scratchpad (a grow-only
  // buffer, so resident from then on) would pass kWinogradScratchpadLimit.
  auto choose = [&](bool winograd, auto make) {
    if (winograd) try {
        auto pd = make(dnnl::algorithm::convolution_winograd);
        if (pd.scratchpad_desc().get_size() <= kWinogradScratchpadLimit) return pd;
      } catch (const dnnl::error&) {
        // No Winograd implementation for this shape or CPU: direct below.
      }
    return make(dnnl::algorithm::convolution_direct);
  };
  // The blocked layouts (kernels/cpu/blocked.h): f32 nChw16c or nChw8c, only
  // in whole channel blocks (a padded blocked tensor would not fit a plain
  // one's storage); bf16 channels last.
  const bool f32 = dtype == DType::f32;
  const bool cx = !f32 || whole_channel_blocks(g.c), cy = !f32 || whole_channel_blocks(g.k);
  const memory::desc x_blk = cx ? blocked_md(x_dims, dtype) : memory::desc();
  const memory::desc y_blk = cy ? blocked_md(y_dims, dtype) : memory::desc();
  // A pass that tcv's F(2x2, 3x3) runs takes the blocked layout whatever
  // oneDNN would choose (its GEMM-based kernels of dilated layers take plain
  // ones); oneDNN's primitive, on that layout, serves views it cannot take.
  const auto layouts = [&](bool wino2_pass) {
    return wino2_pass ? std::pair{x_blk, y_blk} : std::pair{x_any, y_any};
  };
  auto e = std::make_unique<ConvEntry>();
  e->bias_md = b_md;
  const auto [x_f, y_f] = layouts(wino2.forward);
  e->fwd_pd = choose(wino.forward, [&](dnnl::algorithm a) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, a, x_f, w_any, b_md, y_f,
                                        strides, dil, pad_l, pad_r),
        fwd_attr, engine());
  });
  e->fwd = dnnl::convolution_forward(e->fwd_pd);
  const memory::desc x_plain = plain_md(x_dims, dt), y_plain = plain_md(y_dims, dt),
                     w_plain = plain_md(w_dims, dt);
  e->x_fwd = Layout(x_plain, e->fwd_pd.src_desc(), true, false);
  e->w_fwd = Layout(w_plain, e->fwd_pd.weights_desc(), true, false);
  e->y_fwd = Layout(y_plain, e->fwd_pd.dst_desc(), false, true);
  e->blocked.src = cx && e->x_fwd.want == x_blk;
  e->blocked.dst = cy && e->y_fwd.want == y_blk;
  // tcv's F(2x2, 3x3) reads and writes the blocked layout, where oneDNN has
  // chosen it and not its own Winograd.
  const auto runs_wino = [](const auto& pd) {
    return std::string(pd.impl_info_str()).find("wino") != std::string::npos;
  };
  e->wino2_fwd = wino2.forward && e->blocked.src && e->blocked.dst && !runs_wino(e->fwd_pd);
  // A forward with an activation is only ever run forward: its backward is the
  // activation's, then the plain convolution's (another entry).
  if (act != ConvAct::none) return e;

  const auto [dx_d, dy_d] = layouts(wino2.backward_data);
  e->bwd_data_pd = choose(wino.backward_data, [&](dnnl::algorithm a) {
    return dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(a, dx_d, w_any, dy_d, strides, dil, pad_l, pad_r),
        attr, engine(), e->fwd_pd);
  });
  e->bwd_data = dnnl::convolution_backward_data(e->bwd_data_pd);
  e->dy_bd = Layout(y_plain, e->bwd_data_pd.diff_dst_desc(), true, false);
  e->w_bd = Layout(w_plain, e->bwd_data_pd.weights_desc(), true, false);
  e->dx_bd = Layout(x_plain, e->bwd_data_pd.diff_src_desc(), false, true);

  const dnnl::convolution_backward_weights::desc bw_direct(
      dnnl::algorithm::convolution_direct, x_any, w_any, b_md, y_any, strides, dil, pad_l, pad_r);
  if (dtype == DType::bf16) {
    e->bwd_weights_pd =
        dnnl::convolution_backward_weights::primitive_desc(bw_direct, attr, engine(), e->fwd_pd);
    if (weights_gemm_fits(g)) {
      const int64_t pixels = g.n * g.oh * g.ow, rsc = g.r * g.s * g.c;
      e->weights_gemm = true;
      e->wg_dyt = memory::desc({g.k, pixels}, dt, memory::dims{1, g.k});
      e->wg_col = memory::desc({pixels, rsc}, dt, memory::dims{rsc, 1});
      e->wg_dw = plain_md({g.k, rsc});
      e->wg_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->wg_dyt, e->wg_col, e->wg_dw),
                                              attr, engine());
      e->wg = dnnl::matmul(e->wg_pd);
    }
  } else {
    const auto [x_w, dy_w] = layouts(wino2.backward_weights);
    e->bwd_weights_pd = choose(wino.backward_weights, [&](dnnl::algorithm a) {
      return dnnl::convolution_backward_weights::primitive_desc(
          dnnl::convolution_backward_weights::desc(a, x_w, w_any, b_md, dy_w, strides, dil, pad_l,
                                                   pad_r),
          attr, engine(), e->fwd_pd);
    });
  }
  e->bwd_weights = dnnl::convolution_backward_weights(e->bwd_weights_pd);
  e->x_bw = Layout(x_plain, e->bwd_weights_pd.src_desc(), true, false);
  e->dy_bw = Layout(y_plain, e->bwd_weights_pd.diff_dst_desc(), true, false);
  e->dw_bw = Layout(w_plain, e->bwd_weights_pd.diff_weights_desc(), false, true);

  e->blocked.diff_dst = cy && e->dy_bd.want == y_blk;
  e->blocked.diff_src = cx && e->dx_bd.want == x_blk;
  e->wino2_bwd_data = wino2.backward_data && e->blocked.diff_dst && e->blocked.diff_src &&
                      !runs_wino(e->bwd_data_pd);
  e->blocked.bwd_src = cx && e->x_bw.want == x_blk;
  e->blocked.bwd_diff_dst = cy && e->dy_bw.want == y_blk;
  e->wino2_bwd_weights = wino2.backward_weights && e->blocked.bwd_src && e->blocked.bwd_diff_dst &&
                         !runs_wino(e->bwd_weights_pd);
  if (f32 && few_channels_fit(g)) {  // row-major x, blocked dy
    e->few_channels = true;
    e->blocked.bwd_src = false;
    e->blocked.bwd_diff_dst = true;
  }
  return e;
}

std::atomic<ConvAlgo>& conv_algo() {
  static std::atomic<ConvAlgo> algo{[] {
    const char* env = std::getenv("TCV_CONV_ALGO");
    return env ? parse_conv_algo(env, "TCV_CONV_ALGO") : ConvAlgo::automatic;
  }()};
  return algo;
}

const ConvEntry& entry(const Conv2dGeom& g, ConvAct act = ConvAct::none, DType dtype = DType::f32) {
  // Keyed by the passes that run Winograd, so algorithm choices that agree on
  // a layer share its primitives. oneDNN has no bf16 Winograd.
  const WinogradPasses wino =
      dtype == DType::f32 ? winograd_passes(g, get_conv_algo()) : WinogradPasses{};
  const Winograd2Passes wino2 =
      dtype == DType::f32 ? winograd2_passes(g, get_conv_algo()) : Winograd2Passes{};
  const Key key{g.n,
                g.c,
                g.h,
                g.w,
                g.k,
                g.r,
                g.s,
                g.stride[0],
                g.stride[1],
                g.pad[0],
                g.pad[1],
                g.dilation[0],
                g.dilation[1],
                g.groups,
                g.has_bias,
                wino.forward + 2 * wino.backward_data + 4 * wino.backward_weights +
                    8 * wino2.forward + 16 * wino2.backward_data + 32 * wino2.backward_weights,
                static_cast<int64_t>(act),
                static_cast<int64_t>(dtype)};
  return conv_cache().get(key, [&] { return make_entry(g, wino, wino2, act, dtype); });
}

// The geometry of g as winograd_forward takes it (winograd2_passes has checked it fits).
WinogradGeom wino2_geom(const Conv2dGeom& g) {
  return {g.n,  g.c,      g.h,      g.w,           g.k,           g.oh,
          g.ow, g.pad[0], g.pad[1], g.dilation[0], g.dilation[1], g.stride[0]};
}

// Whether both activations start on a vector boundary, as the F(2x2, 3x3)
// kernels load them (every tensor tcv allocates does; a view may not).
bool wino2_aligned(const memory& a, const memory& b) {
  const auto at = [](const memory& m) {
    return reinterpret_cast<uintptr_t>(m.get_data_handle()) % (channel_block() * sizeof(float)) ==
           0;
  };
  return at(a) && at(b);
}

// The weights_gemm path of conv2d_backward: x (N, H, W, C) and dy (N, OH, OW,
// K) channels last, dweight (K, C, R, S) and dbias (K) bf16.
void weights_by_gemm(const Conv2dGeom& g, const ConvEntry& e, const KTensor& x, const KTensor& dy,
                     const KTensor* dweight, const KTensor* dbias) {
  const int64_t pixels = g.n * g.oh * g.ow, rsc = g.r * g.s * g.c, k = g.k;
  const BFloat16* xs = x.ptr<BFloat16>();
  const BFloat16* dys = dy.ptr<BFloat16>();
  if (dweight) {
    const bool plain_1x1 = g.r == 1 && g.s == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                           g.pad[0] == 0 && g.pad[1] == 0;
    const BFloat16* col = xs;
    if (!plain_1x1) {
      auto* c = static_cast<BFloat16*>(buffer(Buf::src, e.wg_col.get_size()));
      parallel_for(pixels, std::max<int64_t>(1, kGrain / std::max<int64_t>(rsc, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t p = lo; p < hi; ++p) {
                       const int64_t n = p / (g.oh * g.ow), oy = p / g.ow % g.oh, ox = p % g.ow;
                       BFloat16* row = c + p * rsc;
                       for (int64_t r = 0; r < g.r; ++r) {
                         const int64_t iy = oy * g.stride[0] - g.pad[0] + r * g.dilation[0];
                         for (int64_t s = 0; s < g.s; ++s, row += g.c) {
                           const int64_t ix = ox * g.stride[1] - g.pad[1] + s * g.dilation[1];
                           if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
                             std::fill_n(row, g.c, BFloat16());
                           else
                             std::copy_n(xs + ((n * g.h + iy) * g.w + ix) * g.c, g.c, row);
                         }
                       }
                     }
                   });
      col = c;
    }
    auto* dw = static_cast<float*>(buffer(Buf::diff_weights, e.wg_dw.get_size()));
    e.wg.execute(stream(), {{DNNL_ARG_SRC, wrap(e.wg_dyt, const_cast<BFloat16*>(dys))},
                            {DNNL_ARG_WEIGHTS, wrap(e.wg_col, const_cast<BFloat16*>(col))},
                            {DNNL_ARG_DST, wrap(e.wg_dw, dw)},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.wg_pd)}});
    // (K, R, S, C) -> the weight's (K, C, R, S), rounded to bf16 once.
    BFloat16* out = dweight->ptr<BFloat16>();
    const int64_t taps = g.r * g.s;
    parallel_for(k, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o)
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t c = 0; c < g.c; ++c)
            out[(o * g.c + c) * taps + t] = BFloat16(dw[o * rsc + t * g.c + c]);
    });
  }
  if (dbias) {
    std::vector<double> sum(static_cast<size_t>(k), 0.0);
    std::vector<float> part(static_cast<size_t>(k));
    for (int64_t p0 = 0; p0 < pixels; p0 += 256) {
      std::fill(part.begin(), part.end(), 0.0f);
      for (int64_t p = p0; p < std::min(pixels, p0 + 256); ++p) {
        const BFloat16* d = dys + p * k;
        for (int64_t o = 0; o < k; ++o) part[o] += static_cast<float>(d[o]);
      }
      for (int64_t o = 0; o < k; ++o) sum[o] += part[o];
    }
    BFloat16* db = dbias->ptr<BFloat16>();
    for (int64_t o = 0; o < k; ++o) db[o] = BFloat16(static_cast<float>(sum[o]));
  }
}

// A blocked KTensor only where the primitive's layout is the blocked one (the
// caller asks conv2d_blocked_layouts first).
void check_blocked(const KTensor& t, bool allowed, const char* what) {
  TCV_CHECK(!t.blocked || allowed, "[conv2d] the ", what,
            " is in the blocked layout where this convolution reads or writes another");
}

// What oneDNN runs: f32, and bf16 where the CPU has bf16 instructions.
void check_dnnl_dtype(const char* op, const KTensor& t, DType want) {
  TCV_CHECK(t.dtype == want, "[", op, "] expects ", dtype_name(want), ", got ",
            dtype_name(t.dtype));
  TCV_CHECK(t.is_contiguous(), "[", op, "] expects contiguous tensors");
}

void check_bf16_here(const char* op) {
  TCV_CHECK(bf16_in_hardware(), "[", op,
            "] bf16 on the CPU needs AVX512_BF16 or AMX-BF16 instructions, which this CPU (or "
            "ONEDNN_MAX_CPU_ISA) does not offer");
}

}  // namespace

void conv2d_forward_ref(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                        const KTensor* bias, const KTensor& y) {
  TCV_DISPATCH_FLOAT(x.dtype, "conv2d", {
    forward_ref<scalar_t>(g, x.ptr<scalar_t>(), weight.ptr<scalar_t>(),
                          bias && g.has_bias ? bias->ptr<scalar_t>() : nullptr, y.ptr<scalar_t>());
  });
}

void conv2d_backward_ref(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                         const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                         const KTensor* dbias) {
  TCV_DISPATCH_FLOAT(dy.dtype, "conv2d_backward", {
    backward_ref<scalar_t>(g, x.ptr<scalar_t>(), weight.ptr<scalar_t>(), dy.ptr<scalar_t>(),
                           dx ? dx->ptr<scalar_t>() : nullptr,
                           dweight ? dweight->ptr<scalar_t>() : nullptr,
                           dbias ? dbias->ptr<scalar_t>() : nullptr);
  });
}

void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y) {
  conv2d_forward(g, x, weight, bias, y, ConvAct::none);
}

void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y, ConvAct act) {
  conv2d_forward(g, x, weight, bias, y, act, WeightReuse{});
}

void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y, ConvAct act, WeightReuse reuse) {
  if (x.dtype != DType::f32 && x.dtype != DType::bf16) {
    if (x.dtype == DType::f64)
      forward_gemm<double>(g, x.ptr<double>(), weight.ptr<double>(),
                           bias && g.has_bias ? bias->ptr<double>() : nullptr, y.ptr<double>());
    else
      conv2d_forward_ref(g, x, weight, bias, y);
    if (act == ConvAct::relu) {
      TCV_DISPATCH_FLOAT(y.dtype, "conv2d", {
        scalar_t* p = y.ptr<scalar_t>();
        const int64_t n = g.n * g.k * g.oh * g.ow;
        parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) p[i] = p[i] > scalar_t(0) ? p[i] : scalar_t(0);
        });
      });
    }
    return;
  }
  const DType dt = x.dtype;
  if (dt == DType::bf16) check_bf16_here("conv2d");
  check_dnnl_dtype("conv2d", x, dt);
  check_dnnl_dtype("conv2d", weight, dt);
  check_dnnl_dtype("conv2d", y, dt);
  try {
    const ConvEntry& e = entry(g, act, dt);
    check_blocked(x, e.blocked.src, "input");
    check_blocked(y, e.blocked.dst, "output");
    memory xm = e.x_fwd.in(x, Buf::src);
    if (e.wino2_fwd) {
      memory ym = e.y_fwd.out(y, Buf::dst);
      if (wino2_aligned(xm, ym)) {
        winograd_forward(wino2_geom(g), static_cast<const float*>(xm.get_data_handle()),
                         weight.ptr<float>(), bias && g.has_bias ? bias->ptr<float>() : nullptr,
                         act == ConvAct::relu, static_cast<float*>(ym.get_data_handle()));
        e.y_fwd.finish(ym, y);
        return;
      }
    }
    memory wm;
    if (reuse.keep && !e.w_fwd.same()) {
      wm = kept_weights().get(e.w_fwd, weight.data, reuse.version);
    } else {
      kept_weights().forget(weight.data, 1);  // training: the values change every step
      wm = e.w_fwd.in(weight.data, Buf::weights);
    }
    memory ym = e.y_fwd.out(y, Buf::dst);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm},
                                         {DNNL_ARG_WEIGHTS, wm},
                                         {DNNL_ARG_DST, ym},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad(e.fwd_pd)}};
    if (g.has_bias) {
      TCV_CHECK(bias && bias->dtype == dt, "[conv2d] bias must be ", dtype_name(dt));
      args.emplace(DNNL_ARG_BIAS, wrap(e.bias_md, bias->data));
    }
    e.fwd.execute(stream(), args);
    e.y_fwd.finish(ym, y);
  } catch (const dnnl::error& err) {
    rethrow("conv2d", err);
  }
}

void conv2d_backward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                     const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                     const KTensor* dbias) {
  if (dy.dtype == DType::f64) {
    backward_gemm<double>(g, x.ptr<double>(), weight.ptr<double>(), dy.ptr<double>(),
                          dx ? dx->ptr<double>() : nullptr,
                          dweight ? dweight->ptr<double>() : nullptr,
                          dbias ? dbias->ptr<double>() : nullptr);
    return;
  }
  if (dy.dtype != DType::f32 && dy.dtype != DType::bf16)
    return conv2d_backward_ref(g, x, weight, dy, dx, dweight, dbias);
  const DType dt = dy.dtype;
  if (dt == DType::bf16) check_bf16_here("conv2d_backward");
  check_dnnl_dtype("conv2d_backward", dy, dt);
  TCV_CHECK(!dbias || g.has_bias, "[conv2d_backward] dbias requested for a conv without bias");
  try {
    const ConvEntry& e = entry(g, ConvAct::none, dt);
    check_blocked(dy, e.blocked.diff_dst && (!(dweight || dbias) || e.blocked.bwd_diff_dst),
                  "output gradient");
    // dy is reordered once and shared when both passes want the same layout.
    memory dym = e.dy_bd.in(dy, Buf::diff_dst);
    if (dx) {
      check_blocked(*dx, e.blocked.diff_src, "input gradient");
      memory dxm = e.dx_bd.out(*dx, Buf::diff_src);
      if (e.wino2_bwd_data && wino2_aligned(dym, dxm)) {
        winograd_backward_data(wino2_geom(g), static_cast<const float*>(dym.get_data_handle()),
                               weight.ptr<float>(), static_cast<float*>(dxm.get_data_handle()));
      } else {
        memory wm = e.w_bd.in(weight.data, Buf::weights);
        e.bwd_data.execute(stream(), {{DNNL_ARG_DIFF_DST, dym},
                                      {DNNL_ARG_WEIGHTS, wm},
                                      {DNNL_ARG_DIFF_SRC, dxm},
                                      {DNNL_ARG_SCRATCHPAD, scratchpad(e.bwd_data_pd)}});
      }
      e.dx_bd.finish(dxm, *dx);
    }
    if ((dweight || dbias) && e.weights_gemm && x.blocked && dy.blocked) {
      weights_by_gemm(g, e, x, dy, dweight, dbias);
    } else if ((dweight || dbias) && e.few_channels && dy.blocked) {
      TCV_CHECK(!x.blocked && x.is_contiguous(), "[conv2d_backward] expects a row-major input");
      float* dw = dweight ? dweight->ptr<float>() : nullptr;
      float* db = dbias ? dbias->ptr<float>() : nullptr;
      with_channel_block([&](auto b) {
        few_channel_weights<decltype(b)::value>(g, x.ptr<float>(), dy.ptr<float>(), dw, db);
      });
    } else if (dweight || dbias) {
      check_blocked(x, e.blocked.bwd_src, "input");
      memory dym_w = e.dy_bw.want == e.dy_bd.want ? dym : e.dy_bw.in(dy.data, Buf::bwd_src);
      memory xm = e.x_bw.in(x, Buf::src);
      void* dw_data = dweight ? dweight->data : buffer(Buf::weights, e.dw_bw.plain.get_size());
      if (e.wino2_bwd_weights && wino2_aligned(xm, dym_w)) {
        winograd_backward_weights(wino2_geom(g), static_cast<const float*>(xm.get_data_handle()),
                                  static_cast<const float*>(dym_w.get_data_handle()),
                                  static_cast<float*>(dw_data),
                                  dbias ? dbias->ptr<float>() : nullptr);
        return;
      }
      memory dwm = e.dw_bw.out(dw_data, Buf::diff_weights);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm},
                                           {DNNL_ARG_DIFF_DST, dym_w},
                                           {DNNL_ARG_DIFF_WEIGHTS, dwm},
                                           {DNNL_ARG_SCRATCHPAD, scratchpad(e.bwd_weights_pd)}};
      if (g.has_bias) {
        void* db_data = dbias ? dbias->data : buffer(Buf::dst, e.bias_md.get_size());
        args.emplace(DNNL_ARG_DIFF_BIAS, wrap(e.bias_md, db_data));
      }
      e.bwd_weights.execute(stream(), args);
      if (dweight) e.dw_bw.finish(dwm, dweight->data);
    }
  } catch (const dnnl::error& err) {
    rethrow("conv2d_backward", err);
  }
}

bool bf16_supported() {
  return bf16_in_hardware();
}

void conv2d_forget_weights(const void* data, size_t nbytes) {
  kept_weights().forget(data, nbytes);
}

size_t conv2d_kept_weight_bytes() {
  return kept_weights().bytes();
}

size_t conv2d_kept_weights() {
  return kept_weights().count();
}

size_t conv2d_cache_size() {
  return conv_cache().size();
}

ConvBlockedLayouts conv2d_blocked_layouts(const Conv2dGeom& g, ConvAct act, DType dtype) {
  try {
    if (act == ConvAct::none) return entry(g, ConvAct::none, dtype).blocked;
    // The forward layouts of the entry with the activation, the backward ones
    // of the plain convolution's (which runs the backward).
    ConvBlockedLayouts bl = entry(g, ConvAct::none, dtype).blocked;
    const ConvBlockedLayouts f = entry(g, act, dtype).blocked;
    bl.src = f.src, bl.dst = f.dst;
    return bl;
  } catch (const dnnl::error& err) {
    rethrow("conv2d", err);
  }
}

std::string conv2d_impl_names(const Conv2dGeom& g) {
  const ConvEntry& e = entry(g);
  const std::string wino2 = channel_block() == 16 ? "wino_2x2:tcv_avx512" : "wino_2x2:tcv_avx2";
  return (e.wino2_fwd ? wino2 : e.fwd_pd.impl_info_str()) + " / " +
         (e.wino2_bwd_data ? wino2 : e.bwd_data_pd.impl_info_str()) + " / " +
         (e.wino2_bwd_weights ? wino2 : e.bwd_weights_pd.impl_info_str());
}

WinogradPasses winograd_passes(const Conv2dGeom& g, ConvAlgo algo) {
  // The smallest output height and width that run Winograd: on 5x5 maps and
  // smaller it ran 2-8x slower than direct.
  constexpr int64_t kWinogradMinOutput = 8;
  const bool shape_ok = g.r == 3 && g.s == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
                        g.dilation[0] == 1 && g.dilation[1] == 1 && g.groups == 1 &&
                        whole_channel_blocks(g.c) && whole_channel_blocks(g.k) &&
                        g.oh >= kWinogradMinOutput && g.ow >= kWinogradMinOutput;
  // automatic: no pass of oneDNN's Winograd stayed within direct convolution's
  // error bound on the layers tcv trains (kernels/cpu/conv.h).
  if (!shape_ok || algo != ConvAlgo::winograd) return {};
  return {true, true, true};
}

Winograd2Passes winograd2_passes(const Conv2dGeom& g, ConvAlgo algo) {
  if (algo == ConvAlgo::direct || g.r != 3 || g.s != 3 || g.groups != 1 || channel_block() == 0 ||
      !whole_channel_blocks(g.c) || !whole_channel_blocks(g.k) || g.c * g.k > kWinograd2MaxFilters)
    return {};
  if (g.stride[0] == 2 && g.stride[1] == 2) {
    // The polyphase split: padding 1, no dilation; backward-data's tiles are
    // 4x4 input gradients.
    const bool fits = g.dilation[0] == 1 && g.dilation[1] == 1 && g.pad[0] == 1 && g.pad[1] == 1 &&
                      g.oh == (g.h + 1) / 2 && g.ow == (g.w + 1) / 2;
    const bool forward = fits && winograd_tiles(g.n, g.oh, g.ow, 1, 1) >= kWinograd2MinTiles;
    const bool data = fits && winograd_tiles(g.n, g.h, g.w, 1, 1, 4) >= kWinograd2MinTiles;
    return {forward, data, forward && g.c * g.k <= kWinograd2MaxWeightFilters};
  }
  const int64_t dh = g.dilation[0], dw = g.dilation[1];
  const auto fits = [&](int64_t h, int64_t w, int64_t pad_h, int64_t pad_w, int64_t oh,
                        int64_t ow) {
    return pad_h >= 0 && pad_h <= 2 * dh && pad_w >= 0 && pad_w <= 2 * dw &&
           oh == h + 2 * pad_h - 2 * dh && ow == w + 2 * pad_w - 2 * dw &&
           winograd_tiles(g.n, oh, ow, dh, dw) >= kWinograd2MinTiles;
  };
  const bool shape_ok = g.stride[0] == 1 && g.stride[1] == 1 &&
                        (dh == 1 || g.oh >= kWinograd2MinPhase * dh) &&
                        (dw == 1 || g.ow >= kWinograd2MinPhase * dw);
  if (!shape_ok) return {};
  // Backward-data is the convolution of dy (K channels) with padding 2·d - pad;
  // backward-weights runs over the forward's tiles.
  const bool forward = fits(g.h, g.w, g.pad[0], g.pad[1], g.oh, g.ow);
  return {forward, fits(g.oh, g.ow, 2 * dh - g.pad[0], 2 * dw - g.pad[1], g.h, g.w),
          forward && g.c * g.k <= kWinograd2MaxWeightFilters};
}

}  // namespace tcv::kernels::cpu

// tcv/core/conv_algo.h: the setting lives with the convolutions that read it.
namespace tcv {

ConvAlgo parse_conv_algo(const std::string& text, const std::string& what) {
  if (text == "auto") return ConvAlgo::automatic;
  if (text == "direct") return ConvAlgo::direct;
  if (text == "winograd") return ConvAlgo::winograd;
  TCV_THROW(what, " must be \"auto\", \"direct\" or \"winograd\", got \"", text, "\"");
}

const char* conv_algo_name(ConvAlgo algo) {
  switch (algo) {
    case ConvAlgo::automatic:
      return "auto";
    case ConvAlgo::direct:
      return "direct";
    case ConvAlgo::winograd:
      return "winograd";
  }
  return "?";
}

void set_conv_algo(ConvAlgo algo) {
  kernels::cpu::conv_algo().store(algo);
}

ConvAlgo get_conv_algo() {
  return kernels::cpu::conv_algo().load();
}

}  // namespace tcv
