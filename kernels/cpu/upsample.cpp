#include "kernels/cpu/upsample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

struct Geom {
  int64_t planes, ih, iw, oh, ow;
};

Geom geom(const KTensor& out, const KTensor& in) {
  return {in.sizes[0] * in.sizes[1], in.sizes[2], in.sizes[3], out.sizes[2], out.sizes[3]};
}

// PyTorch's nearest_idx: exact for equal sizes and 2x, else floor(dst · (float)in/out).
std::vector<int64_t> nearest_table(int64_t in, int64_t out) {
  std::vector<int64_t> idx(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    if (out == in) {
      idx[i] = i;
    } else if (out == 2 * in) {
      idx[i] = i >> 1;
    } else {
      idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * scale)), in - 1);
    }
  }
  return idx;
}

// Source index i0, neighbour offset (0 at the last row), and the two weights,
// in the input's own precision as PyTorch's CPU kernel computes them.
template <typename T>
struct Linear {
  std::vector<int64_t> i0, off;
  std::vector<T> l0, l1;
};

template <typename T>
Linear<T> linear_table(int64_t in, int64_t out, bool align_corners) {
  Linear<T> t;
  t.i0.resize(out);
  t.off.resize(out);
  t.l0.resize(out);
  t.l1.resize(out);
  const T scale = align_corners
                      ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                      : static_cast<T>(in) / static_cast<T>(out);
  for (int64_t i = 0; i < out; ++i) {
    if (in == out) {
      t.i0[i] = i;
      t.off[i] = 0;
      t.l0[i] = T(1);
      t.l1[i] = T(0);
      continue;
    }
    const T real = align_corners ? scale * static_cast<T>(i)
                                 : std::max(scale * (static_cast<T>(i) + T(0.5)) - T(0.5), T(0));
    const int64_t i0 = static_cast<int64_t>(real);
    t.i0[i] = i0;
    t.off[i] = i0 < in - 1 ? 1 : 0;
    t.l1[i] = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
    t.l0[i] = T(1) - t.l1[i];
  }
  return t;
}

template <typename T>
void nearest_fwd(T* out, const T* in, Geom g) {
  const auto hi = nearest_table(g.ih, g.oh), wi = nearest_table(g.iw, g.ow);
  parallel_for(g.planes * g.oh, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.ow, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t p = r / g.oh, y = r % g.oh;
                   const T* src = in + (p * g.ih + hi[y]) * g.iw;
                   T* dst = out + r * g.ow;
                   for (int64_t x = 0; x < g.ow; ++x) dst[x] = src[wi[x]];
                 }
               });
}

template <typename T>
void nearest_bwd(T* dx, const T* dy, Geom g) {
  const auto hi = nearest_table(g.ih, g.oh), wi = nearest_table(g.iw, g.ow);
  const int64_t work = std::max<int64_t>(g.oh * g.ow, 1);
  parallel_for(g.planes, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* d = dx + p * g.ih * g.iw;
      std::fill(d, d + g.ih * g.iw, T(0));
      const T* s = dy + p * g.oh * g.ow;
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t x = 0; x < g.ow; ++x) d[hi[y] * g.iw + wi[x]] += s[y * g.ow + x];
    }
  });
}

template <typename T>
void bilinear_fwd(T* out, const T* in, Geom g, bool align_corners) {
  const auto h = linear_table<T>(g.ih, g.oh, align_corners);
  const auto w = linear_table<T>(g.iw, g.ow, align_corners);
  parallel_for(g.planes * g.oh, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.ow, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t p = r / g.oh, y = r % g.oh;
                   const T* r0 = in + (p * g.ih + h.i0[y]) * g.iw;
                   const T* r1 = r0 + h.off[y] * g.iw;
                   T* dst = out + r * g.ow;
                   for (int64_t x = 0; x < g.ow; ++x) {
                     const int64_t x0 = w.i0[x], x1 = x0 + w.off[x];
                     dst[x] = h.l0[y] * (w.l0[x] * r0[x0] + w.l1[x] * r0[x1]) +
                              h.l1[y] * (w.l0[x] * r1[x0] + w.l1[x] * r1[x1]);
                   }
                 }
               });
}

template <typename T>
void bilinear_bwd(T* dx, const T* dy, Geom g, bool align_corners) {
  const auto h = linear_table<T>(g.ih, g.oh, align_corners);
  const auto w = linear_table<T>(g.iw, g.ow, align_corners);
  const int64_t work = std::max<int64_t>(g.oh * g.ow * 4, 1);
  parallel_for(g.planes, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* d = dx + p * g.ih * g.iw;
      std::fill(d, d + g.ih * g.iw, T(0));
      const T* s = dy + p * g.oh * g.ow;
      for (int64_t y = 0; y < g.oh; ++y) {
        T* d0 = d + h.i0[y] * g.iw;
        T* d1 = d0 + h.off[y] * g.iw;
        for (int64_t x = 0; x < g.ow; ++x) {
          const T v = s[y * g.ow + x];
          const int64_t x0 = w.i0[x], x1 = x0 + w.off[x];
          d0[x0] += h.l0[y] * w.l0[x] * v;
          d0[x1] += h.l0[y] * w.l1[x] * v;
          d1[x0] += h.l1[y] * w.l0[x] * v;
          d1[x1] += h.l1[y] * w.l1[x] * v;
        }
      }
    }
  });
}

}  // namespace

void upsample_nearest2d(const KTensor& out, const KTensor& in) {
  const Geom g = geom(out, in);
  TCV_DISPATCH_FLOAT(in.dtype, "upsample",
                     nearest_fwd<scalar_t>(out.ptr<scalar_t>(), in.ptr<const scalar_t>(), g));
}

void upsample_nearest2d_backward(const KTensor& dx, const KTensor& dy) {
  const Geom g = geom(dy, dx);
  TCV_DISPATCH_FLOAT(dx.dtype, "upsample",
                     nearest_bwd<scalar_t>(dx.ptr<scalar_t>(), dy.ptr<const scalar_t>(), g));
}

void upsample_bilinear2d(const KTensor& out, const KTensor& in, bool align_corners) {
  const Geom g = geom(out, in);
  TCV_DISPATCH_FLOAT(
      in.dtype, "upsample",
      bilinear_fwd<scalar_t>(out.ptr<scalar_t>(), in.ptr<const scalar_t>(), g, align_corners));
}

void upsample_bilinear2d_backward(const KTensor& dx, const KTensor& dy, bool align_corners) {
  const Geom g = geom(dy, dx);
  TCV_DISPATCH_FLOAT(
      dx.dtype, "upsample",
      bilinear_bwd<scalar_t>(dx.ptr<scalar_t>(), dy.ptr<const scalar_t>(), g, align_corners));
}

}  // namespace tcv::kernels::cpu
