#include "kernels/cpu/index.h"

#include <atomic>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

// Half and bfloat16 add in float; bool adds as logical or.
template <typename T>
using add_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// A descriptor of `t` over `shape`'s sizes (same ndim), not stepping along `zero_dim`.
KTensor restride(const KTensor& t, const KTensor& shape, int zero_dim) {
  KTensor r = t;
  for (int i = 0; i < t.ndim; ++i) r.sizes[i] = shape.sizes[i];
  r.strides[zero_dim] = 0;
  return r;
}

}  // namespace

void find_index_out_of_range(const KTensor& index, int64_t size, IndexOutOfRange* result) {
  *result = {};
  if (index.numel() == 0) return;
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_value{0};
  TCV_DISPATCH_INDEX(index.dtype, "index", {
    Loop<1> loop({&index});
    loop.run([&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = static_cast<int64_t>(*reinterpret_cast<const scalar_t*>(p[0] + i * s[0]));
        if (v < 0 || v >= size) [[unlikely]] {
          bool expected = false;
          if (bad.compare_exchange_strong(expected, true)) bad_value.store(v);
          return;
        }
      }
    });
  });
  *result = {.found = bad.load(), .value = bad_value.load()};
}

void index_select(const KTensor& out, const KTensor& in, int dim, const KTensor& index) {
  const int64_t n_idx = index.numel();
  if (out.numel() == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(n_idx));
  TCV_DISPATCH_INDEX(index.dtype, "index_select", {
    for (int64_t i = 0; i < n_idx; ++i) idx[i] = index.ptr<scalar_t>()[i * index.strides[0]];
  });
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= in.sizes[i];
  for (int i = dim + 1; i < in.ndim; ++i) inner *= in.sizes[i];
  const int64_t n_in = in.sizes[dim];
  const size_t row = static_cast<size_t>(inner) * dtype_size(in.dtype);
  const char* src = static_cast<const char*>(in.data);
  char* dst = static_cast<char*>(out.data);
  // One row of `inner` elements per (outer, selected) pair, copied whole.
  parallel_for(outer * n_idx, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t o = w / n_idx, i = w % n_idx;
                   std::memcpy(dst + w * row, src + (o * n_in + idx[i]) * row, row);
                 }
               });
}

void gather(const KTensor& out, const KTensor& in, int dim, const KTensor& index) {
  if (out.numel() == 0) return;
  // `in` walked like out with no step along dim; the index adds that offset.
  const KTensor in_r = restride(in, index, dim);
  const int64_t dim_stride = in.strides[dim] * static_cast<int64_t>(dtype_size(in.dtype));
  TCV_DISPATCH_INDEX(index.dtype, "gather", {
    using I = scalar_t;
    dispatch_bits(in.dtype, [&](auto tag) {
      using B = decltype(tag);
      Loop<3> loop({&out, &index, &in_r});
      loop.run([&](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t k = static_cast<int64_t>(*reinterpret_cast<const I*>(p[1] + i * s[1]));
          *reinterpret_cast<B*>(p[0] + i * s[0]) =
              *reinterpret_cast<const B*>(p[2] + i * s[2] + k * dim_stride);
        }
      });
    });
  });
}

void scatter_add(const KTensor& out, int dim, const KTensor& index, const KTensor& src) {
  if (index.numel() == 0) return;
  // One task per line of index along dim (a position outside dim): a line writes
  // only its own line of out, so repeated indices accumulate without races.
  const int nd = index.ndim;
  const int64_t len = index.sizes[dim];
  const int64_t n_lines = index.numel() / len;
  TCV_DISPATCH_INDEX(index.dtype, "scatter_add", {
    using I = scalar_t;
    TCV_DISPATCH_ALL(out.dtype, "scatter_add", {
      using T = scalar_t;
      using A = add_t<T>;
      const int64_t os = out.strides[dim], is = index.strides[dim], ss = src.strides[dim];
      parallel_for(n_lines, std::max<int64_t>(1, kGrain / len), [&](int64_t b, int64_t e) {
        int64_t c[kMaxDims] = {};
        int64_t rem = b;
        for (int d = nd - 1; d >= 0; --d) {
          if (d == dim) continue;
          c[d] = rem % index.sizes[d];
          rem /= index.sizes[d];
        }
        for (int64_t line = b; line < e; ++line) {
          int64_t oo = 0, io = 0, so = 0;
          for (int d = 0; d < nd; ++d) {
            oo += c[d] * out.strides[d];
            io += c[d] * index.strides[d];
            so += c[d] * src.strides[d];
          }
          T* po = out.ptr<T>() + oo;
          const I* pi = index.ptr<I>() + io;
          const T* ps = src.ptr<T>() + so;
          for (int64_t j = 0; j < len; ++j) {
            T& o = po[static_cast<int64_t>(pi[j * is]) * os];
            o = static_cast<T>(static_cast<A>(o) + static_cast<A>(ps[j * ss]));
          }
          for (int d = nd - 1; d >= 0; --d) {  // odometer over the dims other than dim
            if (d == dim) continue;
            if (++c[d] < index.sizes[d]) break;
            c[d] = 0;
          }
        }
      });
    });
  });
}

void masked_fill(const KTensor& out, const KTensor& in, const KTensor& mask, double value) {
  if (out.numel() == 0) return;
  TCV_DISPATCH_ALL(out.dtype, "masked_fill", {
    using T = scalar_t;
    const T v = static_cast<T>(static_cast<add_t<T>>(value));
    Loop<3> loop({&out, &in, &mask});
    loop.run([&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const bool m = *reinterpret_cast<const bool*>(p[2] + i * s[2]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            m ? v : *reinterpret_cast<const T*>(p[1] + i * s[1]);
      }
    });
  });
}

}  // namespace tcv::kernels::cpu
