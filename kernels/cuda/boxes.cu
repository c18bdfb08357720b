#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <limits>

#include "kernels/cuda/boxes.h"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/rn.cuh"
#include "kernels/cuda/sort_key.cuh"
#include "kernels/nms_threshold.h"

namespace tcv::kernels::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T area_of(const T* b) {
  return mul_rn(sub_rn(b[2], b[0]), sub_rn(b[3], b[1]));
}

// The overlap of kept box a with box b, as kernels/cpu/boxes.cpp's suppress_row.
template <typename T>
__device__ __forceinline__ T nms_overlap(const T* a, const T* b) {
  const T xx1 = a[0] < b[0] ? b[0] : a[0];
  const T yy1 = a[1] < b[1] ? b[1] : a[1];
  const T xx2 = b[2] < a[2] ? b[2] : a[2];
  const T yy2 = b[3] < a[3] ? b[3] : a[3];
  const T dw = sub_rn(xx2, xx1), dh = sub_rn(yy2, yy1);
  const T w = T(0) < dw ? dw : T(0);
  const T h = T(0) < dh ? dh : T(0);
  const T inter = mul_rn(w, h);
  return div_rn(inter, sub_rn(add_rn(area_of(a), area_of(b)), inter));
}

template <typename T>
__global__ void box_iou_kernel(T* out, const T* a, const T* b, int64_t n, int64_t m) {
  TCV_CUDA_GRID_STRIDE(e, n * m) {
    const int64_t i = e / m, j = e - i * m;
    const T* p = a + 4 * i;
    const T* q = b + 4 * j;
    const T ltx = p[0] > q[0] ? p[0] : q[0];
    const T lty = p[1] > q[1] ? p[1] : q[1];
    const T rbx = p[2] < q[2] ? p[2] : q[2];
    const T rby = p[3] < q[3] ? p[3] : q[3];
    const T dw = sub_rn(rbx, ltx), dh = sub_rn(rby, lty);
    const T w = dw > T(0) ? dw : T(0);
    const T h = dh > T(0) ? dh : T(0);
    const T inter = mul_rn(w, h);
    out[e] = div_rn(inter, sub_rn(add_rn(area_of(p), area_of(q)), inter));
  }
}

template <typename T, typename K>
__global__ void nms_keys_kernel(K* keys, int64_t* pos, const T* scores, int64_t n) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    keys[i] = sort_key(scores[i]);
    pos[i] = i;
  }
}

template <typename T>
__global__ void gather_boxes_kernel(T* sorted, const T* boxes, const int64_t* order, int64_t n) {
  TCV_CUDA_GRID_STRIDE(e, 4 * n) {
    sorted[e] = boxes[4 * order[e / 4] + e % 4];
  }
}

constexpr int kBlock = 64;  // boxes per mask word

// mask[i, cb] bit t: box i (sorted order) overlaps box 64·cb + t after it.
template <typename T>
__global__ void nms_mask_kernel(uint64_t* mask, const T* boxes, int64_t n, int64_t col_blocks,
                                T thr) {
  const int64_t row_block = blockIdx.y, col_block = blockIdx.x;
  if (row_block > col_block) return;
  const int64_t rows = min(n - row_block * kBlock, int64_t{kBlock});
  const int64_t cols = min(n - col_block * kBlock, int64_t{kBlock});
  __shared__ T cb[kBlock * 4];
  if (threadIdx.x < cols)
    for (int k = 0; k < 4; ++k)
      cb[threadIdx.x * 4 + k] = boxes[(col_block * kBlock + threadIdx.x) * 4 + k];
  __syncthreads();
  if (threadIdx.x >= rows) return;
  const int64_t i = row_block * kBlock + threadIdx.x;
  const T* a = boxes + i * 4;
  uint64_t bits = 0;
  const int start = row_block == col_block ? static_cast<int>(threadIdx.x) + 1 : 0;
  for (int t = start; t < cols; ++t)
    if (nms_overlap(a, cb + t * 4) > thr) bits |= 1ull << t;
  mask[i * col_blocks + col_block] = bits;
}

// One block walks the 64-box blocks in order. For block b: the diagonal words
// are loaded in parallel, one thread resolves the 64 boxes in order, then all
// threads or the masks of the kept boxes into the removed words after b.
__global__ void nms_reduce_kernel(int64_t* keep, int64_t* count, uint64_t* removed,
                                  const uint64_t* mask, const int64_t* order, int64_t n,
                                  int64_t col_blocks) {
  __shared__ uint64_t diag[kBlock];
  __shared__ uint64_t kept_bits;
  __shared__ int64_t kept_total;
  if (threadIdx.x == 0) kept_total = 0;
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int64_t rows = min(n - b * kBlock, int64_t{kBlock});
    if (threadIdx.x < rows) diag[threadIdx.x] = mask[(b * kBlock + threadIdx.x) * col_blocks + b];
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t cur = removed[b], kept = 0;
      int64_t k = kept_total;
      for (int t = 0; t < rows; ++t) {
        if (cur >> t & 1ull) continue;
        kept |= 1ull << t;
        cur |= diag[t];
        keep[k++] = order[b * kBlock + t];
      }
      kept_bits = kept;
      kept_total = k;
    }
    __syncthreads();
    const uint64_t kept = kept_bits;
    for (int64_t w = b + 1 + threadIdx.x; w < col_blocks; w += blockDim.x) {
      uint64_t acc = removed[w];
      for (uint64_t bits = kept; bits; bits &= bits - 1) {
        const int t = __ffsll(static_cast<long long>(bits)) - 1;
        acc |= mask[(b * kBlock + t) * col_blocks + w];
      }
      removed[w] = acc;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = kept_total;
}

template <typename T>
int64_t nms_typed(const KTensor& keep, const KTensor& boxes, const KTensor& scores, double thr) {
  using K = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const int64_t n = boxes.sizes[0];
  const int64_t col_blocks = (n + kBlock - 1) / kBlock;
  cudaStream_t st = cur_stream();
  Workspace keys_in(n * sizeof(K)), keys_out(n * sizeof(K));
  Workspace pos_in(n * sizeof(int64_t)), pos_out(n * sizeof(int64_t));
  K* ki = static_cast<K*>(keys_in.get());
  K* ko = static_cast<K*>(keys_out.get());
  int64_t* pi = static_cast<int64_t*>(pos_in.get());
  int64_t* po = static_cast<int64_t*>(pos_out.get());
  nms_keys_kernel<T, K><<<grid_for(n), 256, 0, st>>>(ki, pi, scores.ptr<const T>(), n);
  TCV_CUDA_LAUNCH_CHECK();
  size_t temp_bytes = 0;
  TCV_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, temp_bytes, ki, ko, pi, po, static_cast<int>(n), 0, int(sizeof(K) * 8), st));
  Workspace temp(std::max<size_t>(temp_bytes, 1));
  TCV_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      temp.get(), temp_bytes, ki, ko, pi, po, static_cast<int>(n), 0, int(sizeof(K) * 8), st));
  Workspace sorted(4 * n * sizeof(T));
  T* sb = static_cast<T*>(sorted.get());
  gather_boxes_kernel<T><<<grid_for(4 * n), 256, 0, st>>>(sb, boxes.ptr<const T>(), po, n);
  TCV_CUDA_LAUNCH_CHECK();
  Workspace mask(n * col_blocks * sizeof(uint64_t));
  uint64_t* mk = static_cast<uint64_t*>(mask.get());
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(col_blocks));
  nms_mask_kernel<T><<<grid, kBlock, 0, st>>>(mk, sb, n, col_blocks, threshold_in<T>(thr));
  TCV_CUDA_LAUNCH_CHECK();
  Workspace removed(col_blocks * sizeof(uint64_t)), count(sizeof(int64_t));
  TCV_CUDA_CHECK(cudaMemsetAsync(removed.get(), 0, col_blocks * sizeof(uint64_t), st));
  int64_t* cnt = static_cast<int64_t*>(count.get());
  nms_reduce_kernel<<<1, 256, 0, st>>>(
      keep.ptr<int64_t>(), cnt, static_cast<uint64_t*>(removed.get()), mk, po, n, col_blocks);
  TCV_CUDA_LAUNCH_CHECK();
  int64_t k = 0;
  memcpy_d2h(&k, cnt, sizeof(int64_t));
  return k;
}

template <typename T>
__device__ __forceinline__ bool beats(T v, T best) {
  return (v != v && best == best) || v > best;
}

template <typename T>
__global__ void match_columns_kernel(int64_t* matches, const T* iou, int64_t m, int64_t a,
                                     double thr) {
  TCV_CUDA_GRID_STRIDE(j, a) {
    T best = iou[j];
    int64_t arg = 0;
    for (int64_t g = 1; g < m; ++g) {
      const T v = iou[g * a + j];
      if (beats(v, best)) {
        best = v;
        arg = g;
      }
    }
    matches[j] = static_cast<double>(best) < thr ? -1 : arg;
  }
}

// One block per ground truth: the first anchor of its largest IoU.
template <typename T>
__global__ void match_rows_kernel(int64_t* best_anchor, const T* iou, int64_t a) {
  __shared__ T sv[256];
  __shared__ int64_t si[256];
  const T* row = iou + blockIdx.x * a;
  T best = row[0];
  int64_t arg = 0;
  for (int64_t j = threadIdx.x; j < a; j += blockDim.x)
    if (beats(row[j], best) || (j < arg && !beats(best, row[j]))) {
      best = row[j];
      arg = j;
    }
  sv[threadIdx.x] = best;
  si[threadIdx.x] = arg;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const T v = sv[threadIdx.x + s];
      const int64_t i = si[threadIdx.x + s];
      const T u = sv[threadIdx.x];
      if (beats(v, u) || (!beats(u, v) && i < si[threadIdx.x])) {
        sv[threadIdx.x] = v;
        si[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) best_anchor[blockIdx.x] = si[0];
}

// In ground-truth order, so a later ground truth wins an anchor two share.
__global__ void match_force_kernel(int64_t* matches, const int64_t* best_anchor, int64_t m) {
  for (int64_t g = 0; g < m; ++g) matches[best_anchor[g]] = g;
}

__global__ void fill_kernel(int64_t* out, int64_t n, int64_t v) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    out[i] = v;
  }
}

template <typename T>
__global__ void l2_normalize_kernel(T* y, T* norm, const T* x, int64_t c, int64_t inner,
                                    int64_t positions, T eps) {
  TCV_CUDA_GRID_STRIDE(e, positions) {
    const int64_t o = e / inner, s = e - o * inner;
    const T* xp = x + o * c * inner + s;
    T ss = 0;
    for (int64_t k = 0; k < c; ++k) ss += xp[k * inner] * xp[k * inner];
    const T nrm = sqrt(ss);
    norm[e] = nrm;
    const T d = nrm > eps ? nrm : eps;
    T* yp = y + o * c * inner + s;
    for (int64_t k = 0; k < c; ++k) yp[k * inner] = xp[k * inner] / d;
  }
}

template <typename T>
__global__ void l2_normalize_backward_kernel(T* dx, const T* dy, const T* y, const T* norm,
                                             int64_t c, int64_t inner, int64_t positions, T eps) {
  TCV_CUDA_GRID_STRIDE(e, positions) {
    const int64_t o = e / inner, s = e - o * inner;
    const int64_t base = o * c * inner + s;
    T dot = 0;
    for (int64_t k = 0; k < c; ++k) dot += dy[base + k * inner] * y[base + k * inner];
    const T nrm = norm[e];
    const bool active = nrm >= eps;
    const T inv = T(1) / (active ? nrm : eps);
    const T kd = active ? dot : T(0);
    for (int64_t k = 0; k < c; ++k) {
      const int64_t i = base + k * inner;
      dx[i] = (dy[i] - y[i] * kd) * inv;
    }
  }
}

}  // namespace

void box_iou(const KTensor& out, const KTensor& a, const KTensor& b) {
  const int64_t n = a.sizes[0], m = b.sizes[0];
  if (n * m == 0) return;
  TCV_DISPATCH_FLOAT(
      a.dtype, "box_iou",
      box_iou_kernel<scalar_t><<<grid_for(n * m), 256, 0, cur_stream()>>>(
          out.ptr<scalar_t>(), a.ptr<const scalar_t>(), b.ptr<const scalar_t>(), n, m));
  TCV_CUDA_LAUNCH_CHECK();
}

void nms(const KTensor& keep, const KTensor& boxes, const KTensor& scores, double iou_threshold,
         int64_t* kept) {
  const int64_t n = boxes.sizes[0];
  *kept = 0;
  if (n == 0) return;
  TCV_DISPATCH_FLOAT(boxes.dtype, "nms",
                     *kept = nms_typed<scalar_t>(keep, boxes, scores, iou_threshold));
}

void ssd_match(const KTensor& matches, const KTensor& iou, double threshold) {
  const int64_t m = iou.sizes[0], a = iou.sizes[1];
  if (a == 0) return;
  cudaStream_t st = cur_stream();
  int64_t* out = matches.ptr<int64_t>();
  if (m == 0) {
    fill_kernel<<<grid_for(a), 256, 0, st>>>(out, a, -1);
    TCV_CUDA_LAUNCH_CHECK();
    return;
  }
  Workspace best(m * sizeof(int64_t));
  int64_t* ba = static_cast<int64_t*>(best.get());
  TCV_DISPATCH_FLOAT(iou.dtype, "ssd_match", {
    match_columns_kernel<scalar_t>
        <<<grid_for(a), 256, 0, st>>>(out, iou.ptr<const scalar_t>(), m, a, threshold);
    TCV_CUDA_LAUNCH_CHECK();
    match_rows_kernel<scalar_t>
        <<<static_cast<unsigned>(m), 256, 0, st>>>(ba, iou.ptr<const scalar_t>(), a);
    TCV_CUDA_LAUNCH_CHECK();
  });
  match_force_kernel<<<1, 1, 0, st>>>(out, ba, m);
  TCV_CUDA_LAUNCH_CHECK();
}

void l2_normalize(const KTensor& y, const KTensor& norm, const KTensor& x, int64_t outer, int64_t c,
                  int64_t inner, double eps) {
  const int64_t positions = outer * inner;
  if (positions == 0) return;
  TCV_DISPATCH_FLOAT(x.dtype, "l2_normalize",
                     l2_normalize_kernel<scalar_t><<<grid_for(positions), 256, 0, cur_stream()>>>(
                         y.ptr<scalar_t>(), norm.ptr<scalar_t>(), x.ptr<const scalar_t>(), c, inner,
                         positions, static_cast<scalar_t>(eps)));
  TCV_CUDA_LAUNCH_CHECK();
}

void l2_normalize_backward(const KTensor& dx, const KTensor& dy, const KTensor& y,
                           const KTensor& norm, int64_t outer, int64_t c, int64_t inner,
                           double eps) {
  const int64_t positions = outer * inner;
  if (positions * c == 0) return;
  TCV_DISPATCH_FLOAT(
      dx.dtype, "l2_normalize_backward",
      l2_normalize_backward_kernel<scalar_t><<<grid_for(positions), 256, 0, cur_stream()>>>(
          dx.ptr<scalar_t>(), dy.ptr<const scalar_t>(), y.ptr<const scalar_t>(),
          norm.ptr<const scalar_t>(), c, inner, positions, static_cast<scalar_t>(eps)));
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace tcv::kernels::cuda
