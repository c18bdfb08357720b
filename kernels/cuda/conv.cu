// cuDNN convolution: descriptors and algorithms cached per configuration,
// workspace from the caching allocator, bias and its gradient by own kernels.
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/settings.h"

namespace tcv::kernels::cuda {
namespace {

enum class Dir : uint8_t { fwd, bwd_data, bwd_filter };

/// Everything that selects descriptors and algorithms: the geometry, dtype,
/// math (TF32 allowed or not), search mode and device.
struct ConvKey {
  int64_t n, c, h, w, k, r, s;
  int64_t stride[2], pad[2], dilation[2], groups;
  int32_t dtype, tf32, benchmark, device;

  bool operator==(const ConvKey& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};
static_assert(std::has_unique_object_representations_v<ConvKey>);

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    size_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(k); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

struct Algo {
  bool found = false;
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

/// Descriptors of one configuration; one convolution descriptor per direction,
/// since each direction's algorithm may want its own math type.
struct ConvEntry {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};
  Algo algo[3];
  std::mutex mu;  // guards algo[] while it is searched

  ~ConvEntry() {
    // Destruction at process exit may follow the driver's teardown: ignore errors.
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    for (auto& c : conv)
      if (c) cudnnDestroyConvolutionDescriptor(c);
  }
};

struct ConvCache {
  std::mutex mu;
  std::unordered_map<ConvKey, std::unique_ptr<ConvEntry>, ConvKeyHash> map;
};
ConvCache& cache() {
  static ConvCache* c = new ConvCache;  // leaked: outlives static destruction order
  return *c;
}

cudnnDataType_t cudnn_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      TCV_THROW("[conv2d] CUDA supports f32, f64, f16 and bf16, got ", dtype_name(t));
  }
}

/// The math type requested, and whether an algorithm's math type respects it.
cudnnMathType_t requested_math(DType t, bool tf32) {
  if (t == DType::f16 || t == DType::bf16) return CUDNN_TENSOR_OP_MATH;
  if (t == DType::f32 && !tf32) return CUDNN_FMA_MATH;  // DEFAULT_MATH permits TF32 on Ampere+
  return CUDNN_DEFAULT_MATH;
}
bool math_allowed(DType t, bool tf32, cudnnMathType_t m) {
  if (t == DType::f32 && !tf32) return m == CUDNN_FMA_MATH;
  return true;
}

int to_int(int64_t v, const char* what) {
  TCV_CHECK(v >= 0 && v <= INT_MAX, "[conv2d] ", what, " ", v, " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

ConvKey make_key(const Conv2dGeom& g, DType dt) {
  ConvKey key;
  std::memset(&key, 0, sizeof(key));
  key.n = g.n, key.c = g.c, key.h = g.h, key.w = g.w, key.k = g.k, key.r = g.r, key.s = g.s;
  for (int i = 0; i < 2; ++i) {
    key.stride[i] = g.stride[i];
    key.pad[i] = g.pad[i];
    key.dilation[i] = g.dilation[i];
  }
  key.groups = g.groups;
  key.dtype = static_cast<int32_t>(dt);
  key.tf32 = dt == DType::f32 && allow_tf32() ? 1 : 0;
  key.benchmark = get_cudnn_benchmark() ? 1 : 0;
  key.device = current_device();
  return key;
}

ConvEntry& entry(const ConvKey& key, const Conv2dGeom& g, DType dt) {
  ConvCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(key);
  if (it != c.map.end()) return *it->second;
  auto e = std::make_unique<ConvEntry>();
  const cudnnDataType_t data = cudnn_dtype(dt);
  const cudnnDataType_t compute = dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  TCV_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
  TCV_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
  TCV_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w));
  TCV_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NCHW, data, to_int(g.n, "batch"),
                                             to_int(g.c, "channels"), to_int(g.h, "height"),
                                             to_int(g.w, "width")));
  TCV_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NCHW, data, to_int(g.n, "batch"),
                                             to_int(g.k, "channels"), to_int(g.oh, "height"),
                                             to_int(g.ow, "width")));
  TCV_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, data, CUDNN_TENSOR_NCHW, to_int(g.k, "channels"),
                                             to_int(g.c / g.groups, "channels"),
                                             to_int(g.r, "kernel"), to_int(g.s, "kernel")));
  for (auto& cd : e->conv) {
    TCV_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
    TCV_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        cd, to_int(g.pad[0], "padding"), to_int(g.pad[1], "padding"), to_int(g.stride[0], "stride"),
        to_int(g.stride[1], "stride"), to_int(g.dilation[0], "dilation"),
        to_int(g.dilation[1], "dilation"), CUDNN_CROSS_CORRELATION, compute));
    TCV_CUDNN_CHECK(cudnnSetConvolutionGroupCount(cd, to_int(g.groups, "groups")));
    TCV_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, requested_math(dt, key.tf32 != 0)));
  }
  ConvEntry& ref = *e;
  c.map.emplace(key, std::move(e));
  return ref;
}

// Workspace offered to cudnnFind*Ex: the largest any algorithm asks for, capped.
constexpr size_t kMaxFindWorkspace = size_t(1) << 30;

/// Picks the first result (fastest for Find, best guess for Get_v7) that ran
/// and respects the math restriction.
template <typename Perf>
bool pick(const Perf* perf, int count, DType dt, bool tf32, Algo& out) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!math_allowed(dt, tf32, perf[i].mathType)) continue;
    out.found = true;
    out.algo = static_cast<int>(perf[i].algo);
    out.workspace = perf[i].memory;
    out.math = perf[i].mathType;
    return true;
  }
  return false;
}

/// One direction's search into `a`: cuDNN's timing of every algorithm on the
/// call's operands (`find_ex`, with the largest workspace any of them asks for,
/// capped) or its heuristics (`get_v7`); the first result that ran under the
/// math restriction, else `fallback`. `workspace_size`, `find_ex` and `get_v7`
/// are the direction's cuDNN calls; they all take its operands in the same
/// order: two inputs (descriptor `d0`/`d1`, buffer `in0`/`in1`), the
/// convolution, then the output (`dout`, `out`).
template <typename Perf, auto workspace_size, auto find_ex, auto get_v7, typename D0, typename D1,
          typename DOut>
void search(Algo& a, bool benchmark, DType dt, bool tf32, cudnnHandle_t h,
            cudnnConvolutionDescriptor_t cd, int algo_count, int fallback, D0 d0, const void* in0,
            D1 d1, const void* in1, DOut dout, void* out) {
  using AlgoEnum = decltype(Perf::algo);
  constexpr int kMax = 16;
  Perf perf[kMax];
  int returned = 0;
  if (benchmark) {
    size_t ws_max = 0;
    for (int i = 0; i < algo_count; ++i) {
      size_t sz = 0;
      if (workspace_size(h, d0, d1, cd, dout, static_cast<AlgoEnum>(i), &sz) ==
          CUDNN_STATUS_SUCCESS)
        ws_max = std::max(ws_max, std::min(sz, kMaxFindWorkspace));
    }
    Workspace ws(ws_max);
    TCV_CUDNN_CHECK(
        find_ex(h, d0, in0, d1, in1, cd, dout, out, kMax, &returned, perf, ws.get(), ws_max));
  } else {
    TCV_CUDNN_CHECK(get_v7(h, d0, d1, cd, dout, kMax, &returned, perf));
  }
  if (pick(perf, returned, dt, tf32, a)) return;
  a.algo = fallback;
  a.math = requested_math(dt, tf32);
  TCV_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, a.math));
  TCV_CUDNN_CHECK(workspace_size(h, d0, d1, cd, dout, static_cast<AlgoEnum>(a.algo), &a.workspace));
}

/// The algorithm of one direction, searched on first use. The buffers are the
/// call's own operands: Find*Ex writes the output, which the call then overwrites.
const Algo& algorithm(ConvEntry& e, const ConvKey& key, DType dt, Dir dir, const void* x,
                      const void* w, const void* y, void* out) {
  std::lock_guard<std::mutex> lock(e.mu);
  const int d = static_cast<int>(dir);
  Algo& a = e.algo[d];
  if (a.found) return a;
  cudnnHandle_t h = cudnn_handle();
  const bool tf32 = key.tf32 != 0;
  const bool benchmark = key.benchmark != 0;
  cudnnConvolutionDescriptor_t cd = e.conv[d];
  if (dir == Dir::fwd)  // x, w -> y
    search<cudnnConvolutionFwdAlgoPerf_t, cudnnGetConvolutionForwardWorkspaceSize,
           cudnnFindConvolutionForwardAlgorithmEx, cudnnGetConvolutionForwardAlgorithm_v7>(
        a, benchmark, dt, tf32, h, cd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, e.x, x, e.w, w, e.y, out);
  else if (dir == Dir::bwd_data)  // w, dy -> dx
    search<cudnnConvolutionBwdDataAlgoPerf_t, cudnnGetConvolutionBackwardDataWorkspaceSize,
           cudnnFindConvolutionBackwardDataAlgorithmEx,
           cudnnGetConvolutionBackwardDataAlgorithm_v7>(
        a, benchmark, dt, tf32, h, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, e.w, w, e.y, y, e.x, out);
  else  // x, dy -> dw
    search<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnGetConvolutionBackwardFilterWorkspaceSize,
           cudnnFindConvolutionBackwardFilterAlgorithmEx,
           cudnnGetConvolutionBackwardFilterAlgorithm_v7>(
        a, benchmark, dt, tf32, h, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, e.x, x, e.y, y, e.w, out);
  // The descriptor of this direction keeps the chosen algorithm's math type.
  TCV_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, a.math));
  a.found = true;
  return a;
}

/// alpha = 1 and beta = 0 in the type cuDNN reads for this data type.
struct Scaling {
  double d1 = 1.0, d0 = 0.0;
  float f1 = 1.0f, f0 = 0.0f;
  const void* one(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d0) : &f0; }
};

// y[n, k, :, :] += bias[k]
template <typename T>
__global__ void add_bias_kernel(T* y, const T* b, int64_t total, int64_t k, int64_t plane) {
  TCV_CUDA_GRID_STRIDE(i, total) {
    const int64_t ch = (i / plane) % k;
    y[i] = convert<T>(to_acc(y[i]) + to_acc(b[ch]));
  }
}

// db[k] = Σ over n, oh, ow of dy: one block per output channel.
template <typename T>
__global__ void bias_grad_kernel(const T* dy, T* db, int64_t n, int64_t k, int64_t plane) {
  using A = acc_t<T>;
  const int64_t ch = blockIdx.x;
  const int64_t count = n * plane;
  A sum = A(0);
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t b = j / plane, p = j - b * plane;
    sum += to_acc(dy[(b * k + ch) * plane + p]);
  }
  __shared__ A buf[256];
  buf[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[ch] = convert<T>(buf[0]);
}

}  // namespace

void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y) {
  const DType dt = x.dtype;
  (void)cudnn_dtype(dt);
  const int64_t ynumel = g.n * g.k * g.oh * g.ow;
  if (ynumel == 0) return;
  cudaStream_t st = cur_stream();
  if (g.c == 0) {
    // No input channels: the convolution sums nothing.
    TCV_CUDA_CHECK(cudaMemsetAsync(y.data, 0, ynumel * dtype_size(dt), st));
  } else {
    const ConvKey key = make_key(g, dt);
    ConvEntry& e = entry(key, g, dt);
    const Algo& a = algorithm(e, key, dt, Dir::fwd, x.data, weight.data, nullptr, y.data);
    Workspace ws(a.workspace);
    const Scaling sc;
    TCV_CUDNN_CHECK(cudnnConvolutionForward(cudnn_handle(), sc.one(dt), e.x, x.data, e.w,
                                            weight.data, e.conv[static_cast<int>(Dir::fwd)],
                                            static_cast<cudnnConvolutionFwdAlgo_t>(a.algo),
                                            ws.get(), a.workspace, sc.zero(dt), e.y, y.data));
  }
  if (g.has_bias && bias && bias->data) {
    TCV_CUDA_DISPATCH_FLOAT(dt, "conv2d", {
      add_bias_kernel<scalar_t><<<grid_for(ynumel), 256, 0, st>>>(
          y.ptr<scalar_t>(), bias->ptr<const scalar_t>(), ynumel, g.k, g.oh * g.ow);
    });
    TCV_CUDA_LAUNCH_CHECK();
  }
}

void conv2d_backward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                     const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                     const KTensor* dbias) {
  const DType dt = dy.dtype;
  (void)cudnn_dtype(dt);
  cudaStream_t st = cur_stream();
  const int64_t xnumel = g.n * g.c * g.h * g.w, wnumel = g.k * (g.c / g.groups) * g.r * g.s;
  const bool empty_dy = g.n * g.k * g.oh * g.ow == 0;
  if (dbias) {
    if (g.k > 0) {
      TCV_CUDA_DISPATCH_FLOAT(dt, "conv2d_backward", {
        bias_grad_kernel<scalar_t><<<static_cast<unsigned>(g.k), 256, 0, st>>>(
            dy.ptr<const scalar_t>(), dbias->ptr<scalar_t>(), g.n, g.k, g.oh * g.ow);
      });
      TCV_CUDA_LAUNCH_CHECK();
    }
  }
  const bool need_dx = dx && xnumel > 0, need_dw = dweight && wnumel > 0;
  if (!need_dx && !need_dw) return;
  if (empty_dy || g.c == 0) {
    if (need_dx) TCV_CUDA_CHECK(cudaMemsetAsync(dx->data, 0, xnumel * dtype_size(dt), st));
    if (need_dw) TCV_CUDA_CHECK(cudaMemsetAsync(dweight->data, 0, wnumel * dtype_size(dt), st));
    return;
  }
  const ConvKey key = make_key(g, dt);
  ConvEntry& e = entry(key, g, dt);
  const Scaling sc;
  if (need_dx) {
    const Algo& a = algorithm(e, key, dt, Dir::bwd_data, nullptr, weight.data, dy.data, dx->data);
    Workspace ws(a.workspace);
    TCV_CUDNN_CHECK(cudnnConvolutionBackwardData(
        cudnn_handle(), sc.one(dt), e.w, weight.data, e.y, dy.data,
        e.conv[static_cast<int>(Dir::bwd_data)], static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
        ws.get(), a.workspace, sc.zero(dt), e.x, dx->data));
  }
  if (need_dw) {
    const Algo& a = algorithm(e, key, dt, Dir::bwd_filter, x.data, nullptr, dy.data, dweight->data);
    Workspace ws(a.workspace);
    TCV_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(cudnn_handle(), sc.one(dt), e.x, x.data, e.y, dy.data,
                                       e.conv[static_cast<int>(Dir::bwd_filter)],
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                       ws.get(), a.workspace, sc.zero(dt), e.w, dweight->data));
  }
}

size_t conv2d_cache_size() {
  ConvCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.map.size();
}

}  // namespace tcv::kernels::cuda
