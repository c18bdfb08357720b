// Upsampling: one thread per output pixel in both directions; the backward
// adds into dx with atomics, accumulating in acc_t (an f32 buffer for 16-bit types).
#include <type_traits>

#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/upsample.h"

namespace tcv::kernels::cuda {
namespace {

struct Geom {
  int64_t planes, ih, iw, oh, ow;
};

Geom geom(const KTensor& out, const KTensor& in) {
  return {in.sizes[0] * in.sizes[1], in.sizes[2], in.sizes[3], out.sizes[2], out.sizes[3]};
}

// PyTorch's nearest_idx, in float like the CPU table.
__device__ __forceinline__ int64_t nearest_idx(int64_t i, int64_t in, int64_t out) {
  if (out == in) return i;
  if (out == 2 * in) return i >> 1;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  return min(static_cast<int64_t>(floorf(static_cast<float>(i) * scale)), in - 1);
}

// Source index, neighbour offset and weights of output coordinate i, computed
// in P (the input's precision, as on the CPU).
template <typename P>
struct Lin {
  int64_t i0, off;
  P l0, l1;
};
template <typename P>
__device__ __forceinline__ Lin<P> linear(int64_t i, int64_t in, int64_t out, bool align) {
  Lin<P> t;
  if (in == out) {
    t.i0 = i, t.off = 0, t.l0 = P(1), t.l1 = P(0);
    return t;
  }
  const P scale = align ? (out > 1 ? static_cast<P>(in - 1) / static_cast<P>(out - 1) : P(0))
                        : static_cast<P>(in) / static_cast<P>(out);
  P real = align ? scale * static_cast<P>(i) : scale * (static_cast<P>(i) + P(0.5)) - P(0.5);
  if (!align && real < P(0)) real = P(0);
  const int64_t i0 = static_cast<int64_t>(real);
  t.i0 = i0;
  t.off = i0 < in - 1 ? 1 : 0;
  P l1 = real - static_cast<P>(i0);
  l1 = l1 < P(0) ? P(0) : (l1 > P(1) ? P(1) : l1);
  t.l1 = l1;
  t.l0 = P(1) - l1;
  return t;
}

template <typename T>
__global__ void nearest_fwd(T* out, const T* in, Geom g, int64_t total) {
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t x = o % g.ow, y = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    out[o] = in[(p * g.ih + nearest_idx(y, g.ih, g.oh)) * g.iw + nearest_idx(x, g.iw, g.ow)];
  }
}

template <typename T, typename D>
__global__ void nearest_bwd(D* dx, const T* dy, Geom g, int64_t total) {
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t x = o % g.ow, y = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    atomicAdd(dx + (p * g.ih + nearest_idx(y, g.ih, g.oh)) * g.iw + nearest_idx(x, g.iw, g.ow),
              static_cast<D>(to_acc(dy[o])));
  }
}

template <typename T>
__global__ void bilinear_fwd(T* out, const T* in, Geom g, int64_t total, bool align) {
  using P = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t x = o % g.ow, y = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const Lin<P> h = linear<P>(y, g.ih, g.oh, align), w = linear<P>(x, g.iw, g.ow, align);
    const T* r0 = in + (p * g.ih + h.i0) * g.iw;
    const T* r1 = r0 + h.off * g.iw;
    const int64_t x0 = w.i0, x1 = x0 + w.off;
    out[o] = convert<T>(h.l0 * (w.l0 * to_acc(r0[x0]) + w.l1 * to_acc(r0[x1])) +
                        h.l1 * (w.l0 * to_acc(r1[x0]) + w.l1 * to_acc(r1[x1])));
  }
}

template <typename T, typename D>
__global__ void bilinear_bwd(D* dx, const T* dy, Geom g, int64_t total, bool align) {
  using P = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(o, total) {
    const int64_t x = o % g.ow, y = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const Lin<P> h = linear<P>(y, g.ih, g.oh, align), w = linear<P>(x, g.iw, g.ow, align);
    D* d0 = dx + (p * g.ih + h.i0) * g.iw;
    D* d1 = d0 + h.off * g.iw;
    const int64_t x0 = w.i0, x1 = x0 + w.off;
    const P v = to_acc(dy[o]);
    atomicAdd(d0 + x0, static_cast<D>(h.l0 * w.l0 * v));
    atomicAdd(d0 + x1, static_cast<D>(h.l0 * w.l1 * v));
    atomicAdd(d1 + x0, static_cast<D>(h.l1 * w.l0 * v));
    atomicAdd(d1 + x1, static_cast<D>(h.l1 * w.l1 * v));
  }
}

template <typename T>
__global__ void to_dtype(T* out, const float* in, int64_t n) {
  TCV_CUDA_GRID_STRIDE(i, n) out[i] = convert<T>(in[i]);
}

/// Runs a scatter kernel into dx: in place for f32/f64, through a zeroed f32
/// buffer for f16/bf16.
template <typename T, typename Launch>
void scatter_into(const KTensor& dx, Launch launch) {
  cudaStream_t st = cur_stream();
  const int64_t n = dx.numel();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    TCV_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, n * sizeof(T), st));
    launch(dx.ptr<T>());
  } else {
    Workspace buf(n * sizeof(float));
    float* f = static_cast<float*>(buf.get());
    TCV_CUDA_CHECK(cudaMemsetAsync(f, 0, n * sizeof(float), st));
    launch(f);
    to_dtype<T><<<grid_for(n), 256, 0, st>>>(dx.ptr<T>(), f, n);
    TCV_CUDA_LAUNCH_CHECK();
  }
}

/// The backward of both modes: zeroes dx, then launch(d, dy, geometry, dy's
/// numel) runs the kernel that adds each dy element into d.
template <typename Launch>
void scatter_backward(const KTensor& dx, const KTensor& dy, Launch launch) {
  const Geom g = geom(dy, dx);
  if (dx.numel() == 0) return;
  const int64_t total = dy.numel();
  TCV_CUDA_DISPATCH_FLOAT(dx.dtype, "upsample_backward", {
    using T = scalar_t;
    scatter_into<T>(dx, [&](auto* d) {
      if (total == 0) return;
      launch(d, dy.ptr<const T>(), g, total);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace

void upsample_nearest2d(const KTensor& out, const KTensor& in) {
  const Geom g = geom(out, in);
  const int64_t total = out.numel();
  if (total == 0) return;
  TCV_CUDA_DISPATCH_FLOAT(in.dtype, "upsample", {
    nearest_fwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), in.ptr<const scalar_t>(), g, total);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void upsample_nearest2d_backward(const KTensor& dx, const KTensor& dy) {
  scatter_backward(dx, dy, [](auto* d, const auto* src, const Geom& g, int64_t total) {
    nearest_bwd<<<grid_for(total), 256, 0, cur_stream()>>>(d, src, g, total);
  });
}

void upsample_bilinear2d(const KTensor& out, const KTensor& in, bool align_corners) {
  const Geom g = geom(out, in);
  const int64_t total = out.numel();
  if (total == 0) return;
  TCV_CUDA_DISPATCH_FLOAT(in.dtype, "upsample", {
    bilinear_fwd<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), in.ptr<const scalar_t>(), g, total, align_corners);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void upsample_bilinear2d_backward(const KTensor& dx, const KTensor& dy, bool align_corners) {
  scatter_backward(dx, dy, [&](auto* d, const auto* src, const Geom& g, int64_t total) {
    bilinear_bwd<<<grid_for(total), 256, 0, cur_stream()>>>(d, src, g, total, align_corners);
  });
}

}  // namespace tcv::kernels::cuda
