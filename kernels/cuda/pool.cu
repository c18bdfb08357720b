// Pooling: one thread per output element forward, one thread per input
// element backward (it gathers from the windows that contain it).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/pool_window.h"

namespace tcv::kernels::cuda {
namespace {

template <typename T>
__global__ void pool_fwd(Pool2dGeom g, int64_t total, const T* x, T* y, int64_t* idx) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    const PoolWindow win = pool_window(g, oy, ox);
    if (g.kind == PoolKind::max) {
      A best = -INFINITY;
      int64_t arg = win.y0 * g.w + win.x0;
      bool nan = false;
      for (int64_t iy = win.y0; iy < win.y1 && !nan; ++iy)
        for (int64_t ix = win.x0; ix < win.x1; ++ix) {
          const A v = to_acc(xp[iy * g.w + ix]);
          if (v > best || v != v) {
            best = v;
            arg = iy * g.w + ix;
            if (v != v) {  // NaN wins, as in PyTorch
              nan = true;
              break;
            }
          }
        }
      y[o] = convert<T>(best);
      if (idx) idx[o] = arg;
    } else {
      A acc = A(0);
      for (int64_t iy = win.y0; iy < win.y1; ++iy)
        for (int64_t ix = win.x0; ix < win.x1; ++ix) acc += to_acc(xp[iy * g.w + ix]);
      y[o] = convert<T>(win.count > 0 ? acc / static_cast<A>(win.count) : A(0));
    }
  }
}

// Output rows whose window [o·s - p, o·s - p + k) may contain input row i.
__device__ __forceinline__ void out_range(int64_t i, int64_t k, int64_t s, int64_t p, int64_t out,
                                          int64_t& lo, int64_t& hi) {
  // o·s <= i + p  and  o·s > i + p - k
  const int64_t num = i + p - k + 1;
  lo = num <= 0 ? 0 : (num + s - 1) / s;
  hi = min((i + p) / s + 1, out);
}

template <typename T>
__global__ void pool_bwd(Pool2dGeom g, int64_t total, const T* dy, T* dx, const int64_t* idx) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t ix = i % g.w, iy = (i / g.w) % g.h, p = i / (g.w * g.h);
    const T* dyp = dy + p * g.oh * g.ow;
    int64_t oy0, oy1, ox0, ox1;
    out_range(iy, g.kernel[0], g.stride[0], g.pad[0], g.oh, oy0, oy1);
    out_range(ix, g.kernel[1], g.stride[1], g.pad[1], g.ow, ox0, ox1);
    A acc = A(0);
    if (g.kind == PoolKind::max) {
      const int64_t* ip = idx + p * g.oh * g.ow;
      const int64_t me = iy * g.w + ix;
      for (int64_t oy = oy0; oy < oy1; ++oy)
        for (int64_t ox = ox0; ox < ox1; ++ox)
          if (ip[oy * g.ow + ox] == me) acc += to_acc(dyp[oy * g.ow + ox]);
    } else {
      for (int64_t oy = oy0; oy < oy1; ++oy)
        for (int64_t ox = ox0; ox < ox1; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
          if (win.count == 0) continue;
          if (iy < win.y0 || iy >= win.y1 || ix < win.x0 || ix >= win.x1) continue;
          acc += to_acc(dyp[oy * g.ow + ox]) / static_cast<A>(win.count);
        }
    }
    dx[i] = convert<T>(acc);
  }
}

__device__ __forceinline__ int64_t bin_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
__device__ __forceinline__ int64_t bin_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
__global__ void adaptive_fwd(const T* x, T* y, int64_t total, int64_t h, int64_t w, int64_t oh,
                             int64_t ow) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t ox = o % ow, oy = (o / ow) % oh, p = o / (ow * oh);
    const T* xp = x + p * h * w;
    const int64_t y0 = bin_start(oy, h, oh), y1 = bin_end(oy, h, oh);
    const int64_t x0 = bin_start(ox, w, ow), x1 = bin_end(ox, w, ow);
    A acc = A(0);
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) acc += to_acc(xp[iy * w + ix]);
    y[o] = convert<T>(acc / static_cast<A>((y1 - y0) * (x1 - x0)));
  }
}

template <typename T>
__global__ void adaptive_bwd(const T* dy, T* dx, int64_t total, int64_t h, int64_t w, int64_t oh,
                             int64_t ow) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t ix = i % w, iy = (i / w) % h, p = i / (w * h);
    const T* dyp = dy + p * oh * ow;
    // Bins containing row iy: floor(iy·oh/h) <= oy < ceil((iy+1)·oh/h), checked exactly below.
    const int64_t oy0 = (iy * oh) / h, oy1 = min(((iy + 1) * oh + h - 1) / h, oh);
    const int64_t ox0 = (ix * ow) / w, ox1 = min(((ix + 1) * ow + w - 1) / w, ow);
    A acc = A(0);
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      const int64_t y0 = bin_start(oy, h, oh), y1 = bin_end(oy, h, oh);
      if (iy < y0 || iy >= y1) continue;
      for (int64_t ox = ox0; ox < ox1; ++ox) {
        const int64_t x0 = bin_start(ox, w, ow), x1 = bin_end(ox, w, ow);
        if (ix < x0 || ix >= x1) continue;
        acc += to_acc(dyp[oy * ow + ox]) / static_cast<A>((y1 - y0) * (x1 - x0));
      }
    }
    dx[i] = convert<T>(acc);
  }
}

}  // namespace

size_t pool2d_workspace_bytes(const Pool2dGeom& g, DType dtype) {
  (void)dtype;
  if (g.kind != PoolKind::max) return 0;
  return static_cast<size_t>(g.n * g.c * g.oh * g.ow) * sizeof(int64_t);
}

void pool2d_forward(const Pool2dGeom& g, const KTensor& x, const KTensor& y,
                    const KTensor* workspace) {
  const char* op = g.kind == PoolKind::max ? "max_pool2d" : "avg_pool2d";
  const int64_t total = g.n * g.c * g.oh * g.ow;
  if (total == 0) return;
  int64_t* idx = nullptr;
  if (g.kind == PoolKind::max && workspace && workspace->data) {
    idx = workspace->ptr<int64_t>();
  }
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, op, {
    pool_fwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(g, total, x.ptr<const scalar_t>(),
                                                                  y.ptr<scalar_t>(), idx);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void pool2d_backward(const Pool2dGeom& g, const KTensor& dy, const KTensor& dx,
                     const KTensor* workspace) {
  const char* op = g.kind == PoolKind::max ? "max_pool2d_backward" : "avg_pool2d_backward";
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total == 0) return;
  const int64_t* idx = g.kind == PoolKind::max ? workspace->ptr<const int64_t>() : nullptr;
  TCV_CUDA_DISPATCH_FLOAT(dy.dtype, op, {
    pool_bwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        g, total, dy.ptr<const scalar_t>(), dx.ptr<scalar_t>(), idx);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void adaptive_avg_pool2d_forward(const KTensor& x, const KTensor& y) {
  const int64_t total = y.numel();
  if (total == 0) return;
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "adaptive_avg_pool2d", {
    adaptive_fwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        x.ptr<const scalar_t>(), y.ptr<scalar_t>(), total, x.sizes[2], x.sizes[3], y.sizes[2],
        y.sizes[3]);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void adaptive_avg_pool2d_backward(const KTensor& dy, const KTensor& dx) {
  const int64_t total = dx.numel();
  if (total == 0) return;
  TCV_CUDA_DISPATCH_FLOAT(dy.dtype, "adaptive_avg_pool2d_backward", {
    adaptive_bwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        dy.ptr<const scalar_t>(), dx.ptr<scalar_t>(), total, dx.sizes[2], dx.sizes[3], dy.sizes[2],
        dy.sizes[3]);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace tcv::kernels::cuda
