// Batch norm on (n, c, l) contiguous data, with the CPU loops' arithmetic
// (kernels/cpu/batch_norm.cpp) so both backends agree to rounding:
//
//   forward (training)  one read of x: per channel Σ(x - k) and Σ(x - k)² about
//                       a pivot k, the channel's first value, which keeps the
//                       variance from cancelling when |mean| >> std; the mean
//                       is stored rounded to m and the remainder d = mean - m
//                       goes into the shift: y = (x - m)·scale + (b - d·scale).
//   forward (eval)      the same normalize pass with the running statistics.
//   relu, relu6 (fused) the normalize pass clamps as it writes.
//   backward            one reduction pass (Σdy, Σdy·(x - m), Σ(x - m)), then
//                       dx = dy·k_dy - (x - m)·k_x - k_0 per element.
//
// Data (x, y, dy, dx) may be f16/bf16 with f32 parameters and statistics
// (mixed precision: no cast passes around the kernels), or all f32, or all f64.
// Reductions split every channel over enough blocks to fill the device and
// combine their partials in double. Element loops read 4 values per load when
// the plane size and the pointers allow it, and take their indices through
// FastDivmod (no integer division on the GPU) when everything fits in 31 bits.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/batch_norm_coef.h"
#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/divmod.h"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/settings.h"
#include "kernels/cuda/tile_reduce.cuh"

namespace tcv::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename Div>
using index_of = decltype(Div().divisor());

/// Sums v[0..K) over the block (kThreads threads); the totals are valid in thread 0.
template <int K>
__device__ __forceinline__ void block_sum(double (&v)[K]) {
  constexpr int kWarps = kThreads / 32;
  __shared__ double warp_sums[K][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    for (int o = 16; o > 0; o >>= 1) v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
    if (lane == 0) warp_sums[k][warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      v[k] = lane < kWarps ? warp_sums[k][lane] : 0.0;
      for (int o = 16; o > 0; o >>= 1) v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
    }
  }
}

// Channel blockIdx.x, chunk blockIdx.y of its n·l values, read V at a time:
// pack j of the channel is at x[(j / lv)·c·l + ch·l + (j % lv)·V], lv = l / V.
// Each block writes its K sums to partial[(ch·chunks + chunk)·K + k].

// Σ(x - k) and Σ(x - k)² with k the channel's first value.
template <typename T, int V, typename Div>
__global__ void __launch_bounds__(kThreads)
    stat_sums(const T* __restrict__ x, index_of<Div> packs, int64_t cl, int64_t l, Div lv,
              double* __restrict__ partial) {
  using I = index_of<Div>;
  const int64_t ch = blockIdx.x;
  const I chunk = blockIdx.y, chunks = gridDim.y;
  const T* xc = x + ch * l;
  const double k = static_cast<double>(to_acc(xc[0]));
  double s[2] = {0, 0};
  for (I j = chunk * kThreads + threadIdx.x; j < packs; j += chunks * kThreads) {
    I b, i;
    lv.divmod(j, b, i);
    const Lanes<T, V> p =
        load_lanes<V>(xc + static_cast<int64_t>(b) * cl + static_cast<int64_t>(i) * V);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const double d = static_cast<double>(to_acc(p.v[e])) - k;
      s[0] += d;
      s[1] += d * d;
    }
  }
  block_sum(s);
  if (threadIdx.x == 0) {
    partial[(ch * chunks + chunk) * 2] = s[0];
    partial[(ch * chunks + chunk) * 2 + 1] = s[1];
  }
}

// Σdy, Σdy·(x - m) and Σ(x - m) with m = mean[ch], x - m taken in the
// accumulation type as on the CPU.
template <typename T, int V, typename Div>
__global__ void __launch_bounds__(kThreads)
    grad_sums(const T* __restrict__ x, const T* __restrict__ dy, const acc_t<T>* __restrict__ mean,
              index_of<Div> packs, int64_t cl, int64_t l, Div lv, double* __restrict__ partial) {
  using I = index_of<Div>;
  using A = acc_t<T>;
  const int64_t ch = blockIdx.x;
  const I chunk = blockIdx.y, chunks = gridDim.y;
  const T* xc = x + ch * l;
  const T* dyc = dy + ch * l;
  const A m = mean[ch];
  double s[3] = {0, 0, 0};
  for (I j = chunk * kThreads + threadIdx.x; j < packs; j += chunks * kThreads) {
    I b, i;
    lv.divmod(j, b, i);
    const int64_t off = static_cast<int64_t>(b) * cl + static_cast<int64_t>(i) * V;
    const Lanes<T, V> px = load_lanes<V>(xc + off), pg = load_lanes<V>(dyc + off);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const A xm = to_acc(px.v[e]) - m;
      const A g = to_acc(pg.v[e]);
      s[0] += static_cast<double>(g);
      s[1] += static_cast<double>(g) * static_cast<double>(xm);
      s[2] += static_cast<double>(xm);
    }
  }
  block_sum(s);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < 3; ++k) partial[(ch * chunks + chunk) * 3 + k] = s[k];
  }
}

// Per channel (one thread each): with batch statistics (partial set) the mean
// and biased variance from the pivot sums; then coef = {m, scale, shift} of
// y = (x - m)·scale + shift, rounded to the accumulation type as on the CPU.
template <typename T>
__global__ void forward_coeffs(const double* __restrict__ partial, int chunks,
                               const T* __restrict__ x, int64_t l, double count, const acc_t<T>* w,
                               const acc_t<T>* b, double eps, int64_t c, acc_t<T>* mean,
                               acc_t<T>* var, acc_t<T>* coef, acc_t<T>* run_mean, acc_t<T>* run_var,
                               double momentum, acc_t<T>* rest) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(ch, c) {
    double d = 0;
    if (partial) {
      double s1 = 0, s2 = 0;
      for (int k = 0; k < chunks; ++k) {
        s1 += partial[(ch * chunks + k) * 2];
        s2 += partial[(ch * chunks + k) * 2 + 1];
      }
      const double d1 = s1 / count;
      const double mu = static_cast<double>(to_acc(x[ch * l])) + d1;
      mean[ch] = static_cast<A>(mu);
      var[ch] = static_cast<A>(::fmax(0.0, s2 / count - d1 * d1));
      d = mu - static_cast<double>(mean[ch]);
      if (rest) rest[ch] = static_cast<A>(d);
      if (run_mean) {  // as the CPU's update_running
        const double unbias = count > 1 ? count / (count - 1) : 1.0;
        run_mean[ch] = static_cast<A>((1 - momentum) * static_cast<double>(run_mean[ch]) +
                                      momentum * static_cast<double>(mean[ch]));
        run_var[ch] = static_cast<A>((1 - momentum) * static_cast<double>(run_var[ch]) +
                                     momentum * unbias * static_cast<double>(var[ch]));
      }
    }
    const double invstd = 1.0 / ::sqrt(static_cast<double>(var[ch]) + eps);
    const double scale = invstd * (w ? static_cast<double>(w[ch]) : 1.0);
    coef[3 * ch] = mean[ch];
    coef[3 * ch + 1] = static_cast<A>(scale);
    coef[3 * ch + 2] = static_cast<A>((b ? static_cast<double>(b[ch]) : 0.0) - d * scale);
  }
}

// dweight, dbias and coef = {m, k_dy, k_x, k_0} of dx = dy·k_dy - (x - m)·k_x - k_0.
// In training the part of the mean that m lost, d = mean(x - m), is taken out
// as on the CPU. Without partial (eval, only dx wanted) the sums are not needed.
// With the group's sums (gdy, gdyx: SyncBatchNorm) count is the group's and
// d is grest, the part of the group's mean that `mean` lost (null: 0).
template <typename T>
__global__ void backward_coeffs(const double* __restrict__ partial, int chunks, const acc_t<T>* w,
                                const acc_t<T>* mean, const acc_t<T>* var, double eps, int64_t c,
                                double count, bool training, acc_t<T>* dw, acc_t<T>* db,
                                acc_t<T>* coef, const acc_t<T>* gdy, const acc_t<T>* gdyx,
                                const acc_t<T>* grest) {
  using A = acc_t<T>;
  TCV_CUDA_GRID_STRIDE(ch, c) {
    double sum_dy = 0, sum_dy_xc = 0, sum_xc = 0;
    if (partial) {
      for (int k = 0; k < chunks; ++k) {
        sum_dy += partial[(ch * chunks + k) * 3];
        sum_dy_xc += partial[(ch * chunks + k) * 3 + 1];
        sum_xc += partial[(ch * chunks + k) * 3 + 2];
      }
    }
    const double invstd = 1.0 / ::sqrt(static_cast<double>(var[ch]) + eps);
    const BnBackwardCoef k = bn_backward_coef(ch, sum_dy, sum_dy_xc, sum_xc, invstd, count,
                                              training, w, gdy, gdyx, grest);
    if (dw) dw[ch] = static_cast<A>(k.dweight);
    if (db) db[ch] = static_cast<A>(k.dbias);
    coef[4 * ch] = mean[ch];
    coef[4 * ch + 1] = static_cast<A>(k.k_dy);
    coef[4 * ch + 2] = static_cast<A>(k.k_x);
    coef[4 * ch + 3] = static_cast<A>(k.k_0);
  }
}

// Group j of all n·c·l values (V at a time): channel (j / lv) % c. A fused
// activation clamps the output as the elementwise ops do: relu `y > 0 ? y : 0`,
// relu6 min(max(y, 0), 6) with NaN kept.
template <typename T, int V, typename Div>
__global__ void __launch_bounds__(kThreads)
    normalize(const T* __restrict__ x, T* __restrict__ y, const acc_t<T>* __restrict__ coef,
              index_of<Div> packs, Div lv, Div c, BnAct act) {
  using I = index_of<Div>;
  using A = acc_t<T>;
  for (I j = blockIdx.x * kThreads + threadIdx.x; j < packs; j += gridDim.x * kThreads) {
    I plane, ch;
    c.divmod(lv.div(j), plane, ch);
    const A m = coef[3 * ch], scale = coef[3 * ch + 1], shift = coef[3 * ch + 2];
    const Lanes<T, V> px = load_lanes<V>(x + static_cast<int64_t>(j) * V);
    Lanes<T, V> py;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const A v = (to_acc(px.v[e]) - m) * scale + shift;
      A a = v;
      if (act == BnAct::relu) a = v > A(0) ? v : A(0);
      if (act == BnAct::relu6) {
        a = v < A(0) ? A(0) : v;
        a = A(6) < a ? A(6) : a;
      }
      py.v[e] = convert<T>(a);
    }
    store_lanes<V>(y + static_cast<int64_t>(j) * V, py);
  }
}

template <typename T, int V, typename Div>
__global__ void __launch_bounds__(kThreads)
    backward_dx(const T* __restrict__ x, const T* __restrict__ dy,
                const acc_t<T>* __restrict__ coef, T* __restrict__ dx, index_of<Div> packs, Div lv,
                Div c) {
  using I = index_of<Div>;
  using A = acc_t<T>;
  for (I j = blockIdx.x * kThreads + threadIdx.x; j < packs; j += gridDim.x * kThreads) {
    I plane, ch;
    c.divmod(lv.div(j), plane, ch);
    const A m = coef[4 * ch], k_dy = coef[4 * ch + 1], k_x = coef[4 * ch + 2],
            k_0 = coef[4 * ch + 3];
    const int64_t off = static_cast<int64_t>(j) * V;
    const Lanes<T, V> px = load_lanes<V>(x + off), pg = load_lanes<V>(dy + off);
    Lanes<T, V> pd;
#pragma unroll
    for (int e = 0; e < V; ++e)
      pd.v[e] = convert<T>(to_acc(pg.v[e]) * k_dy - (to_acc(px.v[e]) - m) * k_x - k_0);
    store_lanes<V>(dx + off, pd);
  }
}

/// How the element loops run: 4 values per access when every plane splits into
/// whole aligned packs, 32-bit FastDivmod indices when all of them fit.
struct Plan {
  bool vec4 = false;
  bool narrow = false;
};

template <typename T>
Plan plan_for(const BatchNormGeom& g, std::initializer_list<const void*> data) {
  Plan p;
  p.narrow =
      g.n * g.c * g.l < FastDivmod::kLimit && g.c < FastDivmod::kLimit && !get_force_wide_indices();
  p.vec4 = g.l % 4 == 0;
  for (const void* ptr : data) p.vec4 = p.vec4 && lanes_aligned<4>(static_cast<const T*>(ptr));
  return p;
}

/// Calls f(Div{}, std::integral_constant<int, V>{}) for the plan's variant.
template <typename F>
void with_plan(const Plan& p, F&& f) {
  using V1 = std::integral_constant<int, 1>;
  using V4 = std::integral_constant<int, 4>;
  if (p.narrow)
    p.vec4 ? f(FastDivmod{}, V4{}) : f(FastDivmod{}, V1{});
  else
    p.vec4 ? f(WideDivmod{}, V4{}) : f(WideDivmod{}, V1{});
}

template <typename Div>
Div divider(int64_t d) {
  return Div(static_cast<index_of<Div>>(d));
}

/// Chunks per channel for the reductions: enough blocks to fill the device,
/// each thread with at least 8 packs.
int chunks_for(int64_t c, int64_t packs_per_channel) {
  const int64_t by_work = std::max<int64_t>(1, packs_per_channel / (kThreads * 8));
  const int64_t by_device = std::max<int64_t>(1, (int64_t(num_sms()) * 8 + c - 1) / c);
  return static_cast<int>(std::min<int64_t>({by_work, by_device, 1024}));
}

template <typename T>
const acc_t<T>* opt(const KTensor* t) {
  return t && t->data ? t->ptr<const acc_t<T>>() : nullptr;
}

/// What the forward and the backward share: the plan for the tensors at
/// `data`, a workspace of `coeffs` coefficients per channel, and per plan the
/// chunks of the per-channel reductions (none unless `reduce`) with a
/// workspace of `partials` doubles per chunk. Calls
/// f(div, vec, coef, packs_per_channel, chunks, part).
template <typename T, typename F>
void with_channel_work(const BatchNormGeom& g, std::initializer_list<const void*> data, int coeffs,
                       bool reduce, int partials, F&& f) {
  using A = acc_t<T>;
  const Plan plan = plan_for<T>(g, data);
  Workspace cw(static_cast<size_t>(g.c) * coeffs * sizeof(A));
  A* coef = static_cast<A*>(cw.get());
  with_plan(plan, [&](auto div, auto vec) {
    const int64_t packs_per_channel = g.n * g.l / decltype(vec)::value;
    const int chunks = reduce ? chunks_for(g.c, packs_per_channel) : 0;
    Workspace part(static_cast<size_t>(g.c) * chunks * partials * sizeof(double));
    f(div, vec, coef, packs_per_channel, chunks, static_cast<double*>(part.get()));
  });
}

template <typename T>
void forward_typed(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor* weight,
                   const KTensor* bias, const KTensor& y, const KTensor& mean, const KTensor& var,
                   const RunningStats& running, const KTensor* mean_rest = nullptr) {
  using A = acc_t<T>;
  cudaStream_t st = cur_stream();
  const int64_t total = g.n * g.c * g.l;
  if (g.c == 0 || total == 0) return;
  TCV_CHECK(g.c <= INT32_MAX, "[batch_norm] too many channels: ", g.c);
  with_channel_work<T>(
      g, {x.data, y.data}, 3, training, 2,
      [&](auto div, auto vec, A* coef, int64_t packs_per_channel, int chunks, double* part) {
        using Div = decltype(div);
        constexpr int V = decltype(vec)::value;
        if (training) {
          stat_sums<T, V, Div><<<dim3(static_cast<unsigned>(g.c), static_cast<unsigned>(chunks)),
                                 kThreads, 0, st>>>(x.ptr<const T>(),
                                                    static_cast<index_of<Div>>(packs_per_channel),
                                                    g.c * g.l, g.l, divider<Div>(g.l / V), part);
          TCV_CUDA_LAUNCH_CHECK();
        }
        forward_coeffs<T><<<grid_for(g.c), 256, 0, st>>>(
            training ? part : nullptr, chunks, x.ptr<const T>(), g.l,
            static_cast<double>(g.n * g.l), opt<T>(weight), opt<T>(bias), g.eps, g.c, mean.ptr<A>(),
            var.ptr<A>(), coef, training && running.mean ? running.mean->ptr<A>() : nullptr,
            training && running.var ? running.var->ptr<A>() : nullptr, running.momentum,
            mean_rest ? mean_rest->ptr<A>() : nullptr);
        TCV_CUDA_LAUNCH_CHECK();
        if (!y.data) return;  // statistics only
        const int64_t packs = total / V;
        normalize<T, V, Div><<<grid_for(packs, kThreads), kThreads, 0, st>>>(
            x.ptr<const T>(), y.ptr<T>(), coef, static_cast<index_of<Div>>(packs),
            divider<Div>(g.l / V), divider<Div>(g.c), g.act);
        TCV_CUDA_LAUNCH_CHECK();
      });
}

template <typename T>
void backward_typed(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                    const KTensor* weight, const KTensor& mean, const KTensor& var,
                    const KTensor* dx, const KTensor* dweight, const KTensor* dbias,
                    const GroupGradSums* group) {
  using A = acc_t<T>;
  cudaStream_t st = cur_stream();
  const int64_t total = g.n * g.c * g.l;
  if (g.c == 0) return;
  TCV_CHECK(g.c <= INT32_MAX, "[batch_norm] too many channels: ", g.c);
  // The sums feed dweight, dbias and, with batch statistics, dx.
  const bool sums = !group && (dweight || dbias || training);
  with_channel_work<T>(
      g, {x.data, dy.data, dx ? dx->data : nullptr}, 4, sums && total > 0, 3,
      [&](auto div, auto vec, A* coef, int64_t packs_per_channel, int chunks, double* part) {
        using Div = decltype(div);
        constexpr int V = decltype(vec)::value;
        if (chunks > 0) {
          grad_sums<T, V, Div><<<dim3(static_cast<unsigned>(g.c), static_cast<unsigned>(chunks)),
                                 kThreads, 0, st>>>(x.ptr<const T>(), dy.ptr<const T>(),
                                                    mean.ptr<const A>(),
                                                    static_cast<index_of<Div>>(packs_per_channel),
                                                    g.c * g.l, g.l, divider<Div>(g.l / V), part);
          TCV_CUDA_LAUNCH_CHECK();
        }
        backward_coeffs<T><<<grid_for(g.c), 256, 0, st>>>(
            chunks > 0 ? part : nullptr, chunks, opt<T>(weight), mean.ptr<const A>(),
            var.ptr<const A>(), g.eps, g.c, group ? group->count : static_cast<double>(g.n * g.l),
            training, dweight ? dweight->ptr<A>() : nullptr, dbias ? dbias->ptr<A>() : nullptr,
            coef, group ? opt<T>(group->sum_dy) : nullptr,
            group ? opt<T>(group->sum_dy_xhat) : nullptr,
            group ? opt<T>(group->mean_rest) : nullptr);
        TCV_CUDA_LAUNCH_CHECK();
        if (!dx || total == 0) return;
        const int64_t packs = total / V;
        backward_dx<T, V, Div><<<grid_for(packs, kThreads), kThreads, 0, st>>>(
            x.ptr<const T>(), dy.ptr<const T>(), coef, dx->ptr<T>(),
            static_cast<index_of<Div>>(packs), divider<Div>(g.l / V), divider<Div>(g.c));
        TCV_CUDA_LAUNCH_CHECK();
      });
}

}  // namespace

void batch_norm_forward_train(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                              const KTensor* bias, const KTensor& y, const KTensor& mean,
                              const KTensor& var, const RunningStats& running) {
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "batch_norm",
                          forward_typed<scalar_t>(g, true, x, weight, bias, y, mean, var, running));
}

void batch_norm_stats(const BatchNormGeom& g, const KTensor& x, const KTensor& mean,
                      const KTensor& var, const KTensor* mean_rest) {
  TCV_CUDA_DISPATCH_FLOAT(
      x.dtype, "batch_norm_stats",
      forward_typed<scalar_t>(g, true, x, nullptr, nullptr, KTensor{}, mean, var, {}, mean_rest));
}

void batch_norm_forward_eval(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                             const KTensor* bias, const KTensor& mean, const KTensor& var,
                             const KTensor& y) {
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "batch_norm",
                          forward_typed<scalar_t>(g, false, x, weight, bias, y, mean, var, {}));
}

void batch_norm_backward(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                         const KTensor* weight, const KTensor& mean, const KTensor& var,
                         const KTensor* dx, const KTensor* dweight, const KTensor* dbias,
                         const GroupGradSums* group) {
  check_group_grad_sums(group, training, dweight, dbias);
  TCV_CUDA_DISPATCH_FLOAT(
      x.dtype, "batch_norm_backward",
      backward_typed<scalar_t>(g, training, x, dy, weight, mean, var, dx, dweight, dbias, group));
}

}  // namespace tcv::kernels::cuda
