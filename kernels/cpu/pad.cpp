#include "kernels/cpu/pad.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {
namespace {

// For each dim, the source coordinate every output coordinate reads (-1: the
// constant value).
std::vector<std::vector<int64_t>> source_maps(PadMode mode, const KTensor& out, const KTensor& in,
                                              const int64_t* before) {
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(out.ndim));
  for (int d = 0; d < out.ndim; ++d) {
    const int64_t n = in.sizes[d];
    auto& m = maps[d];
    m.resize(static_cast<size_t>(out.sizes[d]));
    for (int64_t c = 0; c < out.sizes[d]; ++c) {
      int64_t s = c - before[d];
      if (s < 0 || s >= n) {
        switch (mode) {
          case PadMode::constant:
            s = -1;
            break;
          case PadMode::reflect:
            if (s < 0) s = -s;
            if (s >= n) s = 2 * (n - 1) - s;
            break;
          case PadMode::replicate:
            s = std::clamp<int64_t>(s, 0, n - 1);
            break;
        }
      }
      m[c] = s;
    }
  }
  return maps;
}

// The output columns [lo, hi) that read input column c - before: the interior.
std::pair<int64_t, int64_t> interior(int64_t out_w, int64_t in_w, int64_t before) {
  const int64_t lo = std::clamp<int64_t>(before, 0, out_w);
  const int64_t hi = std::clamp<int64_t>(before + in_w, lo, out_w);
  return {lo, hi};
}

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
void pad_typed(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before,
               double value) {
  const auto maps = source_maps(mode, out, in, before);
  const int nd = out.ndim;
  const int64_t w = out.sizes[nd - 1];
  const int64_t rows = out.numel() / std::max<int64_t>(w, 1);
  const T v = static_cast<T>(static_cast<acc_t<T>>(value));
  const T* src = in.ptr<T>();
  T* dst = out.ptr<T>();
  const int64_t* last = maps[nd - 1].data();
  // Columns [lo, hi) of a row copy the input row straight; only the borders map.
  const auto cols = interior(w, in.sizes[nd - 1], before[nd - 1]);
  const int64_t lo = cols.first, hi = cols.second;  // clang < 16 cannot capture bindings
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(w, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   // Unravel the row into its source offset; any constant coordinate fills the row.
                   int64_t rem = r, off = 0;
                   bool fill = false;
                   for (int d = nd - 2; d >= 0; --d) {
                     const int64_t c = rem % out.sizes[d];
                     rem /= out.sizes[d];
                     const int64_t s = maps[d][c];
                     if (s < 0) fill = true;
                     off += s * in.strides[d];
                   }
                   T* o = dst + r * w;
                   if (fill) {
                     std::fill(o, o + w, v);
                     continue;
                   }
                   const T* i = src + off;
                   for (int64_t j = 0; j < lo; ++j) o[j] = last[j] < 0 ? v : i[last[j]];
                   std::copy(i + lo - before[nd - 1], i + hi - before[nd - 1], o + lo);
                   for (int64_t j = hi; j < w; ++j) o[j] = last[j] < 0 ? v : i[last[j]];
                 }
               });
}

template <typename T>
void pad_backward_typed(PadMode mode, const KTensor& dx, const KTensor& dy, const int64_t* before) {
  using A = acc_t<T>;
  const auto maps = source_maps(mode, dy, dx, before);
  const int nd = dy.ndim;
  // Parallel over leading unpadded dims (e.g. N·C planes): reflect and replicate
  // fold several outputs onto one input only within a plane.
  int lead = 0;
  while (lead < nd - 1 && before[lead] == 0 && dx.sizes[lead] == dy.sizes[lead]) ++lead;
  int64_t planes = 1, dx_plane = 1, dy_plane = 1;
  for (int d = 0; d < lead; ++d) planes *= dy.sizes[d];
  for (int d = lead; d < nd; ++d) {
    dx_plane *= dx.sizes[d];
    dy_plane *= dy.sizes[d];
  }
  T* pdx = dx.ptr<T>();
  const T* pdy = dy.ptr<T>();
  std::fill(pdx, pdx + dx.numel(), static_cast<T>(0.0f));
  // Row by row: a row of dy adds into the dx row its coordinates map to, the
  // interior columns as one vectorized loop, the borders through the map.
  const int64_t w = dy.sizes[nd - 1];
  const int64_t* last = maps[nd - 1].data();
  const auto cols = interior(w, dx.sizes[nd - 1], before[nd - 1]);
  const int64_t lo = cols.first, hi = cols.second;  // clang < 16 cannot capture bindings
  const int64_t shift = before[nd - 1];
  const int64_t rows = dy_plane / std::max<int64_t>(w, 1);
  parallel_for(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(dy_plane, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<int64_t> c(static_cast<size_t>(nd), 0);
                 for (int64_t p = b; p < e; ++p) {
                   T* gx = pdx + p * dx_plane;
                   const T* gy = pdy + p * dy_plane;
                   std::fill(c.begin(), c.end(), 0);
                   for (int64_t row = 0; row < rows; ++row, gy += w) {
                     int64_t off = 0;
                     bool skip = false;
                     for (int d = lead; d < nd - 1; ++d) {
                       const int64_t s = maps[d][c[d]];
                       if (s < 0) skip = true;
                       off += s * dx.strides[d];
                     }
                     if (!skip) {
                       T* g = gx + off;
                       auto add = [&](int64_t j, int64_t to) {
                         g[to] = static_cast<T>(static_cast<A>(g[to]) + static_cast<A>(gy[j]));
                       };
                       for (int64_t j = 0; j < lo; ++j)
                         if (last[j] >= 0) add(j, last[j]);
                       for (int64_t j = lo; j < hi; ++j) add(j, j - shift);
                       for (int64_t j = hi; j < w; ++j)
                         if (last[j] >= 0) add(j, last[j]);
                     }
                     for (int d = nd - 2; d >= lead; --d) {
                       if (++c[d] < dy.sizes[d]) break;
                       c[d] = 0;
                     }
                   }
                 }
               });
}

}  // namespace

void pad(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before, double value) {
  if (out.numel() == 0) return;
  TCV_DISPATCH_ALL(in.dtype, "pad", pad_typed<scalar_t>(mode, out, in, before, value));
}

void pad_backward(PadMode mode, const KTensor& dx, const KTensor& dy, const int64_t* before) {
  if (dx.numel() == 0) return;
  switch (dy.dtype) {
    TCV_DTYPE_CASE(f32, float, pad_backward_typed<scalar_t>(mode, dx, dy, before))
    TCV_DTYPE_CASE(f64, double, pad_backward_typed<scalar_t>(mode, dx, dy, before))
    TCV_DTYPE_CASE(f16, Half, pad_backward_typed<scalar_t>(mode, dx, dy, before))
    TCV_DTYPE_CASE(bf16, BFloat16, pad_backward_typed<scalar_t>(mode, dx, dy, before))
    default:
      TCV_THROW("[pad] backward not implemented for dtype ", dtype_name(dy.dtype));
  }
}

}  // namespace tcv::kernels::cpu
