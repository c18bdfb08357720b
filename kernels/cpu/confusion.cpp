#include "kernels/cpu/confusion.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/exp_sum.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {

namespace {

// One thread's counts and the first bad position it met.
struct Local {
  std::vector<int64_t> counts;
  int64_t bad = 0, first_bad = -1;
};

// Counts a (target, prediction) pair.
inline void count(Local& l, int64_t c, int64_t pos, int64_t t, int64_t p, int64_t ignore) {
  if (t == ignore) return;
  if (t < 0 || t >= c || p < 0 || p >= c) {
    if (l.bad++ == 0) l.first_bad = pos;
    return;
  }
  ++l.counts[static_cast<size_t>(t * c + p)];
}

template <typename T>
inline bool above(T v, T best) {
  return v > best || (v != v && best == best);  // NaN wins, as torch.argmax
}

}  // namespace

ConfusionCheck confusion_matrix_add(const KTensor& counts, const KTensor& pred,
                                    const KTensor& target, int64_t ignore) {
  TCV_CHECK(counts.dtype == DType::i64 && counts.ndim == 2 && counts.is_contiguous(),
            "[confusion_matrix] counts must be contiguous (C, C) i64");
  TCV_CHECK(target.dtype == DType::i64 && target.ndim == 2 && target.is_contiguous(),
            "[confusion_matrix] kernel expects contiguous (N, S) i64 targets");
  const int64_t c = counts.sizes[0], n = target.sizes[0], s = target.sizes[1];
  const bool logits = pred.ndim == 3;
  TCV_CHECK(pred.is_contiguous() && (logits ? pred.sizes[1] == c : pred.dtype == DType::i64),
            "[confusion_matrix] kernel expects contiguous (N, S) i64 labels or (N, C, S) logits");
  const int64_t* t = target.ptr<const int64_t>();
  const int64_t blocks = (s + kColumnBlock - 1) / kColumnBlock;
  const int threads =
      std::max(1, std::min<int>(omp_get_max_threads(),
                                static_cast<int>((n * s * (logits ? c : 1)) / kGrain + 1)));
  std::vector<Local> locals(static_cast<size_t>(threads));
  for (auto& l : locals) l.counts.assign(static_cast<size_t>(c * c), 0);
  // Work items are (image, block of kColumnBlock positions), split statically
  // so that every thread's positions, and its first bad one, come in order.
  const int64_t items = n * blocks;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int id = omp_get_thread_num(), nt = omp_get_num_threads();
    Local& l = locals[static_cast<size_t>(id)];
    const int64_t per = (items + nt - 1) / nt;
    const int64_t lo = id * per, hi = std::min(items, lo + per);
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t img = w / blocks, j0 = (w % blocks) * kColumnBlock;
      const int64_t len = std::min(kColumnBlock, s - j0);
      const int64_t p0 = img * s + j0;
      if (!logits) {
        const int64_t* pp = pred.ptr<const int64_t>();
        for (int64_t j = 0; j < len; ++j) count(l, c, p0 + j, t[p0 + j], pp[p0 + j], ignore);
        continue;
      }
      int64_t best_idx[kColumnBlock];
      TCV_DISPATCH_FLOAT(pred.dtype, "confusion_matrix", {
        // The argmax over C of a block of positions, classes s apart: the inner
        // loop runs over contiguous positions.
        const scalar_t* x = pred.ptr<const scalar_t>() + img * c * s + j0;
        scalar_t best[kColumnBlock];
        for (int64_t j = 0; j < len; ++j) best[j] = x[j], best_idx[j] = 0;
        for (int64_t k = 1; k < c; ++k) {
          const scalar_t* xk = x + k * s;
          for (int64_t j = 0; j < len; ++j)
            if (above(xk[j], best[j])) best[j] = xk[j], best_idx[j] = k;
        }
      });
      for (int64_t j = 0; j < len; ++j) count(l, c, p0 + j, t[p0 + j], best_idx[j], ignore);
    }
  }
  ConfusionCheck check;
  int64_t* out = counts.ptr<int64_t>();
  for (const Local& l : locals) {
    for (int64_t i = 0; i < c * c; ++i) out[i] += l.counts[static_cast<size_t>(i)];
    if (l.bad > 0 && check.first_bad < 0) check.first_bad = l.first_bad;  // threads in order
    check.bad += l.bad;
  }
  return check;
}

}  // namespace tcv::kernels::cpu
