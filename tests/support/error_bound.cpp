#include "support/error_bound.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"

namespace tcv::testing {

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return std::ldexp(1.0, -24);
    case DType::f64:
      return std::ldexp(1.0, -53);
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::bf16:
      return std::ldexp(1.0, -8);
    default:
      ADD_FAILURE() << "unit_roundoff: " << dtype_name(dtype) << " is not a floating dtype";
      return 0.0;
  }
}

double gamma_n(int64_t n, DType dtype) {
  const double nu = static_cast<double>(n) * unit_roundoff(dtype);
  EXPECT_LT(nu, 0.5) << "gamma_n: n = " << n << " is too large for " << dtype_name(dtype);
  return nu / (1.0 - nu);
}

double expect_within(const Tensor& actual, const Tensor& expected, const Tensor& bound,
                     const std::string& what) {
  EXPECT_EQ(actual.shape(), expected.shape())
      << what << ": shapes " << actual.shape_str() << " vs " << expected.shape_str();
  if (actual.shape() != expected.shape()) return INFINITY;
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  const std::vector<double> b =
      bound.to(DType::f64).expand(expected.shape()).contiguous().to_vector<double>();
  double worst = 0.0;
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a[i] - e[i]);
    if (b[i] > 0) worst = std::max(worst, diff / b[i]);
    if (!(diff <= b[i]) && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i]
                    << " (|diff| " << diff << " exceeds the error bound " << b[i] << ")";
  }
  return worst;
}

AbsSums abs_sums(const TensorFn& fn, const std::vector<Tensor>& inputs, const Tensor& dy) {
  std::vector<Tensor> abs_in;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      abs_in.emplace_back();
      continue;
    }
    Tensor a = ops::abs(t.detach().to(DType::f64));
    a.set_requires_grad(true);
    abs_in.push_back(a);
  }
  Tensor y = fn(abs_in);
  y.backward(ops::abs(dy.detach().to(DType::f64)));
  AbsSums out{y.detach(), {}};
  for (const Tensor& t : abs_in) out.grads.push_back(t.defined() ? t.grad() : Tensor());
  return out;
}

BatchNormBounds batch_norm_f32_bounds(const BatchNormRef& r) {
  NoGradGuard no_grad;
  const double u = unit_roundoff(DType::f32);
  const int64_t n = r.x.size(0), c = r.x.size(1);
  const Tensor x = r.x.detach().to(DType::f64).reshape({n, c, -1});  // (N, C, L)
  const int64_t m_terms = n * x.size(2);
  const Shape ch{1, c, 1};
  auto chan = [&](const Tensor& t, double fill) {
    return t.defined() ? t.detach().to(DType::f64).reshape(ch)
                       : full(ch, fill, {.dtype = DType::f64});
  };
  auto mean_nl = [](const Tensor& t) { return ops::mean(t, {0, 2}, true); };
  const Tensor g = chan(r.weight, 1.0), b = chan(r.bias, 0.0);
  const Tensor abs_g = ops::abs(g);

  Tensor m, v, em, ev;
  if (r.training) {
    m = mean_nl(x);
    const Tensor xc = ops::sub(x, m);
    v = mean_nl(ops::mul(xc, xc));
    em = ops::mul(mean_nl(ops::abs(x)), gamma_n(m_terms + 2, DType::f32));
    const Tensor spread =
        ops::add(ops::add(mean_nl(ops::mul(x, x)), ops::mul(ops::mul(m, m), 2.0)), v);
    ev = ops::add(ops::mul(spread, gamma_n(m_terms + 4, DType::f32)),
                  ops::mul(ops::mul(ops::add(ops::abs(m), mean_nl(ops::abs(xc))), em), 2.0));
  } else {
    m = chan(r.running_mean, 0.0);
    v = chan(r.running_var, 1.0);
    em = ops::mul(ops::abs(m), u);
    ev = ops::mul(v, u);
  }
  const Tensor ve = ops::add(v, r.eps);
  const Tensor s = ops::rsqrt(ve);
  const Tensor rs = ops::add(ops::div(ev, ops::mul(ve, 2.0)), 3 * u);
  const Tensor xhat = ops::mul(ops::sub(x, m), s);
  const Tensor abs_xhat = ops::abs(xhat);
  const Tensor exhat = ops::add(ops::mul(s, em), ops::mul(abs_xhat, ops::add(rs, 2 * u)));
  const Tensor gs = ops::mul(abs_g, s);

  BatchNormBounds out;
  if (r.training) {
    out.mean = em.reshape({c});
    out.var = ev.reshape({c});
  }
  const Tensor folded = ops::add(ops::add(ops::abs(ops::mul(g, xhat)), ops::abs(b)),
                                 ops::mul(gs, ops::add(ops::abs(x), ops::abs(m))));
  out.y = ops::add(ops::mul(abs_g, exhat), ops::mul(folded, 3 * u)).reshape(r.x.shape());
  if (!r.dy.defined()) return out;

  const Tensor dy = r.dy.detach().to(DType::f64).reshape({n, c, -1});
  const Tensor abs_dy = ops::abs(dy);
  const Tensor eb =
      ops::add(ops::mul(mean_nl(ops::abs(ops::mul(dy, xhat))), gamma_n(m_terms + 3, DType::f32)),
               mean_nl(ops::mul(abs_dy, exhat)));
  Tensor dx, edx;
  if (r.training) {
    const Tensor a = mean_nl(dy), bb = mean_nl(ops::mul(dy, xhat));
    const Tensor ea = ops::mul(mean_nl(abs_dy), gamma_n(m_terms + 2, DType::f32));
    dx = ops::mul(ops::mul(g, s), ops::sub(ops::sub(dy, a), ops::mul(xhat, bb)));
    const Tensor mags = ops::add(ops::add(abs_dy, ops::abs(a)), ops::abs(ops::mul(xhat, bb)));
    Tensor inner = ops::add(ops::mul(abs_dy, u), ea);
    inner = ops::add(inner, ops::mul(exhat, ops::abs(bb)));
    inner = ops::add(inner, ops::mul(abs_xhat, eb));
    inner = ops::add(inner, ops::mul(mags, 3 * u));
    edx = ops::add(ops::mul(gs, inner), ops::mul(ops::abs(dx), ops::add(rs, 3 * u)));
  } else {
    dx = ops::mul(ops::mul(g, s), dy);
    edx = ops::mul(ops::abs(dx), ops::add(rs, 4 * u));
  }
  out.dx = edx.reshape(r.x.shape());
  out.dweight = ops::mul(eb, static_cast<double>(m_terms)).reshape({c});
  out.dbias = ops::mul(ops::sum(abs_dy, {0, 2}), gamma_n(m_terms + 1, DType::f32));
  return out;
}

}  // namespace tcv::testing
