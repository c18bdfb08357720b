#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/rn.cuh"

namespace tcv::kernels::cuda {

namespace {

// What one launch carries in its arguments (under the 4 KiB kernel-argument
// limit): up to kMaxTensors tensors and kMaxChunks chunks, chunk b of the
// grid being chunk `chunk[b]` of tensor `tensor[b]`.
constexpr int kMaxTensors = 48;
constexpr int kMaxChunks = 320;
constexpr int kThreads = 512;

struct Pack {
  void* p[kMaxTensors];
  const void* g[kMaxTensors];
  void* s0[kMaxTensors];
  void* s1[kMaxTensors];
  int64_t n[kMaxTensors];
  uint8_t first[kMaxTensors];
  uint8_t tensor[kMaxChunks];
  int32_t chunk[kMaxChunks];
};
static_assert(sizeof(Pack) + 128 < 4096, "kernel arguments over 4 KiB");

// Splits the entries into packs and launches `launch(pack, nchunks)` for each.
template <typename F>
void for_each_pack(const std::vector<MultiTensorEntry>& ts, F&& launch) {
  Pack pk{};
  int nt = 0, nc = 0;
  for (const MultiTensorEntry& e : ts) {
    if (e.n <= 0) continue;
    pk.p[nt] = e.p;
    pk.g[nt] = e.g;
    pk.s0[nt] = e.s0;
    pk.s1[nt] = e.s1;
    pk.n[nt] = e.n;
    pk.first[nt] = e.first ? 1 : 0;
    ++nt;
    const int64_t chunks = (e.n + kOptimChunk - 1) / kOptimChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      pk.tensor[nc] = static_cast<uint8_t>(nt - 1);
      pk.chunk[nc] = static_cast<int32_t>(c);
      ++nc;
      const bool last = c == chunks - 1;
      if (nc == kMaxChunks || (last && nt == kMaxTensors)) {
        launch(pk, nc);
        nc = 0;
        if (last) {
          nt = 0;
        } else {  // the tensor goes on: it becomes entry 0 of the next pack
          pk.p[0] = pk.p[nt - 1];
          pk.g[0] = pk.g[nt - 1];
          pk.s0[0] = pk.s0[nt - 1];
          pk.s1[0] = pk.s1[nt - 1];
          pk.n[0] = pk.n[nt - 1];
          pk.first[0] = pk.first[nt - 1];
          nt = 1;
        }
      }
    }
  }
  if (nc > 0) launch(pk, nc);
}

__device__ __forceinline__ void chunk_range(const Pack& pk, int& t, int64_t& begin, int64_t& end) {
  t = pk.tensor[blockIdx.x];
  begin = static_cast<int64_t>(pk.chunk[blockIdx.x]) * kOptimChunk;
  end = min(pk.n[t], begin + kOptimChunk);
}

// The statements of kernels/cpu/optim.cpp's sgd_step, one rounding per operation.
template <typename T>
__global__ void sgd_kernel(const Pack pk, T lr, T mom, T damp, T wd, bool use_mom, bool nesterov) {
  int t;
  int64_t begin, end;
  chunk_range(pk, t, begin, end);
  T* __restrict__ p = static_cast<T*>(pk.p[t]);
  const T* __restrict__ g = static_cast<const T*>(pk.g[t]);
  T* __restrict__ buf = static_cast<T*>(pk.s0[t]);
  const bool first = pk.first[t] != 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T pi = p[i];
    const T d = add_rn(g[i], mul_rn(wd, pi));
    if (!use_mom) {
      p[i] = sub_rn(pi, mul_rn(lr, d));
    } else if (first) {
      buf[i] = d;
      p[i] = sub_rn(pi, mul_rn(lr, nesterov ? add_rn(d, mul_rn(mom, d)) : d));
    } else {
      const T m = add_rn(mul_rn(mom, buf[i]), mul_rn(damp, d));
      buf[i] = m;
      p[i] = sub_rn(pi, mul_rn(lr, nesterov ? add_rn(d, mul_rn(mom, m)) : m));
    }
  }
}

// The statements of kernels/cpu/optim.cpp's adam_step.
template <typename T>
__global__ void adam_kernel(const Pack pk, T decay, T wd, T b1, T b2, T a1, T a2, T step_size,
                            T bc2_sqrt, T e) {
  int t;
  int64_t begin, end;
  chunk_range(pk, t, begin, end);
  T* __restrict__ p = static_cast<T*>(pk.p[t]);
  const T* __restrict__ g = static_cast<const T*>(pk.g[t]);
  T* __restrict__ m = static_cast<T*>(pk.s0[t]);
  T* __restrict__ v = static_cast<T*>(pk.s1[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T pi = p[i];
    const T gi = wd != T(0) ? add_rn(g[i], mul_rn(wd, pi)) : g[i];
    const T mi = add_rn(mul_rn(b1, m[i]), mul_rn(a1, gi));
    const T vi = add_rn(mul_rn(b2, v[i]), mul_rn(mul_rn(a2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const T denom = add_rn(div_rn(sqrt_rn(vi), bc2_sqrt), e);
    p[i] = sub_rn(mul_rn(pi, decay), mul_rn(step_size, div_rn(mi, denom)));
  }
}

void check_dtype(DType dt, const char* op) {
  TCV_CHECK(dt == DType::f32 || dt == DType::f64, "[", op,
            "] fused CUDA step takes f32 or f64 parameters, got ", dtype_name(dt));
}

template <typename T>
__global__ void sum_squares_kernel(const Pack pk, double* out) {
  int t;
  int64_t begin, end;
  chunk_range(pk, t, begin, end);
  const T* x = static_cast<const T*>(pk.p[t]);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = static_cast<double>(to_acc(x[i]));
    acc += v * v;
  }
  // Block reduction: warps by shuffles, then the first warp over the warps' sums.
  __shared__ double warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.0;
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(out, acc);
  }
}

}  // namespace

void sgd_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const SgdParams& h) {
  check_dtype(dt, "SGD");
  const bool use_mom = h.momentum != 0.0;
  TCV_DISPATCH_FLOAT(dt, "SGD", {
    // Scalars in the parameter's type, as the CPU step casts them.
    const scalar_t lr_t = static_cast<scalar_t>(h.lr), mom = static_cast<scalar_t>(h.momentum);
    const scalar_t damp = static_cast<scalar_t>(1.0 - h.dampening);
    const scalar_t wd = static_cast<scalar_t>(h.weight_decay);
    for_each_pack(ts, [&](const Pack& pk, int nc) {
      sgd_kernel<scalar_t>
          <<<nc, kThreads, 0, cur_stream()>>>(pk, lr_t, mom, damp, wd, use_mom, h.nesterov);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

void adam_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, const AdamParams& h) {
  check_dtype(dt, "Adam");
  TCV_DISPATCH_FLOAT(dt, "Adam", {
    using T = scalar_t;
    // The host scalars of the CPU loop (kernels/optim.h).
    const auto c = AdamCoefficients<T>::of(h);
    for_each_pack(ts, [&](const Pack& pk, int nc) {
      adam_kernel<T><<<nc, kThreads, 0, cur_stream()>>>(pk, c.decay, c.wd, c.b1, c.b2, c.a1, c.a2,
                                                        c.step_size, c.bc2_sqrt, c.eps);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

void sum_squares_multi(const std::vector<KTensor>& ts, double* result) {
  *result = 0.0;
  if (ts.empty()) return;
  const int dev = current_device();
  double* out = static_cast<double*>(cached_malloc(sizeof(double), dev));
  try {
    TCV_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), cur_stream()));
    // One pack list per dtype (the kernel is typed).
    for (const DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      std::vector<MultiTensorEntry> es;
      for (const KTensor& t : ts) {
        if (t.dtype != dt) continue;
        MultiTensorEntry e;
        e.p = t.data;
        e.n = t.numel();
        es.push_back(e);
      }
      if (es.empty()) continue;
      TCV_CUDA_DISPATCH_FLOAT(dt, "sum_of_squares", {
        for_each_pack(es, [&](const Pack& pk, int nc) {
          sum_squares_kernel<scalar_t><<<nc, kThreads, 0, cur_stream()>>>(pk, out);
          TCV_CUDA_LAUNCH_CHECK();
        });
      });
    }
    memcpy_d2h(result, out, sizeof(double));
    cached_free(out);
  } catch (...) {
    cached_free(out);
    throw;
  }
}

}  // namespace tcv::kernels::cuda
