#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

// Rows along r are strided by `inner`; with inner > 1 a block of neighbouring
// columns is processed together so the inner loops run over contiguous memory.
constexpr int64_t kBlock = 64;

template <typename T>
void softmax_typed(SoftmaxKind kind, T* out, const T* in, int64_t outer, int64_t r, int64_t inner) {
  const bool log = kind == SoftmaxKind::log_softmax;
  const int64_t nblocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(r * std::min(inner, kBlock), 1));
  parallel_for(outer * nblocks, grain, [&](int64_t b, int64_t e) {
    T mx[kBlock];
    double sum[kBlock];
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / nblocks, j0 = (w % nblocks) * kBlock;
      const int64_t len = std::min(kBlock, inner - j0);
      const T* x = in + o * r * inner + j0;
      T* y = out + o * r * inner + j0;
      for (int64_t j = 0; j < len; ++j) {
        mx[j] = -std::numeric_limits<T>::infinity();
        sum[j] = 0;
      }
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) mx[j] = std::max(mx[j], x[i * inner + j]);
      // A row of only -inf gives NaN (inf - inf), as in torch.
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const T ex = std::exp(x[i * inner + j] - mx[j]);
          if (!log) y[i * inner + j] = ex;
          sum[j] += static_cast<double>(ex);
        }
      if (log) {
        for (int64_t j = 0; j < len; ++j) mx[j] += static_cast<T>(std::log(sum[j]));
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < len; ++j) y[i * inner + j] = x[i * inner + j] - mx[j];
      } else {
        T inv[kBlock];
        for (int64_t j = 0; j < len; ++j) inv[j] = static_cast<T>(1.0 / sum[j]);
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < len; ++j) y[i * inner + j] *= inv[j];
      }
    }
  });
}

template <typename T>
void softmax_backward_typed(SoftmaxKind kind, T* dx, const T* dy, const T* y, int64_t outer,
                            int64_t r, int64_t inner) {
  const bool log = kind == SoftmaxKind::log_softmax;
  const int64_t nblocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(r * std::min(inner, kBlock), 1));
  parallel_for(outer * nblocks, grain, [&](int64_t b, int64_t e) {
    double dot[kBlock];
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / nblocks, j0 = (w % nblocks) * kBlock;
      const int64_t len = std::min(kBlock, inner - j0);
      const int64_t base = o * r * inner + j0;
      for (int64_t j = 0; j < len; ++j) dot[j] = 0;
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const int64_t p = base + i * inner + j;
          dot[j] += log ? static_cast<double>(dy[p]) : static_cast<double>(dy[p]) * y[p];
        }
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const int64_t p = base + i * inner + j;
          const T s = static_cast<T>(dot[j]);
          dx[p] = log ? dy[p] - std::exp(y[p]) * s : y[p] * (dy[p] - s);
        }
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
