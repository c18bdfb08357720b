#include "kernels/cpu/sort.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

template <typename T>
using key_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename K>
bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>) {
    return v != v;
  } else {
    return false;
  }
}

// Strict orders with NaN as the largest value.
template <typename K>
bool less_nan(K a, K b) {
  return (!is_nan(a) && is_nan(b)) || a < b;
}
template <typename K>
bool greater_nan(K a, K b) {
  return (is_nan(a) && !is_nan(b)) || a > b;
}

// Runs f(line_buffer, o, j) for every (outer, inner) line, in parallel; the buffer
// holds the line's (key, index) pairs in input order.
template <typename T, typename F>
void for_each_line(const KTensor& in, int64_t outer, int64_t n, int64_t inner, F&& f) {
  using K = key_t<T>;
  const T* src = in.ptr<T>();
  parallel_for(outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<std::pair<K, int64_t>> buf(static_cast<size_t>(n));
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t o = w / inner, j = w % inner;
                   const T* p = src + o * n * inner + j;
                   for (int64_t i = 0; i < n; ++i) buf[i] = {static_cast<K>(p[i * inner]), i};
                   f(buf, o, j);
                 }
               });
}

template <typename T>
void sort_typed(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
                int64_t n, int64_t inner, bool descending) {
  using P = std::pair<key_t<T>, int64_t>;
  T* vo = values.ptr<T>();
  int64_t* io = indices.ptr<int64_t>();
  for_each_line<T>(in, outer, n, inner, [&](std::vector<P>& buf, int64_t o, int64_t j) {
    if (descending) {
      std::stable_sort(buf.begin(), buf.end(),
                       [](const P& a, const P& b) { return greater_nan(a.first, b.first); });
    } else {
      std::stable_sort(buf.begin(), buf.end(),
                       [](const P& a, const P& b) { return less_nan(a.first, b.first); });
    }
    const int64_t base = o * n * inner + j;
    for (int64_t i = 0; i < n; ++i) {
      vo[base + i * inner] = static_cast<T>(buf[i].first);
      io[base + i * inner] = buf[i].second;
    }
  });
}

template <typename T>
void topk_typed(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
                int64_t n, int64_t inner, int64_t k, bool largest) {
  using P = std::pair<key_t<T>, int64_t>;
  T* vo = values.ptr<T>();
  int64_t* io = indices.ptr<int64_t>();
  for_each_line<T>(in, outer, n, inner, [&](std::vector<P>& buf, int64_t o, int64_t j) {
    // Index tie-break makes the (unstable) partial sort deterministic.
    auto mid = buf.begin() + k;
    if (largest) {
      std::partial_sort(buf.begin(), mid, buf.end(), [](const P& a, const P& b) {
        return greater_nan(a.first, b.first) ||
               (!greater_nan(b.first, a.first) && a.second < b.second);
      });
    } else {
      std::partial_sort(buf.begin(), mid, buf.end(), [](const P& a, const P& b) {
        return less_nan(a.first, b.first) || (!less_nan(b.first, a.first) && a.second < b.second);
      });
    }
    const int64_t base = o * k * inner + j;
    for (int64_t i = 0; i < k; ++i) {
      vo[base + i * inner] = static_cast<T>(buf[i].first);
      io[base + i * inner] = buf[i].second;
    }
  });
}

}  // namespace

void sort(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, bool descending) {
  if (outer * n * inner == 0) return;
  TCV_DISPATCH_ALL(in.dtype, "sort",
                   sort_typed<scalar_t>(values, indices, in, outer, n, inner, descending));
}

void topk(const KTensor& values, const KTensor& indices, const KTensor& in, int64_t outer,
          int64_t n, int64_t inner, int64_t k, bool largest) {
  if (outer * k * inner == 0) return;
  TCV_DISPATCH_ALL(in.dtype, "topk",
                   topk_typed<scalar_t>(values, indices, in, outer, n, inner, k, largest));
}

}  // namespace tcv::kernels::cpu
