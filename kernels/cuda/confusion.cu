#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/confusion.h"
#include "kernels/cuda/handles.cuh"

namespace tcv::kernels::cuda {
namespace {

struct Check {
  unsigned long long bad;
  unsigned long long first_bad;  // ULLONG_MAX when none
};

template <typename T>
__device__ __forceinline__ bool above(T v, T best) {
  const auto a = to_acc(v), b = to_acc(best);
  return a > b || (a != a && b == b);  // NaN wins, as torch.argmax
}

// Up to this many bins a block counts in shared memory (32-bit) and adds its
// totals to global memory once; above it, every pair is a global atomic.
constexpr int64_t kSharedBins = 8192;

template <typename T, bool kLogits, bool kShared>
__global__ void confusion_kernel(unsigned long long* counts, const T* pred, const int64_t* target,
                                 int64_t c, int64_t s, int64_t positions, int64_t ignore,
                                 Check* check) {
  extern __shared__ unsigned int bins[];
  if (kShared) {
    for (int64_t i = threadIdx.x; i < c * c; i += blockDim.x) bins[i] = 0;
    __syncthreads();
  }
  TCV_CUDA_GRID_STRIDE(pos, positions) {
    const int64_t t = target[pos];
    if (t == ignore) continue;
    int64_t p;
    if constexpr (kLogits) {
      const int64_t n = pos / s, j = pos - n * s;
      const T* x = pred + n * c * s + j;
      T best = x[0];
      p = 0;
      for (int64_t k = 1; k < c; ++k) {
        const T v = x[k * s];
        if (above(v, best)) best = v, p = k;
      }
    } else {
      p = static_cast<int64_t>(pred[pos]);
    }
    if (t < 0 || t >= c || p < 0 || p >= c) {
      atomicAdd(&check->bad, 1ull);
      atomicMin(&check->first_bad, static_cast<unsigned long long>(pos));
      continue;
    }
    if (kShared)
      atomicAdd(&bins[t * c + p], 1u);
    else
      atomicAdd(&counts[t * c + p], 1ull);
  }
  if (kShared) {
    __syncthreads();
    for (int64_t i = threadIdx.x; i < c * c; i += blockDim.x)
      if (bins[i]) atomicAdd(&counts[i], static_cast<unsigned long long>(bins[i]));
  }
}

__global__ void check_init_kernel(Check* check) {
  check->bad = 0;
  check->first_bad = ULLONG_MAX;
}

template <typename T, bool kLogits>
void launch(unsigned long long* counts, const T* pred, const int64_t* target, int64_t c, int64_t s,
            int64_t positions, int64_t ignore, Check* check) {
  constexpr int kThreads = 256;
  // A block's shared bin counts at most the block's grid-stride share of the
  // positions: 32 bits hold it unless that share reaches 2^31.
  const int blocks = grid_for(positions, kThreads);
  if (c * c <= kSharedBins && positions / blocks < (int64_t(1) << 31)) {
    confusion_kernel<T, kLogits, true>
        <<<blocks, kThreads, static_cast<size_t>(c * c) * sizeof(unsigned int), cur_stream()>>>(
            counts, pred, target, c, s, positions, ignore, check);
  } else {
    confusion_kernel<T, kLogits, false><<<blocks, kThreads, 0, cur_stream()>>>(
        counts, pred, target, c, s, positions, ignore, check);
  }
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace

ConfusionCheck confusion_matrix_add(const KTensor& counts, const KTensor& pred,
                                    const KTensor& target, int64_t ignore) {
  TCV_CHECK(counts.dtype == DType::i64 && counts.ndim == 2 && counts.is_contiguous(),
            "[confusion_matrix] counts must be contiguous (C, C) i64");
  TCV_CHECK(target.dtype == DType::i64 && target.ndim == 2 && target.is_contiguous(),
            "[confusion_matrix] kernel expects contiguous (N, S) i64 targets");
  const int64_t c = counts.sizes[0], s = target.sizes[1], positions = target.numel();
  const bool logits = pred.ndim == 3;
  TCV_CHECK(pred.is_contiguous() && (logits ? pred.sizes[1] == c : pred.dtype == DType::i64),
            "[confusion_matrix] kernel expects contiguous (N, S) i64 labels or (N, C, S) logits");
  ConfusionCheck out;
  if (positions == 0) return out;
  Workspace ws(sizeof(Check));
  Check* check = static_cast<Check*>(ws.get());
  check_init_kernel<<<1, 1, 0, cur_stream()>>>(check);
  TCV_CUDA_LAUNCH_CHECK();
  auto* cnt = reinterpret_cast<unsigned long long*>(counts.ptr<int64_t>());
  const int64_t* t = target.ptr<const int64_t>();
  if (logits) {
    TCV_CUDA_DISPATCH_FLOAT(pred.dtype, "confusion_matrix", {
      launch<scalar_t, true>(cnt, pred.ptr<const scalar_t>(), t, c, s, positions, ignore, check);
    });
  } else {
    launch<int64_t, false>(cnt, pred.ptr<const int64_t>(), t, c, s, positions, ignore, check);
  }
  Check h{};
  memcpy_d2h(&h, check, sizeof(h));
  out.bad = static_cast<int64_t>(h.bad);
  out.first_bad = h.bad ? static_cast<int64_t>(h.first_bad) : -1;
  return out;
}

}  // namespace tcv::kernels::cuda
