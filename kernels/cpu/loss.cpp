#include "kernels/cpu/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/exp_sum.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vmath.h"

namespace tcv::kernels::cpu {
namespace {

// Geometry of a class loss: logits (N, C, S), targets and per-position values (N, S).
struct ClassGeom {
  int64_t n, c, s;
  int64_t positions() const { return n * s; }
  // Offset of class 0 at position p; classes are s apart.
  int64_t base(int64_t p) const { return (p / s) * c * s + p % s; }
};

ClassGeom class_geom(const KTensor& x) {
  return {x.sizes[0], x.sizes[1], x.sizes[2]};
}

// A per-position (N, S) operand that may be broadcast.
template <typename T>
struct PosView {
  const T* p;
  int64_t sn, ss, s;
  PosView(const KTensor& t, int64_t s_)
      : p(t.ptr<const T>()), sn(t.strides[0]), ss(t.strides[1]), s(s_) {}
  T operator()(int64_t pos) const { return p[(pos / s) * sn + (pos % s) * ss]; }
};

template <typename T>
T weight_of(const T* w, int64_t c) {
  return w ? w[c] : T(1);
}

// Cross-entropy walks the logits as log-softmax does (exp_sum.h): with s = 1 a
// position's classes are one contiguous row; with s > 1 they are s apart and a
// block of neighbouring positions of one image is handled together.
template <typename Row, typename Block>
void for_class_rows(ClassGeom g, Row&& row, Block&& block) {
  if (g.s == 1) {
    parallel_for(g.n, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.c, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t p = b; p < e; ++p) row(p);
                 });
    return;
  }
  const int64_t nblocks = (g.s + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(g.c * std::min(g.s, kColumnBlock), 1));
  parallel_for(g.n * nblocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t img = w / nblocks, j0 = (w % nblocks) * kColumnBlock;
      // First position of the block, and the block's length.
      block(img * g.s + j0, std::min(kColumnBlock, g.s - j0));
    }
  });
}

template <typename T>
void ce_forward(T* nll, T* smooth, T* lse, const T* x, const int64_t* t, const T* w, ClassGeom g,
                int64_t ignore) {
  // Σ_c w_c (l − x_c), the label-smoothing term, for classes `stride` apart.
  auto smooth_sum = [&](const T* xp, int64_t stride, T l) {
    return lane_sum(g.c, [&](int64_t c) {
      return static_cast<double>(weight_of(w, c)) * static_cast<double>(l - xp[c * stride]);
    });
  };
  auto finish = [&](int64_t p, const T* xp, int64_t stride, T l) {
    lse[p] = l;
    if (t[p] == ignore) {
      nll[p] = T(0);
      if (smooth) smooth[p] = T(0);
      return;
    }
    nll[p] = weight_of(w, t[p]) * (l - xp[t[p] * stride]);
  };
  for_class_rows(
      g,
      [&](int64_t p) {
        const T* xp = x + p * g.c;
        const T mx = row_max(xp, g.c);
        const T l = mx + static_cast<T>(std::log(row_exp_sum<T>(xp, g.c, mx, nullptr)));
        finish(p, xp, 1, l);
        if (smooth && t[p] != ignore) smooth[p] = static_cast<T>(smooth_sum(xp, 1, l));
      },
      [&](int64_t p0, int64_t len) {
        const T* xb = x + g.base(p0);
        T mx[kColumnBlock];
        double sum[kColumnBlock];
        column_exp_sums<T>(xb, g.c, g.s, len, mx, sum, nullptr);
        for (int64_t j = 0; j < len; ++j) {
          mx[j] += static_cast<T>(std::log(sum[j]));  // now the log-sum-exp
          finish(p0 + j, xb + j, g.s, mx[j]);
        }
        if (!smooth) return;
        double acc[kColumnBlock] = {};
        for (int64_t c = 0; c < g.c; ++c) {
          const double wc = static_cast<double>(weight_of(w, c));
          const T* xc = xb + c * g.s;
          for (int64_t j = 0; j < len; ++j) acc[j] += wc * static_cast<double>(mx[j] - xc[j]);
        }
        for (int64_t j = 0; j < len; ++j)
          if (t[p0 + j] != ignore) smooth[p0 + j] = static_cast<T>(acc[j]);
      });
}

template <typename T>
void ce_backward(T* dx, const T* x, const int64_t* t, const T* w, const T* lse, ClassGeom g,
                 int64_t ignore, PosView<T> grad, double scale_nll, double scale_smooth) {
  double wsum_d = static_cast<double>(g.c);
  if (w) {
    wsum_d = 0;
    for (int64_t c = 0; c < g.c; ++c) wsum_d += static_cast<double>(w[c]);
  }
  const T wsum = static_cast<T>(wsum_d);
  // dx_c = a (p_c − [c = t]) + b (p_c Σw − w_c), p_c = exp(x_c − lse); ignored
  // positions get exact zeros.
  auto coeffs = [&](int64_t p, T& a, T& b) {
    const double gv = static_cast<double>(grad(p));
    a = t[p] == ignore ? T(0)
                       : static_cast<T>(gv * scale_nll * static_cast<double>(weight_of(w, t[p])));
    b = t[p] == ignore ? T(0) : static_cast<T>(gv * scale_smooth);
  };
  for_class_rows(
      g,
      [&](int64_t p) {
        const T* xp = x + p * g.c;
        T* dp = dx + p * g.c;
        if (t[p] == ignore) {
          std::fill_n(dp, g.c, T(0));
          return;
        }
        T a, b;
        coeffs(p, a, b);
        const T l = lse[p];
        for (int64_t c = 0; c < g.c; ++c) dp[c] = vm::exp(xp[c] - l);
        if (b != T(0)) {
          for (int64_t c = 0; c < g.c; ++c)
            dp[c] = a * dp[c] + b * (dp[c] * wsum - weight_of(w, c));
        } else {
          for (int64_t c = 0; c < g.c; ++c) dp[c] *= a;
        }
        dp[t[p]] -= a;
      },
      [&](int64_t p0, int64_t len) {
        const int64_t off = g.base(p0);
        T a[kColumnBlock], b[kColumnBlock], l[kColumnBlock];
        int64_t tj[kColumnBlock];
        bool any_smooth = false;
        for (int64_t j = 0; j < len; ++j) {
          coeffs(p0 + j, a[j], b[j]);
          any_smooth |= b[j] != T(0);
          l[j] = lse[p0 + j];
          // Ignored positions never match a class.
          tj[j] = t[p0 + j] == ignore ? -1 : t[p0 + j];
        }
        for (int64_t c = 0; c < g.c; ++c) {
          const T* xc = x + off + c * g.s;
          T* dc = dx + off + c * g.s;
          const T wc = weight_of(w, c);
          if (any_smooth) {
            for (int64_t j = 0; j < len; ++j) {
              const T pc = vm::exp(xc[j] - l[j]);
              dc[j] = a[j] * (pc - T(tj[j] == c)) + b[j] * (pc * wsum - wc);
            }
          } else {
            for (int64_t j = 0; j < len; ++j)
              dc[j] = a[j] * (vm::exp(xc[j] - l[j]) - T(tj[j] == c));
          }
        }
        // Ignored positions: exact zeros even where the logits are not finite.
        for (int64_t j = 0; j < len; ++j)
          if (tj[j] < 0)
            for (int64_t c = 0; c < g.c; ++c) dx[off + c * g.s + j] = T(0);
      });
}

template <typename T>
void nll_fwd(T* out, const T* lp, const int64_t* t, const T* w, ClassGeom g, int64_t ignore) {
  parallel_for(g.positions(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p)
      out[p] = t[p] == ignore ? T(0) : -weight_of(w, t[p]) * lp[g.base(p) + t[p] * g.s];
  });
}

template <typename T>
void nll_bwd(T* dlp, const int64_t* t, const T* w, ClassGeom g, int64_t ignore, PosView<T> grad,
             double scale) {
  parallel_for(g.positions(), std::max<int64_t>(1, kGrain / std::max<int64_t>(g.c, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) {
                   T* dp = dlp + g.base(p);
                   for (int64_t c = 0; c < g.c; ++c) dp[c * g.s] = T(0);
                   if (t[p] != ignore)
                     dp[t[p] * g.s] = static_cast<T>(-static_cast<double>(weight_of(w, t[p])) *
                                                     static_cast<double>(grad(p)) * scale);
                 }
               });
}

template <typename T>
const T* opt_ptr(const KTensor* t) {
  return t ? t->ptr<const T>() : nullptr;
}

template <typename T>
void pointwise_typed(PointwiseLoss loss, const KTensor& out, const KTensor& x, const KTensor& y,
                     const KTensor* pw, double beta) {
  pointwise::visit_loss<T, VecMath>(loss, beta, [&](auto fn) {
    if (pw)
      map<T, T>(
          out, [fn](T a, T b, T w) { return fn(a, b, w); }, x, y, *pw);
    else
      map<T, T>(
          out, [fn](T a, T b) { return fn(a, b); }, x, y);
  });
}

// One map per loss and argument, so that no switch sits in the loop body.
template <typename T>
void pointwise_backward_typed(PointwiseLoss loss, LossArg arg, const KTensor& d, const KTensor& g,
                              const KTensor& x, const KTensor& y, const KTensor* pw, double beta) {
  pointwise::visit_loss_grad<T, VecMath>(loss, arg, beta, [&](auto fn) {
    if (pw)
      map<T, T>(
          d, [fn](T gv, T a, T b, T w) { return fn(gv, a, b, w); }, g, x, y, *pw);
    else
      map<T, T>(
          d, [fn](T gv, T a, T b) { return fn(gv, a, b, T(1)); }, g, x, y);
  });
}

}  // namespace

void class_targets(const KTensor& target, int64_t classes, int64_t ignore_index,
                   const KTensor* weight, ClassLossStats* stats) {
  const int64_t* t = target.ptr<const int64_t>();
  const int64_t n = target.numel();
  ClassLossStats st;
  // Serial: the weight sum does not depend on the thread count.
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    if (t[i] < 0 || t[i] >= classes) [[unlikely]] {
      *stats = {.out_of_bounds = true, .bad_target = t[i]};
      return;
    }
    ++st.count;
  }
  if (!weight) {
    st.weight_sum = static_cast<double>(st.count);
  } else {
    TCV_DISPATCH_FLOAT(weight->dtype, "class loss", {
      const scalar_t* w = weight->ptr<const scalar_t>();
      for (int64_t i = 0; i < n; ++i)
        if (t[i] != ignore_index) st.weight_sum += static_cast<double>(w[t[i]]);
    });
  }
  *stats = st;
}

void cross_entropy_forward(const KTensor& nll, const KTensor* smooth, const KTensor& lse,
                           const KTensor& logits, const KTensor& target, const KTensor* weight,
                           int64_t ignore_index) {
  const ClassGeom g = class_geom(logits);
  TCV_DISPATCH_FLOAT(logits.dtype, "cross_entropy",
                     ce_forward<scalar_t>(
                         nll.ptr<scalar_t>(), smooth ? smooth->ptr<scalar_t>() : nullptr,
                         lse.ptr<scalar_t>(), logits.ptr<const scalar_t>(),
                         target.ptr<const int64_t>(), opt_ptr<scalar_t>(weight), g, ignore_index));
}

void cross_entropy_backward(const KTensor& dlogits, const KTensor& logits, const KTensor& target,
                            const KTensor* weight, const KTensor& lse, int64_t ignore_index,
                            const KTensor& grad, double scale_nll, double scale_smooth) {
  const ClassGeom g = class_geom(logits);
  TCV_DISPATCH_FLOAT(logits.dtype, "cross_entropy",
                     ce_backward<scalar_t>(dlogits.ptr<scalar_t>(), logits.ptr<const scalar_t>(),
                                           target.ptr<const int64_t>(), opt_ptr<scalar_t>(weight),
                                           lse.ptr<const scalar_t>(), g, ignore_index,
                                           PosView<scalar_t>(grad, g.s), scale_nll, scale_smooth));
}

void nll_forward(const KTensor& out, const KTensor& log_probs, const KTensor& target,
                 const KTensor* weight, int64_t ignore_index) {
  const ClassGeom g = class_geom(log_probs);
  TCV_DISPATCH_FLOAT(
      log_probs.dtype, "nll_loss",
      nll_fwd<scalar_t>(out.ptr<scalar_t>(), log_probs.ptr<const scalar_t>(),
                        target.ptr<const int64_t>(), opt_ptr<scalar_t>(weight), g, ignore_index));
}

void nll_backward(const KTensor& dlog_probs, const KTensor& target, const KTensor* weight,
                  int64_t ignore_index, const KTensor& grad, double scale) {
  const ClassGeom g = class_geom(dlog_probs);
  TCV_DISPATCH_FLOAT(dlog_probs.dtype, "nll_loss",
                     nll_bwd<scalar_t>(dlog_probs.ptr<scalar_t>(), target.ptr<const int64_t>(),
                                       opt_ptr<scalar_t>(weight), g, ignore_index,
                                       PosView<scalar_t>(grad, g.s), scale));
}

void pointwise_loss(PointwiseLoss loss, const KTensor& out, const KTensor& input,
                    const KTensor& target, const KTensor* pos_weight, double beta) {
  TCV_DISPATCH_FLOAT(out.dtype, "loss",
                     pointwise_typed<scalar_t>(loss, out, input, target, pos_weight, beta));
}

void pointwise_loss_backward(PointwiseLoss loss, LossArg arg, const KTensor& d, const KTensor& grad,
                             const KTensor& input, const KTensor& target, const KTensor* pos_weight,
                             double beta) {
  TCV_DISPATCH_FLOAT(
      d.dtype, "loss",
      pointwise_backward_typed<scalar_t>(loss, arg, d, grad, input, target, pos_weight, beta));
}

}  // namespace tcv::kernels::cpu
