#include <cub/device/device_segmented_sort.cuh>

#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/sort.h"
#include "kernels/cuda/sort_key.cuh"

namespace tcv::kernels::cuda {
namespace {

// The radix key of a value: floating types (f16 and bf16 through f32) by
// sort_key, integers with the sign bit flipped.
template <typename T>
struct SortKey {
  using K = decltype(sort_key(to_acc(T())));
  __device__ static K of(T v) { return sort_key(to_acc(v)); }
};
template <>
struct SortKey<int32_t> {
  using K = uint32_t;
  __device__ static K of(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
};
template <>
struct SortKey<int64_t> {
  using K = uint64_t;
  __device__ static K of(int64_t v) { return static_cast<uint64_t>(v) ^ 0x8000000000000000ull; }
};
template <>
struct SortKey<uint8_t> {
  using K = uint8_t;
  __device__ static K of(uint8_t v) { return v; }
};
template <>
struct SortKey<bool> {
  using K = uint8_t;
  __device__ static K of(bool v) { return v ? 1 : 0; }
};

// Line L = o·inner + j holds in[o, :, j]; its keys and positions go to [L·n, (L+1)·n).
template <typename T, typename K>
__global__ void keys_kernel(K* keys, int64_t* pos, int64_t* offsets, const T* in, int64_t n,
                            int64_t inner, int64_t lines, int64_t total) {
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t line = e / n, i = e - line * n;
    const int64_t o = line / inner, j = line - o * inner;
    keys[e] = SortKey<T>::of(in[(o * n + i) * inner + j]);
    pos[e] = i;
    if (i == 0) offsets[line] = e;
    if (e == total - 1) offsets[lines] = total;
  }
}

// The first m sorted entries of each line, back to (outer, m, inner): values are
// read from the input at the sorted positions, so they keep their exact bits.
template <typename T>
__global__ void take_kernel(T* values, int64_t* indices, const T* in, const int64_t* pos, int64_t n,
                            int64_t m, int64_t inner, int64_t total) {
  TCV_CUDA_GRID_STRIDE(e, total) {
    const int64_t line = e / m, i = e - line * m;
    const int64_t o = line / inner, j = line - o * inner;
    const int64_t src = pos[line * n + i];
    const int64_t dst = (o * m + i) * inner + j;
    values[dst] = in[(o * n + src) * inner + j];
    indices[dst] = src;
  }
}

template <typename T>
void sort_lines(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
                int64_t n, int64_t inner, int64_t m, bool descending) {
  using K = typename SortKey<T>::K;
  const int64_t lines = outer * inner;
  const int64_t total = lines * n;
  cudaStream_t st = cur_stream();
  Workspace keys_in(total * sizeof(K)), keys_out(total * sizeof(K));
  Workspace pos_in(total * sizeof(int64_t)), pos_out(total * sizeof(int64_t));
  Workspace offsets((lines + 1) * sizeof(int64_t));
  K* ki = static_cast<K*>(keys_in.get());
  K* ko = static_cast<K*>(keys_out.get());
  int64_t* pi = static_cast<int64_t*>(pos_in.get());
  int64_t* po = static_cast<int64_t*>(pos_out.get());
  int64_t* off = static_cast<int64_t*>(offsets.get());
  keys_kernel<T, K>
      <<<grid_for(total), 256, 0, st>>>(ki, pi, off, in.ptr<const T>(), n, inner, lines, total);
  TCV_CUDA_LAUNCH_CHECK();
  size_t temp_bytes = 0;
  if (descending)
    TCV_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairsDescending(
        nullptr, temp_bytes, ki, ko, pi, po, total, lines, off, off + 1, st));
  else
    TCV_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, ki, ko, pi, po,
                                                             total, lines, off, off + 1, st));
  Workspace temp(std::max<size_t>(temp_bytes, 1));
  if (descending)
    TCV_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairsDescending(
        temp.get(), temp_bytes, ki, ko, pi, po, total, lines, off, off + 1, st));
  else
    TCV_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(temp.get(), temp_bytes, ki, ko, pi, po,
                                                             total, lines, off, off + 1, st));
  const int64_t out_total = lines * m;
  take_kernel<T><<<grid_for(out_total), 256, 0, st>>>(
      values.ptr<T>(), indices.ptr<int64_t>(), in.ptr<const T>(), po, n, m, inner, out_total);
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace

void sort(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, bool descending) {
  if (outer * n * inner == 0) return;
  TCV_CUDA_DISPATCH_ALL(in.dtype, "sort",
                        sort_lines<scalar_t>(values, indices, in, outer, n, inner, n, descending));
}

void topk(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, int64_t k, bool largest) {
  if (outer * k * inner == 0) return;
  // A stable sort orders ties by position, which is the CPU's tie-break.
  TCV_CUDA_DISPATCH_ALL(in.dtype, "topk",
                        sort_lines<scalar_t>(values, indices, in, outer, n, inner, k, largest));
}

}  // namespace tcv::kernels::cuda
