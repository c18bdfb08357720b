// Losses against PyTorch 1.13 values (weights, ignore_index, label smoothing,
// spatial targets, every reduction), composite oracles, errors, gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/gradcheck.h"

namespace tcv {
namespace {

using ops::Reduction;
using testing::check_gradients;
using testing::expect_close;
using testing::lit;
using testing::rand_f64;

Tensor idx(const std::vector<int64_t>& v, const Shape& s = {}) {
  return from_vector<int64_t>(v, s);
}

// logits (3, 4), targets {0, 3, 2}, class weights {1, 2, 0.5, 1.5}.
Tensor logits(DType dt = DType::f64) {
  return lit({1.0, 2.0, 0.5, -1.0, 0.3, -0.2, 2.5, 1.0, -1.5, 0.0, 0.7, 0.2}, {3, 4}, dt);
}
Tensor weights(DType dt = DType::f64) {
  return lit({1.0, 2.0, 0.5, 1.5}, {4}, dt);
}

TEST(CrossEntropy, MatchesPyTorchEveryVariant) {
  const Tensor t = idx({0, 3, 2});
  struct Case {
    const char* name;
    double ls;
    bool weighted;
    std::vector<double> none;
    double mean, sum;
  };
  const Case cases[] = {
      {"plain", 0.0, false, {1.4951819, 1.83728536, 0.7947643}, 1.37574385, 4.12723156},
      {"smoothing", 0.1, false, {1.5326819, 1.84728536, 0.8797643}, 1.41991052, 4.25973156},
      {"weights", 0.0, true, {1.4951819, 2.75592804, 0.39738215}, 1.54949736, 4.64849208},
      {"weights+smoothing", 0.2, true, {1.63244099, 2.78156377, 0.7340968}, 1.71603385, 5.14810156},
  };
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Case& c : cases) {
      const Tensor w = c.weighted ? weights(dt) : Tensor();
      const std::string what = std::string(c.name) + " " + dtype_name(dt);
      expect_close(ops::cross_entropy(logits(dt), t, Reduction::none, -100, c.ls, w),
                   lit(c.none, {3}), 1e-6, 1e-6, what + " none");
      EXPECT_NEAR(ops::cross_entropy(logits(dt), t, Reduction::mean, -100, c.ls, w).item(), c.mean,
                  1e-6)
          << what;
      EXPECT_NEAR(ops::cross_entropy(logits(dt), t, Reduction::sum, -100, c.ls, w).item(), c.sum,
                  1e-6)
          << what;
    }
  }
}

TEST(CrossEntropy, IgnoreIndexValuesAndGradientsMatchPyTorch) {
  const Tensor t = idx({0, -100, 2});
  // The mean of both terms divides by the two non-ignored targets.
  Tensor x = logits();
  x.set_requires_grad(true);
  Tensor l = ops::cross_entropy(x, t, Reduction::mean, -100, 0.1);
  EXPECT_NEAR(l.item(), 1.2062231, 1e-7);
  l.backward();
  expect_close(x.grad(),
               lit({-0.35039609, 0.29223002, 0.05549446, 0.00267161, 0, 0, 0, 0, 0.01252421,
                    0.09965073, -0.23665616, 0.12448121},
                   {3, 4}),
               1e-7, 1e-6);
  Tensor xw = logits();
  xw.set_requires_grad(true);
  Tensor lw = ops::cross_entropy(xw, t, Reduction::mean, -100, 0.3, weights());
  EXPECT_NEAR(lw.item(), 1.73568311, 1e-7);
  lw.backward();
  expect_close(xw.grad(),
               lit({-0.3559844, 0.33677969, 0.07245872, -0.05325402, 0, 0, 0, 0, -0.02580993,
                    0.00841238, -0.04001762, 0.05741517},
                   {3, 4}),
               1e-7, 1e-6);
}

TEST(CrossEntropy, SpatialTargets) {
  // logits (2, 3, 2), targets (2, 2) with ignore_index -1.
  Tensor x = lit({0.1, 0.5, 1.0, -0.3, 0.2, 0.2, -0.7, 1.2, 0.4, 0.0, 0.9, -1.1}, {2, 3, 2});
  Tensor t = idx({2, 0, 1, -1}, {2, 2});
  expect_close(ops::cross_entropy(x, t, Reduction::none, -1),
               lit({1.41836901, 0.78396875, 1.0924575, 0.0}, {2, 2}), 1e-7, 1e-6);
  EXPECT_NEAR(ops::cross_entropy(x, t, Reduction::mean, -1, 0.1).item(), 1.1093762, 1e-7);
  // (N, C, H, W) equals the same pixels laid out as (N·H·W, C).
  Tensor x4 = rand_f64({2, 5, 3, 4}, 1, -2, 2, false);
  Generator g(2);
  Tensor t4 = randint(0, 5, {2, 3, 4}, {.dtype = DType::i64}, &g);
  Tensor flat = x4.permute({0, 2, 3, 1}).reshape({-1, 5});
  EXPECT_NEAR(ops::cross_entropy(x4, t4, Reduction::mean, -100, 0.2).item(),
              ops::cross_entropy(flat, t4.reshape({-1}), Reduction::mean, -100, 0.2).item(), 1e-12);
}

TEST(CrossEntropy, SpatialBlocksMatchRowsInF32) {
  // 153 positions per image: the spatial kernel's blocks of 64 end in a
  // partial one. Pixels laid out as rows of classes take the row kernel; both
  // must agree, values and gradients, with weights, smoothing and ignored
  // pixels, one of which holds an infinite logit and must get exact zeros.
  Generator g(21);
  Tensor x = randn({2, 5, 9, 17}, {}, &g);
  Tensor t = randint(0, 5, {2, 9, 17}, {.dtype = DType::i64}, &g);
  for (int64_t i : {0, 40, 63, 64, 200, 305}) t.data<int64_t>()[i] = -1;
  x.data<float>()[1 * 153 + 64] = std::numeric_limits<float>::infinity();  // class 1, pixel 64
  const Tensor w = lit({0.5, 1.0, 2.0, 1.5, 0.7}, {5}, DType::f32);
  Tensor xs = x.clone().set_requires_grad(true);
  Tensor xr = x.permute({0, 2, 3, 1}).reshape({-1, 5}).contiguous().set_requires_grad(true);
  const Tensor ls = ops::cross_entropy(xs, t, Reduction::none, -1, 0.1, w);
  const Tensor lr = ops::cross_entropy(xr, t.reshape({-1}), Reduction::none, -1, 0.1, w);
  expect_close(ls.reshape({-1}), lr, 1e-6, 1e-6, "loss per pixel");
  ops::mean(ls).backward();
  ops::mean(lr).backward();
  expect_close(xs.grad().permute({0, 2, 3, 1}).reshape({-1, 5}), xr.grad(), 1e-6, 1e-7, "grad");
  const auto gs = xs.grad().to_vector<float>();
  for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(gs[c * 153 + 64], 0.0f) << "class " << c;
  // And the f32 kernels against f64.
  Tensor x64 = x.to(DType::f64);
  x64.data<double>()[1 * 153 + 64] = 0.0;
  Tensor x32 = x64.to(DType::f32);
  expect_close(ops::cross_entropy(x32, t, Reduction::none, -1, 0.1, w),
               ops::cross_entropy(x64, t, Reduction::none, -1, 0.1, w.to(DType::f64)), 1e-5, 1e-6,
               "f32 vs f64");
}

TEST(CrossEntropy, EqualsNllOfLogSoftmaxOracle) {
  Tensor x = rand_f64({6, 7}, 3, -3, 3, false);
  Tensor t = idx({0, 6, 3, -100, 2, 6});
  Tensor w = rand_f64({7}, 4, 0.2, 2.0, false);
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    expect_close(ops::cross_entropy(x, t, r, -100, 0.0, w),
                 ops::nll_loss(ops::log_softmax(x, 1), t, r, -100, w), 1e-12, 1e-12);
  // A single sample: (C) logits and a 0-d target.
  EXPECT_NEAR(ops::cross_entropy(lit({1.0, 2.0, 0.5, -1.0}, {4}), idx({0}).squeeze(0)).item(),
              1.4951819, 1e-7);
}

TEST(CrossEntropy, ErrorsNameTheTarget) {
  try {
    ops::cross_entropy(logits(), idx({0, 4, 1}));
    FAIL() << "expected an out-of-range error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[cross_entropy] target 4 is out of bounds for 4 classes"), std::string::npos)
        << m;
  }
  EXPECT_THROW(ops::cross_entropy(logits(), idx({0, -2, 1})), Error);
  EXPECT_THROW(ops::nll_loss(logits(), idx({0, 9, 1})), Error);
  EXPECT_THROW(ops::cross_entropy(logits(), idx({0, 1})), Error);                    // shape
  EXPECT_THROW(ops::cross_entropy(logits(), idx({0, 1, 2}).to(DType::i32)), Error);  // dtype
  EXPECT_THROW(
      ops::cross_entropy(logits(), idx({0, 1, 2}), Reduction::mean, -100, 0.0, lit({1, 1, 1}, {3})),
      Error);  // weight size
}

TEST(CrossEntropy, Gradients) {
  const Tensor t = idx({0, 3, -100, 2, 1});
  const Tensor w = lit({1.0, 2.0, 0.5, 1.5}, {4});
  struct Case {
    const char* name;
    Reduction r;
    double ls;
    bool weighted;
  };
  for (const Case& c :
       {Case{"mean", Reduction::mean, 0.0, false}, Case{"sum", Reduction::sum, 0.0, false},
        Case{"none", Reduction::none, 0.0, false},
        Case{"mean smoothing", Reduction::mean, 0.15, false},
        Case{"none smoothing", Reduction::none, 0.15, false},
        Case{"mean weights", Reduction::mean, 0.0, true},
        Case{"mean weights smoothing", Reduction::mean, 0.25, true},
        Case{"sum weights smoothing", Reduction::sum, 0.25, true}})
    check_gradients(std::string("cross_entropy ") + c.name,
                    [&](const std::vector<Tensor>& in) {
                      return ops::cross_entropy(in[0], t, c.r, -100, c.ls,
                                                c.weighted ? w : Tensor());
                    },
                    {rand_f64({5, 4}, 10)});
  Generator g(11);
  Tensor ts = randint(0, 3, {2, 2, 3}, {.dtype = DType::i64}, &g);
  ts.data<int64_t>()[4] = -1;
  check_gradients(
      "cross_entropy spatial",
      [&](const std::vector<Tensor>& in) {
        return ops::cross_entropy(in[0], ts, Reduction::mean, -1, 0.1, lit({0.5, 1.0, 2.0}, {3}));
      },
      {rand_f64({2, 3, 2, 3}, 12)});
}

TEST(NllLoss, ValuesAndGradients) {
  Tensor lp = ops::log_softmax(logits(), 1);
  EXPECT_NEAR(ops::nll_loss(lp, idx({0, 3, 2}), Reduction::mean, -100, weights()).item(),
              1.54949736, 1e-7);
  EXPECT_NEAR(ops::nll_loss(lp, idx({0, -100, 2}), Reduction::sum).item(), 2.2899462, 1e-7);
  expect_close(ops::nll_loss(lit({-1, -2, -3, -4}, {2, 2}), idx({1, 0}), Reduction::none),
               lit({2, 3}, {2}));
  const Tensor t = idx({0, 3, -100, 2, 1});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    check_gradients(
        "nll_loss " + std::to_string(static_cast<int>(r)),
        [&](const std::vector<Tensor>& in) { return ops::nll_loss(in[0], t, r, -100, weights()); },
        {rand_f64({5, 4}, 20 + static_cast<int>(r))});
}

const std::vector<double> kA = {0.5, -1.0, 2.0, 0.0, 3.0};
const std::vector<double> kB = {1.0, 0.0, 1.5, 0.0, -1.0};

TEST(PointwiseLosses, MatchPyTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = lit(kA, {5}, dt), b = lit(kB, {5}, dt);
    expect_close(ops::mse_loss(a, b, Reduction::none), lit({0.25, 1.0, 0.25, 0.0, 16.0}, {5}));
    EXPECT_NEAR(ops::mse_loss(a, b).item(), 3.5, 1e-6);
    expect_close(ops::smooth_l1_loss(a, b, Reduction::none, 0.5),
                 lit({0.25, 0.75, 0.25, 0.0, 3.75}, {5}));
    EXPECT_NEAR(ops::smooth_l1_loss(a, b, Reduction::sum, 0.0).item(), 6.0, 1e-6);
    expect_close(ops::binary_cross_entropy_with_logits(a, lit({1.0, 0.0, 1.0, 0.5, 0.0}, {5}, dt),
                                                       Reduction::none),
                 lit({0.47407698, 0.31326169, 0.12692801, 0.69314718, 3.04858735}, {5}), 1e-6,
                 1e-6);
    // Saturated logits (±30, ±40) stay finite; pos_weight broadcasts over the last dim.
    Tensor xb = lit({0.5, -1.0, 2.0, 0.0, 30.0, -40.0}, {2, 3}, dt);
    Tensor yb = lit({1.0, 0.0, 1.0, 0.5, 0.0, 1.0}, {2, 3}, dt);
    Tensor pw = lit({2.0, 0.5, 3.0}, {3}, dt);
    expect_close(ops::binary_cross_entropy_with_logits(xb, yb, Reduction::none, pw),
                 lit({0.94815397, 0.31326169, 0.38078403, 1.03972077, 30.0, 120.0}, {2, 3}), 1e-5,
                 1e-6);
    EXPECT_NEAR(ops::binary_cross_entropy_with_logits(xb, yb, Reduction::mean, pw).item(),
                25.44698674, 1e-5);
  }
  EXPECT_THROW(ops::mse_loss(zeros({3}), zeros({4})), Error);
  EXPECT_THROW(ops::mse_loss(zeros({3}), zeros({3}, {.dtype = DType::f64})), Error);
}

TEST(PointwiseLosses, LargeBceGradientsMatchTheFormula) {
  // 6300 elements: without pos_weight one merged run of 25 chunks of 256 (the
  // last partial), the incoming gradient a broadcast scalar; with pos_weight
  // (7), runs of 7. Every argument's f32 gradient against the formula in double:
  // ∂x = ((1 − y) − lw·σ(−x)) / n, ∂y = (−x + (pw − 1)·softplus(−x)) / n,
  // ∂pw_c = Σ y·softplus(−x) / n over the class's elements, lw = 1 + (pw − 1)·y.
  Generator g(40);
  const int64_t n = 3 * 300 * 7;
  for (bool with_pw : {false, true}) {
    Tensor x = ops::mul(randn({3, 300, 7}, {}, &g), 4.0).set_requires_grad(true);
    Tensor y = rand({3, 300, 7}, {}, &g).set_requires_grad(true);
    Tensor pw = ops::add(rand({7}, {}, &g), 0.5).set_requires_grad(true);
    ops::binary_cross_entropy_with_logits(x, y, Reduction::mean, with_pw ? pw : Tensor())
        .backward();
    const auto xv = x.to_vector<float>(), yv = y.to_vector<float>(), pv = pw.to_vector<float>();
    const auto gx = x.grad().to_vector<float>(), gy = y.grad().to_vector<float>();
    std::vector<double> gpw(7, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double a = xv[i], b = yv[i], w = with_pw ? pv[i % 7] : 1.0;
      const double sp = std::log1p(std::exp(-std::fabs(a))) + std::max(-a, 0.0);  // softplus(-a)
      const double dx = ((1 - b) - (1 + (w - 1) * b) / (1 + std::exp(a))) / n;
      const double dy = (-a + (w - 1) * sp) / n;
      ASSERT_NEAR(gx[i], dx, 1e-6 * std::fabs(dx) + 1e-10) << "dx " << i << " pw " << with_pw;
      ASSERT_NEAR(gy[i], dy, 1e-6 * std::fabs(dy) + 1e-10) << "dy " << i << " pw " << with_pw;
      gpw[i % 7] += b * sp / n;
    }
    if (with_pw) expect_close(pw.grad().to(DType::f64), lit(gpw, {7}), 1e-9, 1e-5, "dpw");
  }
}

TEST(PointwiseLosses, Gradients) {
  // Inputs and targets both differentiable; targets broadcast along dim 0.
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    const std::string rs = std::to_string(static_cast<int>(r));
    check_gradients("mse_loss " + rs,
                    [r](const std::vector<Tensor>& in) { return ops::mse_loss(in[0], in[1], r); },
                    {rand_f64({3, 4}, 30), rand_f64({4}, 31)});
    check_gradients(
        "smooth_l1_loss " + rs,
        [r](const std::vector<Tensor>& in) { return ops::smooth_l1_loss(in[0], in[1], r, 0.4); },
        {rand_f64({3, 4}, 32, -1, 1), rand_f64({3, 4}, 33, -1, 1)}, {.kink = 1e-3});
    check_gradients("bce_with_logits " + rs,
                    [r](const std::vector<Tensor>& in) {
                      return ops::binary_cross_entropy_with_logits(in[0], in[1], r);
                    },
                    {rand_f64({3, 4}, 34, -4, 4), rand_f64({3, 4}, 35, 0, 1)});
  }
  check_gradients(
      "bce_with_logits pos_weight",
      [](const std::vector<Tensor>& in) {
        return ops::binary_cross_entropy_with_logits(in[0], in[1], Reduction::mean, in[2]);
      },
      {rand_f64({3, 4}, 36, -4, 4), rand_f64({3, 4}, 37, 0, 1), rand_f64({4}, 38, 0.5, 3)});
  // Exactly zero logits (a zero-initialised head): d/dx = sigmoid(0) - y.
  Tensor x = zeros({3}, {.dtype = DType::f64});
  x.set_requires_grad(true);
  ops::binary_cross_entropy_with_logits(x, lit({1.0, 0.0, 0.25}, {3}), Reduction::sum).backward();
  expect_close(x.grad(), lit({-0.5, 0.5, 0.25}, {3}), 1e-12, 0);
}

// ---- OHEM cross-entropy (TorchCV's FSOhemCELoss) ----

// logits[i] = 3 sin(0.7 (i + 1)) over (2, 5, 3, 4); target (n + 3y + 5x) mod 5,
// 255 where (n + y + 2x) mod 7 == 0 (5 of 24 pixels ignored).
Tensor ohem_logits(DType dt = DType::f64) {
  std::vector<double> v;
  for (int i = 0; i < 2 * 5 * 3 * 4; ++i) v.push_back(3.0 * std::sin(0.7 * (i + 1)));
  return lit(v, {2, 5, 3, 4}, dt);
}
Tensor ohem_target() {
  std::vector<int64_t> v;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x)
        v.push_back((n + y + 2 * x) % 7 == 0 ? 255 : (n + 3 * y + 5 * x) % 5);
  return idx(v, {2, 3, 4});
}

// TorchCV's selection written out: sort the valid pixels' target probabilities,
// threshold = max(p_sorted[min(min_kept, count - 1)], thresh), keep p < threshold,
// mean (or sum) of w[t]·(−log p) over the kept pixels.
double ohem_reference(const Tensor& logits, const Tensor& target, double thresh, int64_t min_kept,
                      const std::vector<double>& w, bool mean) {
  const int64_t n = logits.size(0), c = logits.size(1), s = logits.numel() / (n * c);
  const std::vector<double> x = logits.to_vector<double>();
  const std::vector<int64_t> t = target.to_vector<int64_t>();
  std::vector<std::pair<double, double>> valid;  // (p, w·nll)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < s; ++j) {
      const int64_t tt = t[static_cast<size_t>(b * s + j)];
      if (tt == 255) continue;
      double mx = -INFINITY, se = 0;
      for (int64_t k = 0; k < c; ++k)
        mx = std::max(mx, x[static_cast<size_t>((b * c + k) * s + j)]);
      for (int64_t k = 0; k < c; ++k)
        se += std::exp(x[static_cast<size_t>((b * c + k) * s + j)] - mx);
      const double nll = mx + std::log(se) - x[static_cast<size_t>((b * c + tt) * s + j)];
      valid.emplace_back(std::exp(-nll), (w.empty() ? 1.0 : w[static_cast<size_t>(tt)]) * nll);
    }
  if (valid.empty()) return 0.0;
  std::vector<double> sorted;
  for (const auto& v : valid) sorted.push_back(v.first);
  std::sort(sorted.begin(), sorted.end());
  const double threshold = std::max(sorted[static_cast<size_t>(std::min<int64_t>(
                                        min_kept, static_cast<int64_t>(sorted.size()) - 1))],
                                    thresh);
  double total = 0;
  int64_t kept = 0;
  for (const auto& v : valid)
    if (v.first < threshold) total += v.second, ++kept;
  return kept == 0 ? 0.0 : (mean ? total / static_cast<double>(kept) : total);
}

TEST(OhemCrossEntropy, MatchesTorchCvLossAndGradients) {
  // Loss, the first 8 gradient entries and Σ|grad| from TorchCV's FSOhemCELoss
  // run on PyTorch 1.13 in f64 with these logits and targets.
  struct Case {
    const char* name;
    double thresh;
    int64_t min_kept;
    bool weighted;
    double loss;
    std::vector<double> grad8;
    double grad_l1;
  };
  const std::vector<double> w = {1.0, 2.0, 0.5, 1.5, 0.8};
  const Case cases[] = {
      {"thresh dominates",
       0.6,
       3,
       false,
       3.3679520456,
       {0, -0.0271830602, -0.0262565860, -0.0414254711, 0.0008905005, 0.0002584653, 0.0001489313,
        0},
       1.6512925557},
      {"min_kept dominates",
       0.05,
       10,
       false,
       5.3279409187,
       {0, 0, 0, 0, 0.0016919509, 0.0004910841, 0.0002829694, 0},
       1.9882502812},
      {"class weights",
       0.3,
       12,
       true,
       5.5086538778,
       {0, 0, 0, -0.0605449193, 0.0019522511, 0.0005666355, 0.0003265032, 0},
       2.3273790695},
      {"min_kept above the count",
       0.99,
       100,
       true,
       3.9667065454,
       {0, -0.0258239072, -0.0249437567, -0.0393541975, 0.0012689632, 0.0003683131, 0.0002122271,
        0},
       2.0561921423},
  };
  for (const Case& c : cases) {
    Tensor x = ohem_logits();
    x.set_requires_grad(true);
    const Tensor l = ops::ohem_cross_entropy(x, ohem_target(),
                                             {.thresh = c.thresh,
                                              .min_kept = c.min_kept,
                                              .weight = c.weighted ? lit(w, {5}) : Tensor()});
    EXPECT_NEAR(l.item(), c.loss, 1e-9) << c.name;
    EXPECT_NEAR(l.item(),
                ohem_reference(ohem_logits(), ohem_target(), c.thresh, c.min_kept,
                               c.weighted ? w : std::vector<double>{}, true),
                1e-12)
        << c.name;
    l.backward();
    const std::vector<double> g = x.grad().to_vector<double>();
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(g[i], c.grad8[i], 1e-9) << c.name << " " << i;
    EXPECT_NEAR(ops::sum(ops::abs(x.grad())).item(), c.grad_l1, 1e-9) << c.name;
  }
}

TEST(OhemCrossEntropy, SumNoValidPixelsAndF32) {
  const Tensor x = ohem_logits();
  EXPECT_NEAR(ops::ohem_cross_entropy(x, ohem_target(),
                                      {.thresh = 0.6, .min_kept = 3, .reduction = Reduction::sum})
                  .item(),
              ohem_reference(x, ohem_target(), 0.6, 3, {}, false), 1e-12);
  // Every pixel ignored: 0, as TorchCV (and a zero gradient).
  Tensor xg = ohem_logits();
  xg.set_requires_grad(true);
  const Tensor none = ops::ohem_cross_entropy(xg, full({2, 3, 4}, 255, {.dtype = DType::i64}));
  EXPECT_EQ(none.item(), 0.0);
  none.backward();
  EXPECT_EQ(ops::sum(ops::abs(xg.grad())).item(), 0.0);
  // min_kept 0: only the thresh rule.
  EXPECT_NEAR(ops::ohem_cross_entropy(x, ohem_target(), {.thresh = 0.2, .min_kept = 0}).item(),
              ohem_reference(x, ohem_target(), 0.2, 0, {}, true), 1e-12);
  // f32 logits: the same selection, values within f32 rounding of the softmax.
  EXPECT_NEAR(ops::ohem_cross_entropy(ohem_logits(DType::f32), ohem_target(),
                                      {.thresh = 0.6, .min_kept = 3})
                  .item(),
              3.3679520456, 1e-5);
}

TEST(OhemCrossEntropy, LargeSpatialInputMatchesReference) {
  // 2 x 19 x 37 x 29 with random logits and 10% ignored pixels, in both regimes.
  Generator g(41);
  const Tensor x = ops::mul(randn({2, 19, 37, 29}, {.dtype = DType::f64}, &g), 2.0);
  Tensor t = randint(0, 19, {2, 37, 29}, {.dtype = DType::i64}, &g);
  t = ops::masked_fill(t, ops::lt(rand({2, 37, 29}, {.dtype = DType::f64}, &g), 0.1), 255);
  for (const auto& [thresh, min_kept] : {std::pair{0.7, 500L}, std::pair{0.05, 1500L}}) {
    EXPECT_NEAR(ops::ohem_cross_entropy(x, t, {.thresh = thresh, .min_kept = min_kept}).item(),
                ohem_reference(x, t, thresh, min_kept, {}, true), 1e-10)
        << thresh << " " << min_kept;
  }
}

TEST(OhemCrossEntropy, Gradients) {
  // Away from a tie at the threshold the selection is locally constant.
  for (const auto& [thresh, min_kept] : {std::pair{0.6, 3L}, std::pair{0.05, 10L}}) {
    check_gradients("ohem_cross_entropy",
                    [thresh, min_kept](const std::vector<Tensor>& in) {
                      return ops::ohem_cross_entropy(
                          in[0], ohem_target(),
                          {.thresh = thresh,
                           .min_kept = min_kept,
                           .weight = lit({1.0, 2.0, 0.5, 1.5, 0.8}, {5})});
                    },
                    {ohem_logits().set_requires_grad(true)});
  }
}

TEST(OhemCrossEntropy, Errors) {
  const std::string bad_target = testing::error_of([] {
    Tensor t = ohem_target();
    t = ops::masked_fill(t, ops::eq(t, 4.0), 7);
    ops::ohem_cross_entropy(ohem_logits(), t);
  });
  EXPECT_NE(bad_target.find("out of bounds"), std::string::npos) << bad_target;
  EXPECT_THROW(ops::ohem_cross_entropy(ohem_logits(), ohem_target(), {.min_kept = -1}), Error);
  EXPECT_THROW(
      ops::ohem_cross_entropy(ohem_logits(), ohem_target(), {.reduction = Reduction::none}), Error);
  EXPECT_THROW(ops::ohem_cross_entropy(ohem_logits(), ohem_target(), {.weight = lit({1.0}, {1})}),
               Error);
}

}  // namespace
}  // namespace tcv
