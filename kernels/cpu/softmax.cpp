#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/exp_sum.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

// Rows along r are strided by `inner`; with inner > 1 a block of neighbouring
// columns is processed together so the inner loops run over contiguous memory
// (exp_sum.h). With inner = 1 each row is contiguous and the loops run along it.

// fn(o) for each of the `outer` contiguous rows of r values (inner = 1), in parallel.
template <typename F>
void for_rows(int64_t outer, int64_t r, F fn) {
  parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(r, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t o = b; o < e; ++o) fn(o);
               });
}

// fn(base, len) for each block of up to kColumnBlock neighbouring columns of
// (outer, r, inner), in parallel: element (i, j) of the block is at
// base + i·inner + j for i < r, j < len.
template <typename F>
void for_column_blocks(int64_t outer, int64_t r, int64_t inner, F fn) {
  const int64_t nblocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(r * std::min(inner, kColumnBlock), 1));
  parallel_for(outer * nblocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / nblocks, j0 = (w % nblocks) * kColumnBlock;
      fn(o * r * inner + j0, std::min(kColumnBlock, inner - j0));
    }
  });
}

template <typename T>
void softmax_typed(SoftmaxKind kind, T* out, const T* in, int64_t outer, int64_t r, int64_t inner) {
  const bool log = kind == SoftmaxKind::log_softmax;
  if (inner == 1) {
    for_rows(outer, r, [&](int64_t o) {
      const T* x = in + o * r;
      T* y = out + o * r;
      const T mx = row_max(x, r);
      const double sum = row_exp_sum(x, r, mx, log ? nullptr : y);  // y = exp(x - mx)
      if (log) {
        const T l = mx + static_cast<T>(std::log(sum));
        for (int64_t i = 0; i < r; ++i) y[i] = x[i] - l;
      } else {
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t i = 0; i < r; ++i) y[i] *= inv;
      }
    });
    return;
  }
  for_column_blocks(outer, r, inner, [&](int64_t base, int64_t len) {
    T mx[kColumnBlock];
    double sum[kColumnBlock];
    const T* x = in + base;
    T* y = out + base;
    column_exp_sums(x, r, inner, len, mx, sum, log ? nullptr : y);
    if (log) {
      for (int64_t j = 0; j < len; ++j) mx[j] += static_cast<T>(std::log(sum[j]));
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) y[i * inner + j] = x[i * inner + j] - mx[j];
    } else {
      T inv[kColumnBlock];
      for (int64_t j = 0; j < len; ++j) inv[j] = static_cast<T>(1.0 / sum[j]);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) y[i * inner + j] *= inv[j];
    }
  });
}

template <typename T>
void softmax_backward_typed(SoftmaxKind kind, T* dx, const T* dy, const T* y, int64_t outer,
                            int64_t r, int64_t inner) {
  const bool log = kind == SoftmaxKind::log_softmax;
  if (inner == 1) {
    for_rows(outer, r, [&](int64_t o) {
      const T* g = dy + o * r;
      const T* yo = y + o * r;
      T* d = dx + o * r;
      if (log) {
        const T s = static_cast<T>(lane_sum(r, [&](int64_t i) { return g[i]; }));
        for (int64_t i = 0; i < r; ++i) d[i] = g[i] - vm::exp(yo[i]) * s;
      } else {
        const T s = static_cast<T>(
            lane_sum(r, [&](int64_t i) { return static_cast<double>(g[i]) * yo[i]; }));
        for (int64_t i = 0; i < r; ++i) d[i] = yo[i] * (g[i] - s);
      }
    });
    return;
  }
  for_column_blocks(outer, r, inner, [&](int64_t base, int64_t len) {
    double dot[kColumnBlock] = {};
    T s[kColumnBlock];
    for (int64_t i = 0; i < r; ++i) {
      const T* g = dy + base + i * inner;
      const T* yi = y + base + i * inner;
      if (log)
        for (int64_t j = 0; j < len; ++j) dot[j] += static_cast<double>(g[j]);
      else
        for (int64_t j = 0; j < len; ++j) dot[j] += static_cast<double>(g[j]) * yi[j];
    }
    for (int64_t j = 0; j < len; ++j) s[j] = static_cast<T>(dot[j]);
    for (int64_t i = 0; i < r; ++i) {
      const T* g = dy + base + i * inner;
      const T* yi = y + base + i * inner;
      T* d = dx + base + i * inner;
      if (log)
        for (int64_t j = 0; j < len; ++j) d[j] = g[j] - vm::exp(yi[j]) * s[j];
      else
        for (int64_t j = 0; j < len; ++j) d[j] = yi[j] * (g[j] - s[j]);
    }
  });
}

}  // namespace

void softmax(SoftmaxKind kind, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
             int64_t inner) {
  TCV_DISPATCH_FLOAT(
      in.dtype, kind == SoftmaxKind::softmax ? "softmax" : "log_softmax",
      softmax_typed<scalar_t>(kind, out.ptr<scalar_t>(), in.ptr<scalar_t>(), outer, r, inner));
}

void softmax_backward(SoftmaxKind kind, const KTensor& dx, const KTensor& dy, const KTensor& y,
                      int64_t outer, int64_t r, int64_t inner) {
  TCV_DISPATCH_FLOAT(y.dtype, kind == SoftmaxKind::softmax ? "softmax" : "log_softmax",
                     softmax_backward_typed<scalar_t>(kind, dx.ptr<scalar_t>(), dy.ptr<scalar_t>(),
                                                      y.ptr<scalar_t>(), outer, r, inner));
}

}  // namespace tcv::kernels::cpu
