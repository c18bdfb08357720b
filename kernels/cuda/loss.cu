#include <climits>

#include "kernels/cuda/exp_sum.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/loops.cuh"
#include "kernels/cuda/loss.h"

namespace tcv::kernels::cuda {
namespace {

struct ClassGeom {
  int64_t n, c, s;
};

ClassGeom class_geom(const KTensor& x) {
  return {x.sizes[0], x.sizes[1], x.sizes[2]};
}

// A per-position (N, S) operand that may be broadcast (stride 0).
template <typename T>
struct PosView {
  const T* p;
  int64_t sn, ss;
  __device__ __forceinline__ T operator()(int64_t n, int64_t s) const { return p[n * sn + s * ss]; }
};

template <typename T>
PosView<T> pos_view(const KTensor& t) {
  return {t.ptr<const T>(), t.strides[0], t.strides[1]};
}

template <typename T>
__device__ __forceinline__ T weight_of(const T* w, int64_t c) {
  return w ? w[c] : T(1);
}

template <typename T>
const T* opt_ptr(const KTensor* t) {
  return t ? t->ptr<const T>() : nullptr;
}

// ---- class_targets: one block, so the result needs no second pass ----

struct TargetStats {
  long long count;
  double weight_sum;
  long long first_bad;  // position of the first out-of-range target, LLONG_MAX if none
};

constexpr int kStatsThreads = 512;

template <typename W>
__global__ void class_targets_kernel(const int64_t* t, int64_t n, int64_t classes, int64_t ignore,
                                     const W* w, TargetStats* res) {
  __shared__ TargetStats sm[kStatsThreads];
  TargetStats st{0, 0.0, LLONG_MAX};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t v = t[i];
    if (v == ignore) continue;
    if (v < 0 || v >= classes) {
      if (i < st.first_bad) st.first_bad = i;
      continue;
    }
    ++st.count;
    st.weight_sum += w ? static_cast<double>(w[v]) : 1.0;
  }
  sm[threadIdx.x] = st;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      TargetStats& a = sm[threadIdx.x];
      const TargetStats& b = sm[threadIdx.x + s];
      a.count += b.count;
      a.weight_sum += b.weight_sum;
      a.first_bad = min(a.first_bad, b.first_bad);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *res = sm[0];
}

// ---- cross entropy ----

// One tile group per (n, block of s): the threads of a column split the C classes.
template <typename T>
__global__ void ce_forward_kernel(T* nll, T* smooth, T* lse, const T* x, const int64_t* t,
                                  const T* w, int64_t C, int64_t S, int64_t ignore,
                                  int64_t col_blocks, int64_t groups) {
  using A = acc_t<T>;
  TCV_TILE_SMEM(A, sm);
  for_each_tile(col_blocks, groups, S, [&](const TilePos& p) {
    const int64_t base = p.o * C * S + p.j;
    const ExpSum<A> st = tile_exp_sum<A>(
        p.valid, C, [&](int64_t c) { return to_acc(x[base + c * S]); }, sm);
    const A l = st.max + ::log(st.sum);
    A acc = 0;
    if (smooth) {  // uniform over the block
      if (p.valid)
        for (int64_t c = threadIdx.y; c < C; c += blockDim.y)
          acc += to_acc(weight_of(w, c)) * (l - to_acc(x[base + c * S]));
      acc = tile_allreduce(acc, sm, [](A a, A b) { return a + b; });
    }
    if (!p.valid || threadIdx.y != 0) return;
    const int64_t pos = p.o * S + p.j;
    lse[pos] = convert<T>(l);
    const int64_t tp = t[pos];
    if (tp == ignore) {
      nll[pos] = T(0);
      if (smooth) smooth[pos] = T(0);
      return;
    }
    nll[pos] = convert<T>(to_acc(weight_of(w, tp)) * (l - to_acc(x[base + tp * S])));
    if (smooth) smooth[pos] = convert<T>(acc);
  });
}

template <typename T>
__global__ void weight_sum_kernel(const T* w, int64_t C, double* out) {
  __shared__ double sm[256];
  double acc = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) acc += static_cast<double>(w[c]);
  sm[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sm[threadIdx.x] += sm[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sm[0];
}

// Elementwise over (N, C, S), in double like the CPU kernel.
template <typename T>
__global__ void ce_backward_kernel(T* dx, const T* x, const int64_t* t, const T* w, const T* lse,
                                   int64_t C, int64_t S, int64_t ignore, PosView<T> grad,
                                   double scale_nll, double scale_smooth, const double* wsum_dev,
                                   double wsum_host, int64_t total) {
  const double wsum = wsum_dev ? *wsum_dev : wsum_host;
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t n = e / (C * S), rem = e - n * C * S;
    const int64_t c = rem / S, s = rem - c * S;
    const int64_t pos = n * S + s;
    const int64_t tp = t[pos];
    if (tp == ignore) {
      dx[e] = T(0);
      continue;
    }
    const double gv = static_cast<double>(grad(n, s));
    const double a = gv * scale_nll * static_cast<double>(weight_of(w, tp));
    const double bs = gv * scale_smooth;
    const double pc = ::exp(static_cast<double>(x[e] - lse[pos]));
    double v = a * (pc - (c == tp ? 1.0 : 0.0));
    if (bs != 0.0) v += bs * (pc * wsum - static_cast<double>(weight_of(w, c)));
    dx[e] = static_cast<T>(v);
  }
}

// ---- nll ----

template <typename T>
__global__ void nll_forward_kernel(T* out, const T* lp, const int64_t* t, const T* w, int64_t C,
                                   int64_t S, int64_t ignore, int64_t positions) {
  TCV_CUDA_GRID_STRIDE(pos, positions) {
    const int64_t tp = t[pos];
    const int64_t n = pos / S, s = pos - n * S;
    out[pos] = tp == ignore ? T(0) : -weight_of(w, tp) * lp[n * C * S + tp * S + s];
  }
}

template <typename T>
__global__ void nll_backward_kernel(T* dlp, const int64_t* t, const T* w, int64_t C, int64_t S,
                                    int64_t ignore, PosView<T> grad, double scale, int64_t total) {
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t n = e / (C * S), rem = e - n * C * S;
    const int64_t c = rem / S, s = rem - c * S;
    const int64_t tp = t[n * S + s];
    dlp[e] = (tp != ignore && c == tp) ? static_cast<T>(-static_cast<double>(weight_of(w, tp)) *
                                                        static_cast<double>(grad(n, s)) * scale)
                                       : T(0);
  }
}

// ---- pointwise: the shared formulas (kernels/pointwise.h) in acc_t ----

template <typename T, typename Fn>
struct LossMap {
  Fn fn;
  __device__ __forceinline__ T operator()(T a, T b) const {
    return convert<T>(fn(to_acc(a), to_acc(b)));
  }
  __device__ __forceinline__ T operator()(T a, T b, T w) const {
    return convert<T>(fn(to_acc(a), to_acc(b), to_acc(w)));
  }
};

template <typename T, typename Fn>
struct LossGradMap {
  Fn fn;
  __device__ __forceinline__ T operator()(T gv, T a, T b) const {
    return convert<T>(fn(to_acc(gv), to_acc(a), to_acc(b), acc_t<T>(1)));
  }
  __device__ __forceinline__ T operator()(T gv, T a, T b, T w) const {
    return convert<T>(fn(to_acc(gv), to_acc(a), to_acc(b), to_acc(w)));
  }
};

template <typename T>
void pointwise_typed(PointwiseLoss loss, const KTensor& out, const KTensor& x, const KTensor& y,
                     const KTensor* pw, double beta) {
  pointwise::visit_loss<acc_t<T>, DeviceMath>(loss, beta, [&](auto fn) {
    const LossMap<T, decltype(fn)> f{fn};
    if (pw)
      map<T, T, T, T>(out, f, x, y, *pw);
    else
      map<T, T, T>(out, f, x, y);
  });
}

template <typename T>
void pointwise_backward_typed(PointwiseLoss loss, LossArg arg, const KTensor& d, const KTensor& g,
                              const KTensor& x, const KTensor& y, const KTensor* pw, double beta) {
  pointwise::visit_loss_grad<acc_t<T>, DeviceMath>(loss, arg, beta, [&](auto fn) {
    const LossGradMap<T, decltype(fn)> f{fn};
    if (pw)
      map<T, T, T, T, T>(d, f, g, x, y, *pw);
    else
      map<T, T, T, T>(d, f, g, x, y);
  });
}

}  // namespace

void class_targets(const KTensor& target, int64_t classes, int64_t ignore_index,
                   const KTensor* weight, ClassLossStats* stats) {
  *stats = {};
  const int64_t n = target.numel();
  if (n == 0) return;
  Workspace ws(sizeof(TargetStats));
  TargetStats* dev = static_cast<TargetStats*>(ws.get());
  const int64_t* t = target.ptr<const int64_t>();
  if (weight) {
    TCV_DISPATCH_FLOAT(weight->dtype, "class loss", {
      class_targets_kernel<scalar_t><<<1, kStatsThreads, 0, cur_stream()>>>(
          t, n, classes, ignore_index, weight->ptr<const scalar_t>(), dev);
    });
  } else {
    class_targets_kernel<float>
        <<<1, kStatsThreads, 0, cur_stream()>>>(t, n, classes, ignore_index, nullptr, dev);
  }
  TCV_CUDA_LAUNCH_CHECK();
  TargetStats h{};
  memcpy_d2h(&h, dev, sizeof(h));  // the one sync of a class loss
  if (h.first_bad != LLONG_MAX) {
    int64_t bad = 0;
    memcpy_d2h(&bad, t + h.first_bad, sizeof(bad));
    *stats = {.out_of_bounds = true, .bad_target = bad};
    return;
  }
  stats->count = h.count;
  stats->weight_sum = weight ? h.weight_sum : static_cast<double>(h.count);
}

void cross_entropy_forward(const KTensor& nll, const KTensor* smooth, const KTensor& lse,
                           const KTensor& logits, const KTensor& target, const KTensor* weight,
                           int64_t ignore_index) {
  const ClassGeom g = class_geom(logits);
  if (g.n * g.s == 0) return;
  const Tile t = make_tile(g.n, g.c, g.s);
  TCV_DISPATCH_FLOAT(logits.dtype, "cross_entropy", {
    ce_forward_kernel<scalar_t><<<t.blocks, t.block(), 0, cur_stream()>>>(
        nll.ptr<scalar_t>(), smooth ? smooth->ptr<scalar_t>() : nullptr, lse.ptr<scalar_t>(),
        logits.ptr<const scalar_t>(), target.ptr<const int64_t>(), opt_ptr<scalar_t>(weight), g.c,
        g.s, ignore_index, t.col_blocks, t.groups);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

void cross_entropy_backward(const KTensor& dlogits, const KTensor& logits, const KTensor& target,
                            const KTensor* weight, const KTensor& lse, int64_t ignore_index,
                            const KTensor& grad, double scale_nll, double scale_smooth) {
  const ClassGeom g = class_geom(logits);
  const int64_t total = g.n * g.c * g.s;
  if (total == 0) return;
  TCV_DISPATCH_FLOAT(logits.dtype, "cross_entropy", {
    Workspace ws(weight ? sizeof(double) : 0);
    double* wsum = static_cast<double*>(ws.get());
    if (weight) {
      weight_sum_kernel<scalar_t>
          <<<1, 256, 0, cur_stream()>>>(weight->ptr<const scalar_t>(), g.c, wsum);
      TCV_CUDA_LAUNCH_CHECK();
    }
    ce_backward_kernel<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        dlogits.ptr<scalar_t>(), logits.ptr<const scalar_t>(), target.ptr<const int64_t>(),
        opt_ptr<scalar_t>(weight), lse.ptr<const scalar_t>(), g.c, g.s, ignore_index,
        pos_view<scalar_t>(grad), scale_nll, scale_smooth, wsum, static_cast<double>(g.c), total);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

void nll_forward(const KTensor& out, const KTensor& log_probs, const KTensor& target,
                 const KTensor* weight, int64_t ignore_index) {
  const ClassGeom g = class_geom(log_probs);
  const int64_t positions = g.n * g.s;
  if (positions == 0) return;
  TCV_DISPATCH_FLOAT(log_probs.dtype, "nll_loss", {
    nll_forward_kernel<scalar_t><<<grid_for(positions), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), log_probs.ptr<const scalar_t>(), target.ptr<const int64_t>(),
        opt_ptr<scalar_t>(weight), g.c, g.s, ignore_index, positions);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

void nll_backward(const KTensor& dlog_probs, const KTensor& target, const KTensor* weight,
                  int64_t ignore_index, const KTensor& grad, double scale) {
  const ClassGeom g = class_geom(dlog_probs);
  const int64_t total = g.n * g.c * g.s;
  if (total == 0) return;
  TCV_DISPATCH_FLOAT(dlog_probs.dtype, "nll_loss", {
    nll_backward_kernel<scalar_t><<<grid_for(total), 256, 0, cur_stream()>>>(
        dlog_probs.ptr<scalar_t>(), target.ptr<const int64_t>(), opt_ptr<scalar_t>(weight), g.c,
        g.s, ignore_index, pos_view<scalar_t>(grad), scale, total);
    TCV_CUDA_LAUNCH_CHECK();
  });
}

void pointwise_loss(PointwiseLoss loss, const KTensor& out, const KTensor& input,
                    const KTensor& target, const KTensor* pos_weight, double beta) {
  TCV_CUDA_DISPATCH_FLOAT(out.dtype, "loss",
                          pointwise_typed<scalar_t>(loss, out, input, target, pos_weight, beta));
}

void pointwise_loss_backward(PointwiseLoss loss, LossArg arg, const KTensor& d, const KTensor& grad,
                             const KTensor& input, const KTensor& target, const KTensor* pos_weight,
                             double beta) {
  TCV_CUDA_DISPATCH_FLOAT(
      d.dtype, "loss",
      pointwise_backward_typed<scalar_t>(loss, arg, d, grad, input, target, pos_weight, beta));
}

}  // namespace tcv::kernels::cuda
