#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/index.h"
#include "kernels/cuda/loops.cuh"

namespace tcv::kernels::cuda {
namespace {

// A descriptor of `t` over `shape`'s sizes (same ndim), not stepping along `zero_dim`.
KTensor restride(const KTensor& t, const KTensor& shape, int zero_dim) {
  KTensor r = t;
  for (int i = 0; i < t.ndim; ++i) r.sizes[i] = shape.sizes[i];
  r.strides[zero_dim] = 0;
  return r;
}

// Same sizes as `shape`, t's own strides (src of scatter_add may be larger than index).
KTensor resize(const KTensor& t, const KTensor& shape) {
  KTensor r = t;
  for (int i = 0; i < t.ndim; ++i) r.sizes[i] = shape.sizes[i];
  return r;
}

template <typename I>
__global__ void check_indices_kernel(const I* p, Indexer ix, int64_t n, int64_t size,
                                     unsigned long long* first_bad) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    const int64_t v = static_cast<int64_t>(p[ix.offset(i)]);
    if (v < 0 || v >= size) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

template <typename B, typename I>
__global__ void index_select_kernel(B* out, const B* in, const I* idx, int64_t istride,
                                    int64_t n_idx, int64_t n_in, int64_t inner, int64_t total) {
  TCV_CUDA_GRID_STRIDE(w, total) {
    const int64_t q = w / inner, jj = w - q * inner;
    const int64_t o = q / n_idx, i = q - o * n_idx;
    out[w] = in[(o * n_in + static_cast<int64_t>(idx[i * istride])) * inner + jj];
  }
}

template <typename B, typename I>
__global__ void gather_kernel(int64_t n, MultiIndexer<3> mi, B* out, const I* idx, const B* in,
                              int64_t dim_stride) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    int64_t off[3];
    mi.offsets(i, off);
    out[off[0]] = in[off[2] + static_cast<int64_t>(idx[off[1]]) * dim_stride];
  }
}

// 1- and 2-byte atomics through a compare-and-swap on the aligned 32-bit word.
template <typename T, typename F>
__device__ void atomic_subword(T* addr, F f) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2);
  const size_t a = reinterpret_cast<size_t>(addr);
  unsigned int* word = reinterpret_cast<unsigned int*>(a & ~size_t(3));
  const unsigned int shift = static_cast<unsigned int>(a & 3) * 8;
  const unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int bits = (assumed & mask) >> shift;
    T cur;
    if constexpr (sizeof(T) == 1) {
      const uint8_t b = static_cast<uint8_t>(bits);
      memcpy(&cur, &b, 1);
    } else {
      const uint16_t b = static_cast<uint16_t>(bits);
      memcpy(&cur, &b, 2);
    }
    const T next = f(cur);
    unsigned int nb = 0;
    memcpy(&nb, &next, sizeof(T));
    old = atomicCAS(word, assumed, (assumed & ~mask) | ((nb << shift) & mask));
  } while (assumed != old);
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, int32_t> || std::is_same_v<T, half>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, bf16>) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    atomicAdd(p, v);
#else
    atomic_subword(
        p, [v](bf16 c) { return __float2bfloat16(__bfloat162float(c) + __bfloat162float(v)); });
#endif
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v) atomic_subword(p, [](bool) { return true; });  // bool adds as logical or
  } else {
    static_assert(std::is_same_v<T, uint8_t>);
    atomic_subword(p, [v](uint8_t c) { return static_cast<uint8_t>(c + v); });
  }
}

template <typename T, typename I>
__global__ void scatter_add_kernel(int64_t n, MultiIndexer<3> mi, const I* idx, T* out,
                                   const T* src, int64_t out_dim_stride) {
  TCV_CUDA_GRID_STRIDE(i, n) {
    int64_t off[3];
    mi.offsets(i, off);
    atomic_add(out + off[1] + static_cast<int64_t>(idx[off[0]]) * out_dim_stride, src[off[2]]);
  }
}

template <int N>
MultiIndexer<N> indexer(KTensor* ops) {
  MultiIndexer<N> mi;
  detail::prepare<N>(ops, mi);
  return mi;
}

}  // namespace

void find_index_out_of_range(const KTensor& index, int64_t size, IndexOutOfRange* result) {
  *result = {};
  const int64_t n = index.numel();
  if (n == 0) return;
  Workspace ws(sizeof(unsigned long long));
  auto* first_bad = static_cast<unsigned long long*>(ws.get());
  TCV_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), cur_stream()));
  TCV_DISPATCH_INDEX(index.dtype, "index", {
    check_indices_kernel<scalar_t><<<grid_for(n), 256, 0, cur_stream()>>>(
        index.ptr<const scalar_t>(), Indexer(index), n, size, first_bad);
    TCV_CUDA_LAUNCH_CHECK();
  });
  unsigned long long bad = 0;
  memcpy_d2h(&bad, first_bad, sizeof(bad));  // the one sync of the check
  if (bad == ~0ull) return;
  // Offset of the bad linear position, then its value.
  int64_t rem = static_cast<int64_t>(bad), off = 0;
  for (int d = index.ndim - 1; d >= 0; --d) {
    off += (rem % index.sizes[d]) * index.strides[d];
    rem /= index.sizes[d];
  }
  TCV_DISPATCH_INDEX(index.dtype, "index", {
    scalar_t v{};
    memcpy_d2h(&v, index.ptr<const scalar_t>() + off, sizeof(v));
    *result = {.found = true, .value = static_cast<int64_t>(v)};
  });
}

void index_select(const KTensor& out, const KTensor& in, int dim, const KTensor& index) {
  const int64_t total = out.numel();
  if (total == 0) return;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= in.sizes[i];
  for (int i = dim + 1; i < in.ndim; ++i) inner *= in.sizes[i];
  const int64_t n_idx = index.numel();
  const int64_t istride = index.ndim > 0 ? index.strides[0] : 0;
  TCV_DISPATCH_INDEX(index.dtype, "index_select", {
    using I = scalar_t;
    dispatch_bits(in.dtype, [&](auto tag) {
      using B = decltype(tag);
      index_select_kernel<B, I><<<grid_for(total), 256, 0, cur_stream()>>>(
          out.ptr<B>(), in.ptr<const B>(), index.ptr<const I>(), istride, n_idx, in.sizes[dim],
          inner, total);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

void gather(const KTensor& out, const KTensor& in, int dim, const KTensor& index) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KTensor ops[3] = {out, index, restride(in, index, dim)};
  const MultiIndexer<3> mi = indexer<3>(ops);
  const int64_t dim_stride = in.strides[dim];
  TCV_DISPATCH_INDEX(index.dtype, "gather", {
    using I = scalar_t;
    dispatch_bits(in.dtype, [&](auto tag) {
      using B = decltype(tag);
      gather_kernel<B, I><<<grid_for(n), 256, 0, cur_stream()>>>(
          n, mi, ops[0].ptr<B>(), ops[1].ptr<const I>(), ops[2].ptr<const B>(), dim_stride);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

void scatter_add(const KTensor& out, int dim, const KTensor& index, const KTensor& src) {
  const int64_t n = index.numel();
  if (n == 0) return;
  KTensor ops[3] = {index, restride(out, index, dim), resize(src, index)};
  const MultiIndexer<3> mi = indexer<3>(ops);
  const int64_t os = out.strides[dim];
  TCV_DISPATCH_INDEX(index.dtype, "scatter_add", {
    using I = scalar_t;
    TCV_CUDA_DISPATCH_ALL(out.dtype, "scatter_add", {
      scatter_add_kernel<scalar_t, I><<<grid_for(n), 256, 0, cur_stream()>>>(
          n, mi, ops[0].ptr<const I>(), ops[1].ptr<scalar_t>(), ops[2].ptr<const scalar_t>(), os);
      TCV_CUDA_LAUNCH_CHECK();
    });
  });
}

void masked_fill(const KTensor& out, const KTensor& in, const KTensor& mask, double value) {
  if (out.numel() == 0) return;
  TCV_CUDA_DISPATCH_ALL(out.dtype, "masked_fill", {
    using T = scalar_t;
    const T v = convert<T>(value);
    map<T, T, bool>(
        out, [v] __device__(T x, bool m) { return m ? v : x; }, in, mask);
  });
}

}  // namespace tcv::kernels::cuda
