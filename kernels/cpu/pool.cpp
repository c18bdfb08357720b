// Pooling: oneDNN for f32 and bf16 (mixed precision), on plain NCHW or, when
// the input already is (a convolution's output), on the blocked layout (f32
// nChw16c or nChw8c, bf16 channels last: reordering to it and back around the
// pooling would cost more than it saves), except f32 max pooling on the
// blocked layout, which is tcv's own kernel; direct loops for f64 and for
// average pooling whose ceil-mode overhang PyTorch leaves out of the divisor.
#include "kernels/cpu/pool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/blocked.h"
#include "kernels/cpu/dnnl_common.h"
#include "kernels/cpu/loops.h"
#include "kernels/pool_window.h"

namespace tcv::kernels::cpu {

namespace {

using dnnl::memory;
using namespace dnnl_util;

// ------------------------------------------------------------- reference

template <typename T>
void pool_forward_ref(const Pool2dGeom& g, const T* x, T* y, int64_t* idx) {
  const bool is_max = g.kind == PoolKind::max;
  parallel_for(g.n * g.c, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.h * g.w, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t p = lo; p < hi; ++p) {
                   const T* xp = x + p * g.h * g.w;
                   for (int64_t oy = 0; oy < g.oh; ++oy)
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       const auto [y0, y1, x0, x1, count] = pool_window(g, oy, ox);
                       const int64_t o = p * g.oh * g.ow + oy * g.ow + ox;
                       if (is_max) {
                         T best = -std::numeric_limits<T>::infinity();
                         int64_t arg = y0 * g.w + x0;
                         for (int64_t iy = y0; iy < y1; ++iy)
                           for (int64_t ix = x0; ix < x1; ++ix) {
                             const T v = xp[iy * g.w + ix];
                             if (v > best || std::isnan(v)) {
                               best = v;
                               arg = iy * g.w + ix;
                               if (std::isnan(v)) iy = y1, ix = x1;  // NaN wins, as in PyTorch
                             }
                           }
                         y[o] = best;
                         if (idx) idx[o] = arg;
                       } else {
                         T acc = 0;
                         for (int64_t iy = y0; iy < y1; ++iy)
                           for (int64_t ix = x0; ix < x1; ++ix) acc += xp[iy * g.w + ix];
                         y[o] = count > 0 ? acc / static_cast<T>(count) : T(0);
                       }
                     }
                 }
               });
}

template <typename T>
void pool_backward_ref(const Pool2dGeom& g, const T* dy, T* dx, const int64_t* idx) {
  parallel_for(g.n * g.c, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.h * g.w, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t p = lo; p < hi; ++p) {
                   T* dxp = dx + p * g.h * g.w;
                   std::fill(dxp, dxp + g.h * g.w, T(0));
                   const T* dyp = dy + p * g.oh * g.ow;
                   for (int64_t oy = 0; oy < g.oh; ++oy)
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       const int64_t o = oy * g.ow + ox;
                       if (g.kind == PoolKind::max) {
                         dxp[idx[p * g.oh * g.ow + o]] += dyp[o];
                         continue;
                       }
                       const auto [y0, y1, x0, x1, count] = pool_window(g, oy, ox);
                       if (count == 0) continue;
                       const T d = dyp[o] / static_cast<T>(count);
                       for (int64_t iy = y0; iy < y1; ++iy)
                         for (int64_t ix = x0; ix < x1; ++ix) dxp[iy * g.w + ix] += d;
                     }
                 }
               });
}

// oneDNN divides include-pad averages by the full kernel area; PyTorch clips the
// window at h + pad first. They differ only where a ceil-mode window overhangs.
bool dnnl_can(const Pool2dGeom& g) {
  if (g.kind != PoolKind::avg_include_pad) return true;
  return (g.oh - 1) * g.stride[0] - g.pad[0] + g.kernel[0] <= g.h + g.pad[0] &&
         (g.ow - 1) * g.stride[1] - g.pad[1] + g.kernel[1] <= g.w + g.pad[1];
}

// ------------------------------------------------------------- blocked max (f32)

// Max pooling of f32 data in the blocked layout: each output's kB channels in
// the SIMD lanes, its argmax a u8 position in the (unclipped) window. oneDNN's
// AVX2 kernel took 2.3 ms forward for (64, 32, 28, 28) at 2 threads, a sixth
// of fmnist_cnn's step. NaN wins, the first one of a window, as in PyTorch
// and the reference loops. A (image, channel block) plane is one task: its dx
// is written by that task alone, in output order.
bool blocked_max_fits(const Pool2dGeom& g, DType dtype) {
  return g.blocked && dtype == DType::f32 && g.kind == PoolKind::max &&
         g.kernel[0] * g.kernel[1] <= 256;
}

// A block's kB f32 lanes, and int32 lanes of the same width for masks and
// positions, as GCC vectors: the running maximum and its position stay in
// registers (arrays and `omp simd` left them in memory behind masked stores).
template <int64_t kB>
struct Lanes;
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
};

template <int64_t kB>
void blocked_max_forward(const Pool2dGeom& g, const float* x, float* y, uint8_t* arg) {
  using F = typename Lanes<kB>::F;
  using I = typename Lanes<kB>::I;
  const int64_t planes = g.n * (g.c / kB);
  parallel_for(planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* xp = x + p * g.h * g.w * kB;
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
          const int64_t wy = oy * g.stride[0] - g.pad[0], wx = ox * g.stride[1] - g.pad[1];
          F best = F{} - std::numeric_limits<float>::infinity();
          I at = I{} + static_cast<int32_t>((win.y0 - wy) * g.kernel[1] + (win.x0 - wx));
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) {
              F v;
              std::memcpy(&v, xp + (iy * g.w + ix) * kB, sizeof v);
              const I take = (v > best) | ((v != v) & (best == best));
              best = take ? v : best;
              at = take ? I{} + static_cast<int32_t>((iy - wy) * g.kernel[1] + (ix - wx)) : at;
            }
          const int64_t o = ((p * g.oh + oy) * g.ow + ox) * kB;
          std::memcpy(y + o, &best, sizeof best);
          for (int64_t j = 0; j < kB; ++j) arg[o + j] = static_cast<uint8_t>(at[j]);
        }
    }
  });
}

template <int64_t kB>
void blocked_max_backward(const Pool2dGeom& g, const float* dy, float* dx, const uint8_t* arg) {
  using F = typename Lanes<kB>::F;
  using I = typename Lanes<kB>::I;
  const int64_t planes = g.n * (g.c / kB);
  parallel_for(planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      float* dxp = dx + p * g.h * g.w * kB;
      std::fill(dxp, dxp + g.h * g.w * kB, 0.0f);
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
          const int64_t wy = oy * g.stride[0] - g.pad[0], wx = ox * g.stride[1] - g.pad[1];
          const int64_t o = ((p * g.oh + oy) * g.ow + ox) * kB;
          F d;
          I at;
          std::memcpy(&d, dy + o, sizeof d);
          for (int64_t j = 0; j < kB; ++j) at[j] = arg[o + j];
          // Each input of the window takes the lanes whose maximum it was.
          for (int64_t iy = win.y0; iy < win.y1; ++iy)
            for (int64_t ix = win.x0; ix < win.x1; ++ix) {
              const I mine = at == static_cast<int32_t>((iy - wy) * g.kernel[1] + (ix - wx));
              float* q = dxp + (iy * g.w + ix) * kB;
              F cur;
              std::memcpy(&cur, q, sizeof cur);
              cur += mine ? d : F{};
              std::memcpy(q, &cur, sizeof cur);
            }
        }
    }
  });
}

// ------------------------------------------------------------- oneDNN

struct PoolEntry {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward::primitive_desc bwd_pd;
  dnnl::pooling_backward bwd;
  memory::desc x_md, y_md, ws_md;
};

Cache<PoolEntry>& pool_cache() {
  static Cache<PoolEntry> cache;
  return cache;
}

const PoolEntry& entry(const Pool2dGeom& g, DType dtype) {
  const Key key{g.n,
                g.c,
                g.h,
                g.w,
                g.oh,
                g.ow,
                g.kernel[0],
                g.kernel[1],
                g.stride[0],
                g.stride[1],
                g.pad[0],
                g.pad[1],
                static_cast<int64_t>(g.kind),
                g.blocked,
                static_cast<int64_t>(dtype)};
  return pool_cache().get(key, [&] {
    auto e = std::make_unique<PoolEntry>();
    const auto md = [&](const memory::dims& d) {
      // The blocked layouts (kernels/cpu/blocked.h): f32 nChw16c or nChw8c, bf16 channels last.
      return g.blocked ? blocked_md(d, dtype) : plain_md(d, dnnl_dtype(dtype));
    };
    e->x_md = md({g.n, g.c, g.h, g.w});
    e->y_md = md({g.n, g.c, g.oh, g.ow});
    const memory::dims strides{g.stride[0], g.stride[1]}, kernel{g.kernel[0], g.kernel[1]};
    const memory::dims pad_l{g.pad[0], g.pad[1]};
    const memory::dims pad_r{(g.oh - 1) * g.stride[0] + g.kernel[0] - g.h - g.pad[0],
                             (g.ow - 1) * g.stride[1] + g.kernel[1] - g.w - g.pad[1]};
    const dnnl::algorithm algo = g.kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                 : g.kind == PoolKind::avg_include_pad
                                     ? dnnl::algorithm::pooling_avg_include_padding
                                     : dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::primitive_attr attr = default_attr();
    e->fwd_pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, algo, e->x_md, e->y_md,
                                    strides, kernel, pad_l, pad_r),
        attr, engine());
    e->fwd = dnnl::pooling_forward(e->fwd_pd);
    e->ws_md = e->fwd_pd.workspace_desc();
    e->bwd_pd = dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(algo, e->x_md, e->y_md, strides, kernel, pad_l, pad_r), attr,
        engine(), e->fwd_pd);
    e->bwd = dnnl::pooling_backward(e->bwd_pd);
    return e;
  });
}

bool use_dnnl(const Pool2dGeom& g, DType dt) {
  return (dt == DType::f32 || (dt == DType::bf16 && bf16_in_hardware())) && dnnl_can(g);
}

// The blocked layout is the engine's choice (Pool2dGeom::blocked); both
// operands must then be held so.
void check_layout(const char* op, const Pool2dGeom& g, const KTensor& a, const KTensor& b) {
  if (g.blocked)
    TCV_CHECK(a.blocked && b.blocked && pool2d_blockable(g, a.dtype), "[", op,
              "] the blocked layout needs f32 data in whole channel blocks, or bf16");
}

}  // namespace

bool pool2d_blockable(const Pool2dGeom& g, DType dtype) {
  return use_dnnl(g, dtype) && (dtype == DType::bf16 || whole_channel_blocks(g.c));
}

bool pool2d_takes(const Pool2dGeom& g, DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || use_dnnl(g, dtype);
}

size_t pool2d_workspace_bytes(const Pool2dGeom& g, DType dtype) {
  if (g.kind != PoolKind::max) return 0;
  if (blocked_max_fits(g, dtype)) return static_cast<size_t>(g.n * g.c * g.oh * g.ow);
  if (!use_dnnl(g, dtype)) return static_cast<size_t>(g.n * g.c * g.oh * g.ow) * sizeof(int64_t);
  try {
    return entry(g, dtype).ws_md.get_size();
  } catch (const dnnl::error& err) {
    rethrow("max_pool2d", err);
  }
}

namespace {

// One pass: forward (`in` x, `out` y) or backward (`in` dy, `out` dx). Max
// pooling's backward reads the indices its forward left in `workspace`.
void pool2d_pass(bool backward, const Pool2dGeom& g, const KTensor& in, const KTensor& out,
                 const KTensor* workspace) {
  const bool max = g.kind == PoolKind::max;
  const char* op = backward ? (max ? "max_pool2d_backward" : "avg_pool2d_backward")
                            : (max ? "max_pool2d" : "avg_pool2d");
  check_layout(op, g, in, out);
  TCV_CHECK(!(backward && max) || workspace, "[", op, "] needs the forward's workspace");
  if (blocked_max_fits(g, in.dtype)) {
    // The forward's positions go to a scratch buffer when nobody keeps them.
    auto* arg = static_cast<uint8_t*>(
        workspace && workspace->data ? workspace->data
                                     : buffer(Buf::diff_dst, pool2d_workspace_bytes(g, in.dtype)));
    with_channel_block([&](auto b) {
      constexpr int64_t kB = decltype(b)::value;
      if (backward)
        blocked_max_backward<kB>(g, in.ptr<float>(), out.ptr<float>(), arg);
      else
        blocked_max_forward<kB>(g, in.ptr<float>(), out.ptr<float>(), arg);
    });
    return;
  }
  if (!use_dnnl(g, in.dtype)) {
    int64_t* indices = workspace ? workspace->ptr<int64_t>() : nullptr;
    TCV_DISPATCH_FLOAT(in.dtype, op, {
      if (backward)
        pool_backward_ref<scalar_t>(g, in.ptr<scalar_t>(), out.ptr<scalar_t>(), indices);
      else
        pool_forward_ref<scalar_t>(g, in.ptr<scalar_t>(), out.ptr<scalar_t>(), indices);
    });
    return;
  }
  try {
    const PoolEntry& e = entry(g, in.dtype);
    // dy has y's layout and dx has x's.
    std::unordered_map<int, memory> args{
        {backward ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, wrap(backward ? e.y_md : e.x_md, in.data)},
        {backward ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DST, wrap(backward ? e.x_md : e.y_md, out.data)},
        {DNNL_ARG_SCRATCHPAD, backward ? scratchpad(e.bwd_pd) : scratchpad(e.fwd_pd)}};
    if (max) {
      void* ws = workspace ? workspace->data : buffer(Buf::diff_dst, e.ws_md.get_size());
      args.emplace(DNNL_ARG_WORKSPACE, wrap(e.ws_md, ws));
    }
    if (backward)
      e.bwd.execute(stream(), args);
    else
      e.fwd.execute(stream(), args);
  } catch (const dnnl::error& err) {
    rethrow(op, err);
  }
}

}  // namespace

void pool2d_forward(const Pool2dGeom& g, const KTensor& x, const KTensor& y,
                    const KTensor* workspace) {
  pool2d_pass(/*backward=*/false, g, x, y, workspace);
}

void pool2d_backward(const Pool2dGeom& g, const KTensor& dy, const KTensor& dx,
                     const KTensor* workspace) {
  pool2d_pass(/*backward=*/true, g, dy, dx, workspace);
}

// ------------------------------------------------------------- adaptive

namespace {

inline int64_t bin_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
inline int64_t bin_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// One pass over every (plane, output bin): forward averages the bin of x into
// y; backward spreads dy / (bin size) over the bin of dx (bins may overlap, so
// dx is zeroed per plane and accumulated). `x` is (planes, h, w), `y` (planes,
// oh, ow) in both directions.
template <typename T, bool Backward>
void adaptive_pass(T* x, T* y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  parallel_for(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(h * w, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t p = lo; p < hi; ++p) {
                   T* xp = x + p * h * w;
                   T* yp = y + p * oh * ow;
                   if constexpr (Backward) std::fill(xp, xp + h * w, T(0));
                   for (int64_t oy = 0; oy < oh; ++oy) {
                     const int64_t y0 = bin_start(oy, h, oh), y1 = bin_end(oy, h, oh);
                     for (int64_t ox = 0; ox < ow; ++ox) {
                       const int64_t x0 = bin_start(ox, w, ow), x1 = bin_end(ox, w, ow);
                       const T count = static_cast<T>((y1 - y0) * (x1 - x0));
                       if constexpr (Backward) {
                         const T d = yp[oy * ow + ox] / count;
                         for (int64_t iy = y0; iy < y1; ++iy)
                           for (int64_t ix = x0; ix < x1; ++ix) xp[iy * w + ix] += d;
                       } else {
                         T acc = 0;
                         for (int64_t iy = y0; iy < y1; ++iy)
                           for (int64_t ix = x0; ix < x1; ++ix) acc += xp[iy * w + ix];
                         yp[oy * ow + ox] = acc / count;
                       }
                     }
                   }
                 }
               });
}

}  // namespace

void adaptive_avg_pool2d_forward(const KTensor& x, const KTensor& y) {
  TCV_DISPATCH_FLOAT(x.dtype, "adaptive_avg_pool2d", {
    adaptive_pass<scalar_t, false>(x.ptr<scalar_t>(), y.ptr<scalar_t>(), x.sizes[0] * x.sizes[1],
                                   x.sizes[2], x.sizes[3], y.sizes[2], y.sizes[3]);
  });
}

void adaptive_avg_pool2d_backward(const KTensor& dy, const KTensor& dx) {
  TCV_DISPATCH_FLOAT(dy.dtype, "adaptive_avg_pool2d_backward", {
    adaptive_pass<scalar_t, true>(dx.ptr<scalar_t>(), dy.ptr<scalar_t>(), dx.sizes[0] * dx.sizes[1],
                                  dx.sizes[2], dx.sizes[3], dy.sizes[2], dy.sizes[3]);
  });
}

}  // namespace tcv::kernels::cpu
