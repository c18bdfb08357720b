// Softmax statistics along one dim: the maximum and Σ exp(x − max), shared by
// softmax, log-softmax and cross-entropy. The dim is either one contiguous row
// (the loops run along it) or r rows `stride` apart, handled a block of
// neighbouring columns at a time so the loops run over contiguous memory.
// Both shapes of loop vectorize, exp included (vmath.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/vmath.h"

namespace tcv::kernels::cpu {

/// Columns handled together when rows are strided.
constexpr int64_t kColumnBlock = 64;

/// Σ f(i) for i < n, accumulated in double over 8 lanes so the loop vectorizes.
template <typename F>
double lane_sum(int64_t n, F&& f) {
  constexpr int64_t kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(f(i + k));
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(f(i));
  for (int64_t k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

/// Largest of n contiguous values (-inf for n = 0), over 16 lanes.
template <typename T>
T row_max(const T* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  T acc[kLanes];
  std::fill_n(acc, kLanes, -std::numeric_limits<T>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] = std::max(acc[k], x[i + k]);
  T m = -std::numeric_limits<T>::infinity();
  for (; i < n; ++i) m = std::max(m, x[i]);
  for (int64_t k = 0; k < kLanes; ++k) m = std::max(m, acc[k]);
  return m;
}

/// Σ exp(x − mx) over one contiguous row; with `ex`, the exps are also stored
/// there. A row of only -inf gives NaN (inf − inf), as in torch.
template <typename T>
double row_exp_sum(const T* x, int64_t n, T mx, T* ex) {
  if (!ex) return lane_sum(n, [&](int64_t i) { return vm::exp(x[i] - mx); });
  for (int64_t i = 0; i < n; ++i) ex[i] = vm::exp(x[i] - mx);
  return lane_sum(n, [&](int64_t i) { return ex[i]; });
}

/// For len <= kColumnBlock columns j of r rows (x[i * stride + j]): mx[j] = the
/// column's maximum, sum[j] = Σ exp(x − mx[j]); with `ex`, the exps are also
/// stored at the same offsets from ex.
template <typename T>
void column_exp_sums(const T* x, int64_t r, int64_t stride, int64_t len, T* mx, double* sum,
                     T* ex) {
  for (int64_t j = 0; j < len; ++j) {
    mx[j] = -std::numeric_limits<T>::infinity();
    sum[j] = 0;
  }
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < len; ++j) mx[j] = std::max(mx[j], x[i * stride + j]);
  for (int64_t i = 0; i < r; ++i) {
    const T* xi = x + i * stride;
    if (ex) {
      T* ei = ex + i * stride;
      for (int64_t j = 0; j < len; ++j) {
        ei[j] = vm::exp(xi[j] - mx[j]);
        sum[j] += static_cast<double>(ei[j]);
      }
    } else {
      for (int64_t j = 0; j < len; ++j) sum[j] += static_cast<double>(vm::exp(xi[j] - mx[j]));
    }
  }
}

}  // namespace tcv::kernels::cpu
