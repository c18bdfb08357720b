#include "support/gradcheck.h"

#include <cmath>
#include <cstdlib>
#include <set>

namespace tcv::testing {

std::string source_dir() {
  if (const char* s = std::getenv("TCV_SOURCE_DIR")) return s;
  return TCV_SOURCE_DIR;
}

int& gradcheck_count() {
  static int n = 0;
  return n;
}

Tensor rand_f64(const Shape& shape, uint64_t seed, double lo, double hi, bool requires_grad) {
  Generator g(seed);
  Tensor t = uniform(shape, lo, hi, {.dtype = DType::f64}, &g);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor lit(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return from_vector<double>(values, shape).to(dtype);
}

Tensor iota(const Shape& shape, DType dtype, double start) {
  Tensor t =
      arange(start, start + static_cast<double>(shape_numel(shape)), 1.0, {.dtype = DType::f64})
          .reshape(shape);
  if (dtype == DType::b8) t = ops::gt(t, start + 1.5);
  return t.to(dtype);
}

void expect_close(const Tensor& actual, const Tensor& expected, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": shapes " << actual.shape_str() << " vs " << expected.shape_str();
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool ok =
        both_nan || (a[i] == e[i]) || std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i]
                    << " (|diff| " << std::abs(a[i] - e[i]) << ")";
  }
}

int64_t check_gradients(const std::string& name, const TensorFn& fn, std::vector<Tensor> inputs,
                        const GradCheckOptions& opts) {
  static std::set<std::string> seen;
  if (seen.insert(name).second) gradcheck_count() += 1;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) {
      EXPECT_EQ(t.dtype(), DType::f64) << name << ": gradient checks run in f64";
      EXPECT_TRUE(t.is_contiguous()) << name << ": inputs must be contiguous";
    }
  // Weighted sum with fixed random weights, so every output element matters.
  Tensor out = fn(inputs);
  Generator g(1234);
  Tensor w = uniform(out.shape(), 0.5, 1.5, {.dtype = out.dtype()}, &g);
  Tensor loss = ops::sum(ops::mul(out, w));
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) t.set_grad(Tensor());
  loss.backward();

  auto eval = [&]() {
    NoGradGuard ng;
    return ops::sum(ops::mul(fn(inputs), w)).item();
  };
  int64_t checked = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    if (!analytic.defined()) analytic = zeros_like(x);
    const std::vector<double> an = analytic.to_vector<double>();
    double* p = x.data<double>();
    int failures = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double orig = p[i];
      p[i] = orig + opts.eps;
      const double fp = eval();
      p[i] = orig - opts.eps;
      const double fm = eval();
      p[i] = orig;
      const double numeric = (fp - fm) / (2 * opts.eps);
      if (opts.kink > 0) {
        // Near a kink the one-sided slopes differ: skip that element.
        p[i] = orig + opts.kink;
        const double fk = eval();
        p[i] = orig;
        const double f0 = eval();
        const double right = (fk - f0) / opts.kink;
        if (std::abs(right - numeric) > 1e-3 * (1 + std::abs(numeric))) continue;
      }
      ++checked;
      const double tol = opts.atol + opts.rtol * std::abs(numeric);
      if (std::abs(an[i] - numeric) > tol && failures++ < 5)
        ADD_FAILURE() << name << ": input " << k << " element " << i << ": analytic " << an[i]
                      << " vs numeric " << numeric;
    }
  }
  EXPECT_GT(checked, 0) << name << ": no element was checked";
  return checked;
}

}  // namespace tcv::testing
