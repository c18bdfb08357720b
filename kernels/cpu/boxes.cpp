#include "kernels/cpu/boxes.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/nms_threshold.h"

namespace tcv::kernels::cpu {
namespace {

// One kept box against a row of m boxes: supp[j] |= IoU > thr, with the
// operations and operand order of torchvision's CPU kernel (std::max(ix1,
// x1[j]) is `ix1 < x1[j] ? x1[j] : ix1`), so every overlap is the same T value.
// Setting the flag of a box visited earlier changes nothing, so the row needs
// no mask and vectorizes.
template <typename T>
[[gnu::always_inline]] inline void suppress_row(T ix1, T iy1, T ix2, T iy2, T iarea,
                                                const T* __restrict x1, const T* __restrict y1,
                                                const T* __restrict x2, const T* __restrict y2,
                                                const T* __restrict area, uint8_t* __restrict supp,
                                                int64_t m, T thr) {
  for (int64_t j = 0; j < m; ++j) {
    const T xx1 = ix1 < x1[j] ? x1[j] : ix1;
    const T yy1 = iy1 < y1[j] ? y1[j] : iy1;
    const T xx2 = x2[j] < ix2 ? x2[j] : ix2;
    const T yy2 = y2[j] < iy2 ? y2[j] : iy2;
    const T dw = xx2 - xx1, dh = yy2 - yy1;
    const T w = T(0) < dw ? dw : T(0);
    const T h = T(0) < dh ? dh : T(0);
    const T inter = w * h;
    const T ovr = inter / (iarea + area[j] - inter);
    supp[j] |= static_cast<uint8_t>(ovr > thr);
  }
}

/// Unsigned keys whose integer order is the float order: -0.0 equals 0.0 and
/// every NaN is one key above all numbers.
inline uint32_t order_key(float f) {
  if (f != f) return 0xffffffffu;
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
inline uint64_t order_key(double f) {
  if (f != f) return ~uint64_t{0};
  if (f == 0.0) f = 0.0;
  const uint64_t u = std::bit_cast<uint64_t>(f);
  return (u & (uint64_t{1} << 63)) ? ~u : (u | (uint64_t{1} << 63));
}

/// Stable LSD radix sort of (key, value) pairs by key, 11 bits a pass: a few
/// linear passes instead of a comparison sort's n log n comparisons.
template <typename K>
void radix_sort(std::vector<K>& keys, std::vector<int32_t>& vals) {
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  const size_t n = keys.size();
  std::vector<K> k2(n);
  std::vector<int32_t> v2(n);
  std::vector<size_t> count(kBuckets);
  for (int shift = 0; shift < static_cast<int>(8 * sizeof(K)); shift += kBits) {
    std::fill(count.begin(), count.end(), size_t{0});
    for (size_t i = 0; i < n; ++i) ++count[(keys[i] >> shift) & (kBuckets - 1)];
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;  // one bucket: nothing moves
    size_t sum = 0;
    for (size_t& c : count) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) {
      const size_t d = count[(keys[i] >> shift) & (kBuckets - 1)]++;
      k2[d] = keys[i];
      v2[d] = vals[i];
    }
    keys.swap(k2);
    vals.swap(v2);
  }
}

template <typename T>
using key_of = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

/// Positions 0..n-1 ordered by key(i) ascending, ties in index order.
template <typename K, typename F>
std::vector<int32_t> order_by(int64_t n, F&& key) {
  std::vector<K> keys(static_cast<size_t>(n));
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = key(i);
    pos[i] = static_cast<int32_t>(i);
  }
  if (n > 1) radix_sort(keys, pos);
  return pos;
}

/// Boxes in visiting (score) order, one array per coordinate.
template <typename T>
struct Sorted {
  std::vector<T> x1, y1, x2, y2, area;
  std::vector<int32_t> index;  // position -> input row
};

template <typename T>
Sorted<T> sort_by_score(const T* b, const T* s, int64_t n) {
  // torchvision's stable descending sort: NaN first, ties in index order (the
  // complement of the ascending key reverses the order and keeps LSD stability).
  Sorted<T> o;
  o.index = order_by<key_of<T>>(n, [s](int64_t i) { return ~order_key(s[i]); });
  for (auto* v : {&o.x1, &o.y1, &o.x2, &o.y2, &o.area}) v->resize(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    const T* r = b + 4 * o.index[p];
    o.x1[p] = r[0];
    o.y1[p] = r[1];
    o.x2[p] = r[2];
    o.y2[p] = r[3];
    o.area[p] = (r[2] - r[0]) * (r[3] - r[1]);
  }
  return o;
}

// Every kept box against all boxes after it: torchvision's loop, vectorized.
template <typename T>
int64_t nms_rows(const Sorted<T>& s, int64_t n, T thr, int64_t* keep) {
  std::vector<uint8_t> supp(static_cast<size_t>(n), 0);
  int64_t k = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (supp[p]) continue;
    keep[k++] = s.index[p];
    const int64_t q = p + 1;
    suppress_row(s.x1[p], s.y1[p], s.x2[p], s.y2[p], s.area[p], s.x1.data() + q, s.y1.data() + q,
                 s.x2.data() + q, s.y2.data() + q, s.area.data() + q, supp.data() + q, n - q, thr);
  }
  return k;
}

constexpr int64_t kLeaf = 64;

// The same keep list, comparing each kept box only with the leaves its box can
// overlap. Boxes are packed into leaves of kLeaf by sort-tile-recursive: sorted
// by x1 into vertical slabs, each slab sorted by y1 and cut into leaves, so a
// leaf covers a small region. A leaf whose bounding box lies wholly beside the
// kept box (x1 >= its x2, x2 <= its x1, likewise in y) holds no box with a
// positive intersection: each such pair has intersection 0 and overlap 0 or
// NaN, never above a threshold >= 0. Valid for finite coordinates only.
template <typename T>
int64_t nms_leaves(const Sorted<T>& s, int64_t n, T thr, int64_t* keep) {
  const int64_t leaves = (n + kLeaf - 1) / kLeaf;
  const int64_t slabs =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(leaves)))));
  const int64_t per_slab = (leaves + slabs - 1) / slabs * kLeaf;  // boxes per slab
  // Positions by x1, then each slab's by y1 (finite coordinates here).
  std::vector<int32_t> pos = order_by<key_of<T>>(n, [&s](int64_t p) { return order_key(s.x1[p]); });
  for (int64_t b = 0; b < n; b += per_slab) {
    const int64_t e = std::min(n, b + per_slab);
    const std::vector<int32_t> in_slab =
        order_by<key_of<T>>(e - b, [&](int64_t i) { return order_key(s.y1[pos[b + i]]); });
    std::vector<int32_t> slab(pos.begin() + b, pos.begin() + e);
    for (int64_t i = 0; i < e - b; ++i) pos[b + i] = slab[in_slab[i]];
  }

  // Leaf-major arrays; padding slots hold an empty box at 0 and are never read back.
  const int64_t slots = leaves * kLeaf;
  std::vector<T> x1(slots, T(0)), y1(slots, T(0)), x2(slots, T(0)), y2(slots, T(0)),
      area(slots, T(0));
  std::vector<int64_t> slot_of(static_cast<size_t>(n));
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> lx1(leaves, inf), ly1(leaves, inf), lx2(leaves, -inf), ly2(leaves, -inf);
  for (int64_t q = 0; q < n; ++q) {
    const int32_t p = pos[q];
    const int64_t l = q / kLeaf;
    x1[q] = s.x1[p];
    y1[q] = s.y1[p];
    x2[q] = s.x2[p];
    y2[q] = s.y2[p];
    area[q] = s.area[p];
    slot_of[p] = q;
    lx1[l] = std::min(lx1[l], x1[q]);
    ly1[l] = std::min(ly1[l], y1[q]);
    lx2[l] = std::max(lx2[l], x2[q]);
    ly2[l] = std::max(ly2[l], y2[q]);
  }
  // Slab bounds, so most leaves are passed over a slab at a time.
  const int64_t leaves_per_slab = per_slab / kLeaf;
  std::vector<T> sx1(slabs, inf), sy1(slabs, inf), sx2(slabs, -inf), sy2(slabs, -inf);
  for (int64_t l = 0; l < leaves; ++l) {
    const int64_t b = l / leaves_per_slab;
    sx1[b] = std::min(sx1[b], lx1[l]);
    sy1[b] = std::min(sy1[b], ly1[l]);
    sx2[b] = std::max(sx2[b], lx2[l]);
    sy2[b] = std::max(sy2[b], ly2[l]);
  }

  std::vector<uint8_t> supp(static_cast<size_t>(slots), 0);
  int64_t k = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (supp[slot_of[p]]) continue;
    keep[k++] = s.index[p];
    const T ix1 = s.x1[p], iy1 = s.y1[p], ix2 = s.x2[p], iy2 = s.y2[p], iarea = s.area[p];
    for (int64_t b = 0; b < slabs; ++b) {
      if (sx1[b] >= ix2 || sx2[b] <= ix1 || sy1[b] >= iy2 || sy2[b] <= iy1) continue;
      const int64_t l_end = std::min(leaves, (b + 1) * leaves_per_slab);
      for (int64_t l = b * leaves_per_slab; l < l_end; ++l) {
        if (lx1[l] >= ix2 || lx2[l] <= ix1 || ly1[l] >= iy2 || ly2[l] <= iy1) continue;
        const int64_t o = l * kLeaf;
        suppress_row(ix1, iy1, ix2, iy2, iarea, x1.data() + o, y1.data() + o, x2.data() + o,
                     y2.data() + o, area.data() + o, supp.data() + o, kLeaf, thr);
      }
    }
  }
  return k;
}

template <typename T>
int64_t nms_typed(const KTensor& keep, const KTensor& boxes, const KTensor& scores, double thr) {
  const int64_t n = boxes.sizes[0];
  const T* b = boxes.ptr<const T>();
  const Sorted<T> s = sort_by_score(b, scores.ptr<const T>(), n);
  bool finite = true;
  for (int64_t i = 0; i < 4 * n; ++i) finite &= std::isfinite(b[i]);
  const T t = threshold_in<T>(thr);
  int64_t* out = keep.ptr<int64_t>();
  // The leaves pay off from a few hundred boxes; below that, and for inputs
  // where a zero intersection can still exceed the threshold (a negative
  // threshold) or where coordinates are not finite, every pair is compared.
  if (thr >= 0.0 && finite && n > 4 * kLeaf) return nms_leaves(s, n, t, out);
  return nms_rows(s, n, t, out);
}

template <typename T>
void box_iou_typed(const KTensor& out, const KTensor& a, const KTensor& b) {
  const int64_t n = a.sizes[0], m = b.sizes[0];
  const T* pa = a.ptr<const T>();
  const T* pb = b.ptr<const T>();
  T* po = out.ptr<T>();
  std::vector<T> bx1(m), by1(m), bx2(m), by2(m), barea(m);
  for (int64_t j = 0; j < m; ++j) {
    const T* r = pb + 4 * j;
    bx1[j] = r[0];
    by1[j] = r[1];
    bx2[j] = r[2];
    by2[j] = r[3];
    barea[j] = (r[2] - r[0]) * (r[3] - r[1]);
  }
  parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(m, 1)),
               [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i) {
                   const T* r = pa + 4 * i;
                   const T ax1 = r[0], ay1 = r[1], ax2 = r[2], ay2 = r[3];
                   const T aarea = (ax2 - ax1) * (ay2 - ay1);
                   T* o = po + i * m;
                   // torch.max/min/clamp(min=0) on finite values, then inter / (a1 + a2 − inter).
                   for (int64_t j = 0; j < m; ++j) {
                     const T ltx = ax1 > bx1[j] ? ax1 : bx1[j];
                     const T lty = ay1 > by1[j] ? ay1 : by1[j];
                     const T rbx = ax2 < bx2[j] ? ax2 : bx2[j];
                     const T rby = ay2 < by2[j] ? ay2 : by2[j];
                     const T dw = rbx - ltx, dh = rby - lty;
                     const T w = dw > T(0) ? dw : T(0);
                     const T h = dh > T(0) ? dh : T(0);
                     const T inter = w * h;
                     o[j] = inter / (aarea + barea[j] - inter);
                   }
                 }
               });
}

// First index of the largest value, NaN counting as the largest (torch.max).
template <typename T>
bool beats(T v, T best) {
  return (std::isnan(v) && !std::isnan(best)) || v > best;
}

template <typename T>
void ssd_match_typed(const KTensor& matches, const KTensor& iou, double threshold) {
  const int64_t m = iou.sizes[0], a = iou.sizes[1];
  const T* q = iou.ptr<const T>();
  int64_t* out = matches.ptr<int64_t>();
  std::vector<T> best(q, q + a);  // row 0
  std::fill(out, out + a, int64_t{0});
  for (int64_t g = 1; g < m; ++g) {
    const T* row = q + g * a;
    for (int64_t j = 0; j < a; ++j)
      if (beats(row[j], best[j])) {
        best[j] = row[j];
        out[j] = g;
      }
  }
  for (int64_t j = 0; j < a; ++j)
    if (static_cast<double>(best[j]) < threshold) out[j] = -1;
  for (int64_t g = 0; g < m; ++g) {
    const T* row = q + g * a;
    int64_t arg = 0;
    for (int64_t j = 1; j < a; ++j)
      if (beats(row[j], row[arg])) arg = j;
    out[arg] = g;
  }
}

// Work items: (outer, block of inner positions), each reducing over c.
constexpr int64_t kInnerBlock = 256;

template <typename F>
void for_norm_blocks(int64_t outer, int64_t c, int64_t inner, F&& f) {
  const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
  const int64_t per_item = c * std::min(inner, kInnerBlock);
  parallel_for(outer * blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(per_item, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   const int64_t o = w / blocks, s0 = (w % blocks) * kInnerBlock;
                   f(o, s0, std::min(inner, s0 + kInnerBlock) - s0);
                 }
               });
}

template <typename T>
void l2_normalize_typed(const KTensor& y, const KTensor& norm, const KTensor& x, int64_t outer,
                        int64_t c, int64_t inner, double eps) {
  const T* px = x.ptr<const T>();
  T* py = y.ptr<T>();
  T* pn = norm.ptr<T>();
  const T e = static_cast<T>(eps);
  for_norm_blocks(outer, c, inner, [&](int64_t o, int64_t s0, int64_t len) {
    T ss[kInnerBlock];
    std::fill(ss, ss + len, T(0));
    const T* xo = px + o * c * inner + s0;
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < len; ++s) ss[s] += xo[k * inner + s] * xo[k * inner + s];
    T d[kInnerBlock];
    for (int64_t s = 0; s < len; ++s) {
      const T nrm = std::sqrt(ss[s]);
      pn[o * inner + s0 + s] = nrm;
      d[s] = nrm > e ? nrm : e;
    }
    T* yo = py + o * c * inner + s0;
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < len; ++s) yo[k * inner + s] = xo[k * inner + s] / d[s];
  });
}

template <typename T>
void l2_normalize_backward_typed(const KTensor& dx, const KTensor& dy, const KTensor& y,
                                 const KTensor& norm, int64_t outer, int64_t c, int64_t inner,
                                 double eps) {
  const T* pg = dy.ptr<const T>();
  const T* py = y.ptr<const T>();
  const T* pn = norm.ptr<const T>();
  T* pd = dx.ptr<T>();
  const T e = static_cast<T>(eps);
  for_norm_blocks(outer, c, inner, [&](int64_t o, int64_t s0, int64_t len) {
    const int64_t base = o * c * inner + s0;
    T dot[kInnerBlock], inv[kInnerBlock], keep[kInnerBlock];
    std::fill(dot, dot + len, T(0));
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < len; ++s)
        dot[s] += pg[base + k * inner + s] * py[base + k * inner + s];
    for (int64_t s = 0; s < len; ++s) {
      const T nrm = pn[o * inner + s0 + s];
      // Below eps the denominator is the constant eps: the norm gets no gradient.
      const bool active = nrm >= e;
      inv[s] = T(1) / (active ? nrm : e);
      keep[s] = active ? dot[s] : T(0);
    }
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < len; ++s) {
        const int64_t i = base + k * inner + s;
        pd[i] = (pg[i] - py[i] * keep[s]) * inv[s];
      }
  });
}

}  // namespace

void box_iou(const KTensor& out, const KTensor& a, const KTensor& b) {
  if (a.sizes[0] * b.sizes[0] == 0) return;
  TCV_DISPATCH_FLOAT(a.dtype, "box_iou", box_iou_typed<scalar_t>(out, a, b));
}

void nms(const KTensor& keep, const KTensor& boxes, const KTensor& scores, double iou_threshold,
         int64_t* kept) {
  *kept = 0;
  if (boxes.sizes[0] == 0) return;
  TCV_DISPATCH_FLOAT(boxes.dtype, "nms",
                     *kept = nms_typed<scalar_t>(keep, boxes, scores, iou_threshold));
}

void ssd_match(const KTensor& matches, const KTensor& iou, double threshold) {
  if (iou.sizes[1] == 0) return;
  if (iou.sizes[0] == 0) {
    std::fill(matches.ptr<int64_t>(), matches.ptr<int64_t>() + iou.sizes[1], int64_t{-1});
    return;
  }
  TCV_DISPATCH_FLOAT(iou.dtype, "ssd_match", ssd_match_typed<scalar_t>(matches, iou, threshold));
}

void l2_normalize(const KTensor& y, const KTensor& norm, const KTensor& x, int64_t outer, int64_t c,
                  int64_t inner, double eps) {
  if (outer * c * inner == 0) {
    if (outer * inner > 0)
      TCV_DISPATCH_FLOAT(
          norm.dtype, "l2_normalize",
          std::fill(norm.ptr<scalar_t>(), norm.ptr<scalar_t>() + outer * inner, scalar_t(0)));
    return;
  }
  TCV_DISPATCH_FLOAT(x.dtype, "l2_normalize",
                     l2_normalize_typed<scalar_t>(y, norm, x, outer, c, inner, eps));
}

void l2_normalize_backward(const KTensor& dx, const KTensor& dy, const KTensor& y,
                           const KTensor& norm, int64_t outer, int64_t c, int64_t inner,
                           double eps) {
  if (outer * c * inner == 0) return;
  TCV_DISPATCH_FLOAT(dx.dtype, "l2_normalize_backward",
                     l2_normalize_backward_typed<scalar_t>(dx, dy, y, norm, outer, c, inner, eps));
}

}  // namespace tcv::kernels::cpu
