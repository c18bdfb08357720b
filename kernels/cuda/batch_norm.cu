// Batch norm: per-channel sums over (n, l) split into chunks so that many
// blocks work on each channel; chunk partials are combined in double by one
// thread per channel. The statistics follow the CPU loops: mean first, then
// the biased variance as the mean of (x - mean)², then y = x·scale + shift.
#include <algorithm>

#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/handles.cuh"

namespace tcv::kernels::cuda {
namespace {

constexpr int kThreads = 256;

enum class Sum : int { x, sq_dev, grad };

// partial[(c * chunks + chunk) * 2 + {0, 1}]:
//   Sum::x       Σ x
//   Sum::sq_dev  Σ (x - mean[c])²
//   Sum::grad    Σ dy and Σ dy·(x - mean[c])
template <typename T, Sum S>
__global__ void channel_sums(const T* x, const T* dy, const T* mean, int64_t n, int64_t c,
                             int64_t l, double* partial) {
  using A = acc_t<T>;
  const int64_t ch = blockIdx.x, chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t count = n * l;
  const A m = S == Sum::x ? A(0) : to_acc(mean[ch]);
  double s0 = 0, s1 = 0;
  for (int64_t j = chunk * blockDim.x + threadIdx.x; j < count; j += chunks * blockDim.x) {
    const int64_t b = j / l, i = j - b * l;
    const int64_t off = (b * c + ch) * l + i;
    const A v = to_acc(x[off]);
    if constexpr (S == Sum::x) {
      s0 += static_cast<double>(v);
    } else if constexpr (S == Sum::sq_dev) {
      const A d = v - m;
      s0 += static_cast<double>(d * d);
    } else {
      const A g = to_acc(dy[off]);
      s0 += static_cast<double>(g);
      s1 += static_cast<double>(g * (v - m));
    }
  }
  __shared__ double b0[kThreads], b1[kThreads];
  b0[threadIdx.x] = s0;
  b1[threadIdx.x] = s1;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      b0[threadIdx.x] += b0[threadIdx.x + s];
      b1[threadIdx.x] += b1[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[(ch * chunks + chunk) * 2] = b0[0];
    partial[(ch * chunks + chunk) * 2 + 1] = b1[0];
  }
}

// stat[c] = T(Σ partials / count)
template <typename T>
__global__ void finalize_stat(const double* partial, int chunks, int64_t c, double count, T* stat) {
  TCV_CUDA_GRID_STRIDE(ch, c) {
    double s = 0;
    for (int k = 0; k < chunks; ++k) s += partial[(ch * chunks + k) * 2];
    stat[ch] = convert<T>(s / count);
  }
}

// Per-channel scale and shift of y = x·scale + shift, rounded to T like the CPU.
template <typename T>
__global__ void scale_shift(const T* w, const T* b, const T* mean, const T* var, double eps,
                            int64_t c, acc_t<T>* scale, acc_t<T>* shift) {
  TCV_CUDA_GRID_STRIDE(ch, c) {
    const double invstd = 1.0 / ::sqrt(static_cast<double>(to_acc(var[ch])) + eps);
    const T sc = convert<T>(invstd * (w ? static_cast<double>(to_acc(w[ch])) : 1.0));
    const T sh =
        convert<T>((b ? static_cast<double>(to_acc(b[ch])) : 0.0) -
                   static_cast<double>(to_acc(mean[ch])) * static_cast<double>(to_acc(sc)));
    scale[ch] = to_acc(sc);
    shift[ch] = to_acc(sh);
  }
}

template <typename T>
__global__ void normalize(const T* x, T* y, const acc_t<T>* scale, const acc_t<T>* shift,
                          int64_t total, int64_t c, int64_t l) {
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t ch = (i / l) % c;
    y[i] = convert<T>(to_acc(x[i]) * scale[ch] + shift[ch]);
  }
}

// dweight, dbias and the three dx coefficients per channel (see the CPU loops).
template <typename T>
__global__ void backward_coeffs(const double* partial, int chunks, const T* w, const T* var,
                                double eps, int64_t c, double count, bool training, T* dw, T* db,
                                acc_t<T>* coef) {
  TCV_CUDA_GRID_STRIDE(ch, c) {
    double sum_dy = 0, sum_dy_xc = 0;
    for (int k = 0; k < chunks; ++k) {
      sum_dy += partial[(ch * chunks + k) * 2];
      sum_dy_xc += partial[(ch * chunks + k) * 2 + 1];
    }
    const double invstd = 1.0 / ::sqrt(static_cast<double>(to_acc(var[ch])) + eps);
    const double sum_dy_xhat = sum_dy_xc * invstd;
    if (dw) dw[ch] = convert<T>(sum_dy_xhat);
    if (db) db[ch] = convert<T>(sum_dy);
    const double scale = invstd * (w ? static_cast<double>(to_acc(w[ch])) : 1.0);
    coef[3 * ch] = to_acc(convert<T>(scale));
    coef[3 * ch + 1] = training ? to_acc(convert<T>(scale * sum_dy_xhat * invstd / count)) : 0;
    coef[3 * ch + 2] = training ? to_acc(convert<T>(scale * sum_dy / count)) : 0;
  }
}

template <typename T>
__global__ void backward_dx(const T* x, const T* dy, const T* mean, const acc_t<T>* coef, T* dx,
                            int64_t total, int64_t c, int64_t l) {
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t ch = (i / l) % c;
    const acc_t<T> xc = to_acc(x[i]) - to_acc(mean[ch]);
    dx[i] = convert<T>(to_acc(dy[i]) * coef[3 * ch] - xc * coef[3 * ch + 1] - coef[3 * ch + 2]);
  }
}

/// Chunks per channel: enough blocks to fill the device, each with some work.
int chunks_for(const BatchNormGeom& g) {
  const int64_t count = g.n * g.l;
  const int64_t by_work = std::max<int64_t>(1, count / (kThreads * 8));
  const int64_t by_device = std::max<int64_t>(1, (int64_t(132) * 8 + g.c - 1) / g.c);
  return static_cast<int>(std::min<int64_t>({by_work, by_device, 1024}));
}

template <typename T>
const T* opt(const KTensor* t) {
  return t && t->data ? t->ptr<const T>() : nullptr;
}

void check(const KTensor& t, DType dt, const char* what) {
  TCV_CHECK(t.dtype == dt, "[batch_norm] ", what, " is ", dtype_name(t.dtype), " but input is ",
            dtype_name(dt));
  TCV_CHECK(t.is_contiguous(), "[batch_norm] CUDA kernel expects contiguous ", what);
}

template <typename T>
void forward_typed(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor* weight,
                   const KTensor* bias, const KTensor& y, const KTensor& mean, const KTensor& var) {
  using A = acc_t<T>;
  cudaStream_t st = cur_stream();
  const int64_t total = g.n * g.c * g.l;
  if (g.c == 0) return;
  if (training) {
    const int chunks = chunks_for(g);
    TCV_CHECK(g.c <= INT32_MAX, "[batch_norm] too many channels: ", g.c);
    Workspace part(static_cast<size_t>(g.c) * chunks * 2 * sizeof(double));
    double* p = static_cast<double*>(part.get());
    const dim3 grid(static_cast<unsigned>(g.c), static_cast<unsigned>(chunks));
    const double count = static_cast<double>(g.n * g.l);
    channel_sums<T, Sum::x>
        <<<grid, kThreads, 0, st>>>(x.ptr<const T>(), nullptr, nullptr, g.n, g.c, g.l, p);
    TCV_CUDA_LAUNCH_CHECK();
    finalize_stat<T><<<grid_for(g.c), 256, 0, st>>>(p, chunks, g.c, count, mean.ptr<T>());
    TCV_CUDA_LAUNCH_CHECK();
    channel_sums<T, Sum::sq_dev><<<grid, kThreads, 0, st>>>(x.ptr<const T>(), nullptr,
                                                            mean.ptr<const T>(), g.n, g.c, g.l, p);
    TCV_CUDA_LAUNCH_CHECK();
    finalize_stat<T><<<grid_for(g.c), 256, 0, st>>>(p, chunks, g.c, count, var.ptr<T>());
    TCV_CUDA_LAUNCH_CHECK();
  }
  Workspace ss(static_cast<size_t>(g.c) * 2 * sizeof(A));
  A* scale = static_cast<A*>(ss.get());
  A* shift = scale + g.c;
  scale_shift<T><<<grid_for(g.c), 256, 0, st>>>(opt<T>(weight), opt<T>(bias), mean.ptr<const T>(),
                                                var.ptr<const T>(), g.eps, g.c, scale, shift);
  TCV_CUDA_LAUNCH_CHECK();
  if (total == 0) return;
  normalize<T><<<grid_for(total), 256, 0, st>>>(x.ptr<const T>(), y.ptr<T>(), scale, shift, total,
                                                g.c, g.l);
  TCV_CUDA_LAUNCH_CHECK();
}

template <typename T>
void backward_typed(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                    const KTensor* weight, const KTensor& mean, const KTensor& var,
                    const KTensor* dx, const KTensor* dweight, const KTensor* dbias) {
  using A = acc_t<T>;
  cudaStream_t st = cur_stream();
  if (g.c == 0) return;
  const int64_t total = g.n * g.c * g.l;
  const int chunks = chunks_for(g);
  Workspace part(static_cast<size_t>(g.c) * chunks * 2 * sizeof(double));
  double* p = static_cast<double*>(part.get());
  const dim3 grid(static_cast<unsigned>(g.c), static_cast<unsigned>(chunks));
  channel_sums<T, Sum::grad><<<grid, kThreads, 0, st>>>(x.ptr<const T>(), dy.ptr<const T>(),
                                                        mean.ptr<const T>(), g.n, g.c, g.l, p);
  TCV_CUDA_LAUNCH_CHECK();
  Workspace cw(static_cast<size_t>(g.c) * 3 * sizeof(A));
  A* coef = static_cast<A*>(cw.get());
  backward_coeffs<T><<<grid_for(g.c), 256, 0, st>>>(
      p, chunks, opt<T>(weight), var.ptr<const T>(), g.eps, g.c, static_cast<double>(g.n * g.l),
      training, dweight ? dweight->ptr<T>() : nullptr, dbias ? dbias->ptr<T>() : nullptr, coef);
  TCV_CUDA_LAUNCH_CHECK();
  if (!dx || total == 0) return;
  backward_dx<T><<<grid_for(total), 256, 0, st>>>(x.ptr<const T>(), dy.ptr<const T>(),
                                                  mean.ptr<const T>(), coef, dx->ptr<T>(), total,
                                                  g.c, g.l);
  TCV_CUDA_LAUNCH_CHECK();
}

void check_all(const BatchNormGeom& g, const KTensor& x, const KTensor* weight, const KTensor* bias,
               const KTensor& mean, const KTensor& var) {
  (void)g;
  const DType dt = x.dtype;
  check(x, dt, "input");
  if (weight && weight->data) check(*weight, dt, "weight");
  if (bias && bias->data) check(*bias, dt, "bias");
  check(mean, dt, "mean");
  check(var, dt, "var");
}

}  // namespace

void batch_norm_forward_train(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                              const KTensor* bias, const KTensor& y, const KTensor& mean,
                              const KTensor& var) {
  check_all(g, x, weight, bias, mean, var);
  check(y, x.dtype, "output");
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "batch_norm",
                          forward_typed<scalar_t>(g, true, x, weight, bias, y, mean, var));
}

void batch_norm_forward_eval(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                             const KTensor* bias, const KTensor& mean, const KTensor& var,
                             const KTensor& y) {
  check_all(g, x, weight, bias, mean, var);
  check(y, x.dtype, "output");
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "batch_norm",
                          forward_typed<scalar_t>(g, false, x, weight, bias, y, mean, var));
}

void batch_norm_backward(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                         const KTensor* weight, const KTensor& mean, const KTensor& var,
                         const KTensor* dx, const KTensor* dweight, const KTensor* dbias) {
  check_all(g, x, weight, nullptr, mean, var);
  check(dy, x.dtype, "dy");
  if (dx) check(*dx, x.dtype, "dx");
  if (dweight) check(*dweight, x.dtype, "dweight");
  if (dbias) check(*dbias, x.dtype, "dbias");
  TCV_CUDA_DISPATCH_FLOAT(
      x.dtype, "batch_norm_backward",
      backward_typed<scalar_t>(g, training, x, dy, weight, mean, var, dx, dweight, dbias));
}

}  // namespace tcv::kernels::cuda
