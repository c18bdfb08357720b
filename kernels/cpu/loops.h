// Strided N-operand loops for the CPU: dimension coalescing, a contiguous fast
// path the compiler vectorizes, and OpenMP over the outer dimensions.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// Work below this many elements runs on one thread: forking costs more.
constexpr int64_t kGrain = 32768;

/// Calls f(begin, end) over [0, n) split across OpenMP threads.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int max_threads = omp_get_max_threads();
  if (n <= grain || max_threads == 1 || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(max_threads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast <int>(chunks))
  {
    const int64_t t = omp_get_thread_num();
    const int64_t per = (n + chunks - 1) / chunks;
    const int64_t b = t * per;
    const int64_t e = std::min(n, b + per);
    if (b < e) f(b, e);
  }
}

/// N operands over one shape. Operand 0 is the output; the rest are read.
/// Strides are in bytes, already broadcast (0 where an operand is expanded).
template <int N>
struct Loop {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  char* base[N] = {};

  explicit Loop(const std::array<const KTensor*, N>& ops) {
    const KTensor& out = *ops[0];
    // Drop size-1 dims, then merge neighbours that are contiguous in every operand.
    int64_t sz[kMaxDims];
    int64_t st[N][kMaxDims];
    int d = 0;
    for (int i = 0; i < out.ndim; ++i) {
      if (out.sizes[i] == 1) continue;
      sz[d] = out.sizes[i];
      for (int k = 0; k < N; ++k)
        st[k][d] = ops[k]->strides[i] * static_cast<int64_t>(dtype_size(ops[k]->dtype));
      ++d;
    }
    for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(ops[k]->data);
    if (d == 0) {
      ndim = 1;
      sizes[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 0;
      return;
    }
    // Merge from the innermost outwards.
    int nd = 0;
    sizes[0] = sz[d - 1];
    for (int k = 0; k < N; ++k) strides[k][0] = st[k][d - 1];
    nd = 1;
    for (int i = d - 2; i >= 0; --i) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k)
        if (st[k][i] != strides[k][nd - 1] * sizes[nd - 1]) mergeable = false;
      if (mergeable) {
        sizes[nd - 1] *= sz[i];
      } else {
        sizes[nd] = sz[i];
        for (int k = 0; k < N; ++k) strides[k][nd] = st[k][i];
        ++nd;
      }
    }
    ndim = nd;  // dims are stored innermost first
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }

  /// Calls inner(ptrs, inner_strides, n) over runs of the innermost dim. Threads
  /// split the elements, not the outer dims, so one long contiguous run (the
  /// common case once dims are merged) is shared too; a thread's range may
  /// start and end inside a run.
  template <typename Inner>
  void run(Inner&& inner) const {
    const int64_t n0 = std::max<int64_t>(sizes[0], 1);
    int64_t s0[N];
    for (int k = 0; k < N; ++k) s0[k] = strides[k][0];
    parallel_for(numel(), kGrain, [&](int64_t b, int64_t e) {
      // Unravel b into coordinates once, then step the outer dims like an odometer.
      int64_t idx[kMaxDims] = {};
      int64_t i0 = b % n0;
      int64_t rem = b / n0;
      for (int i = 1; i < ndim; ++i) {
        idx[i] = rem % sizes[i];
        rem /= sizes[i];
      }
      for (int64_t pos = b; pos < e;) {
        const int64_t len = std::min(n0 - i0, e - pos);
        char* p[N];
        for (int k = 0; k < N; ++k) {
          int64_t off = i0 * s0[k];
          for (int i = 1; i < ndim; ++i) off += idx[i] * strides[k][i];
          p[k] = base[k] + off;
        }
        inner(p, s0, len);
        pos += len;
        i0 = 0;
        for (int i = 1; i < ndim; ++i) {
          if (++idx[i] < sizes[i]) break;
          idx[i] = 0;
        }
      }
    });
  }
};

/// out[i] = f(in[i]...) elementwise; the output holds Out, every input In.
/// Contiguous runs (and runs where inputs are broadcast scalars) take plain
/// indexed loops that GCC vectorizes; anything else steps by strides. The run
/// body is flattened: f is inlined into every loop even when GCC's heuristics
/// would keep a large f (a loss with exp and log) as a call per element, which
/// stops vectorization.
template <typename Out, typename In, typename F, typename... K>
void map(const KTensor& out, F&& f, const K&... in) {
  constexpr int N = 1 + sizeof...(K);
  Loop<N> loop({&out, &in...});
  loop.run([&](char** p, const int64_t* s, int64_t n) __attribute__((flatten)) {
    constexpr int64_t so = sizeof(Out), si = sizeof(In);
    Out* __restrict__ o = reinterpret_cast<Out*>(p[0]);
    if constexpr (N == 2) {
      const In* __restrict__ a = reinterpret_cast<const In*>(p[1]);
      if (s[0] == so && s[1] == si) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
        return;
      }
    } else if constexpr (N == 3) {
      const In* __restrict__ a = reinterpret_cast<const In*>(p[1]);
      const In* __restrict__ b = reinterpret_cast<const In*>(p[2]);
      if (s[0] == so && s[1] == si && s[2] == si) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
        return;
      }
      if (s[0] == so && s[1] == si && s[2] == 0) {
        const In bv = *b;
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
        return;
      }
      if (s[0] == so && s[1] == 0 && s[2] == si) {
        const In av = *a;
        for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
        return;
      }
    } else {
      // Three or more inputs, each contiguous or a broadcast scalar (a loss's
      // backward: the expanded incoming gradient with x and y): broadcast
      // values are spread over a small buffer once, then chunks run as plain
      // contiguous loops.
      bool chunkable = s[0] == so;
      for (int k = 1; k < N; ++k) chunkable = chunkable && (s[k] == si || s[k] == 0);
      if (chunkable) {
        constexpr int64_t kChunk = 256;
        In spread[N - 1][kChunk];
        const In* src[N - 1];
        for (int k = 0; k < N - 1; ++k) {
          src[k] = reinterpret_cast<const In*>(p[k + 1]);
          if (s[k + 1] == 0) {
            std::fill_n(spread[k], std::min(n, kChunk), *src[k]);
            src[k] = spread[k];
          }
        }
        for (int64_t c = 0; c < n; c += kChunk) {
          const int64_t len = std::min(kChunk, n - c);
          Out* oc = o + c;
          [&]<size_t... I>(std::index_sequence<I...>) {
            const In* q[] = {src[I] + (s[I + 1] == 0 ? 0 : c)...};
            for (int64_t i = 0; i < len; ++i) oc[i] = f(q[I][i]...);
          }
          (std::make_index_sequence<N - 1>{});
        }
        return;
      }
    }
    [&]<size_t... I>(std::index_sequence<I...>) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
    }
    (std::make_index_sequence<sizeof...(K)>{});
  });
}

}  // namespace tcv::kernels::cpu
