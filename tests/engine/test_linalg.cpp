// matmul (torch.matmul rules, batched broadcasting, transposed views) and linear.
#include <gtest/gtest.h>
#include <omp.h>

#include "kernels/cpu/gemm.h"
#include "support/error_bound.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::lit;
using testing::rand_f64;

// The rounding-error bound of an f32 product of k-term sums against f64
// (support/error_bound.h): γ(k + 2)·(|a|·|b|), the 2 for the f32 copies.
Tensor f32_product_bound(const Tensor& abs_product, int64_t k) {
  return ops::mul(abs_product, testing::gamma_n(k + 2, DType::f32));
}

// Reference product of contiguous (B, m, k) and (B, k, n) tensors by plain loops.
Tensor naive_bmm(const Tensor& a, const Tensor& b) {
  const int64_t bs = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> c(bs * m * n, 0.0);
  for (int64_t z = 0; z < bs; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          c[(z * m + i) * n + j] += av[(z * m + i) * k + p] * bv[(z * k + p) * n + j];
  return from_vector<double>(c, {bs, m, n});
}

TEST(Matmul, KnownValues2D) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = lit({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    Tensor b = lit({7, 8, 9, 10, 11, 12}, {3, 2}, dt);
    Tensor c = ops::matmul(a, b);
    EXPECT_EQ(c.dtype(), dt);
    expect_close(c, lit({58, 64, 139, 154}, {2, 2}), 1e-5, 1e-6, dtype_name(dt));
  }
}

TEST(Matmul, OneDimensionalOperands) {
  Tensor v = lit({1, 2, 3}, {3});
  Tensor w = lit({4, 5, 6}, {3});
  Tensor m = lit({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor mt = lit({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dot = ops::matmul(v, w);
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_DOUBLE_EQ(dot.item(), 32.0);
  expect_close(ops::matmul(v, m), lit({22, 28}, {2}));   // (3) · (3, 2)
  expect_close(ops::matmul(mt, v), lit({14, 32}, {2}));  // (2, 3) · (3)
  Tensor batched = lit({1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}, {2, 3, 2});
  expect_close(ops::matmul(v, batched), lit({22, 28, 4, 0}, {2, 2}));  // (3) · (2, 3, 2)
  Tensor bt = lit({1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0}, {2, 2, 3});
  expect_close(ops::matmul(bt, v), lit({14, 32, 3, 1}, {2, 2}));  // (2, 2, 3) · (3)
}

TEST(Matmul, BatchedBroadcastMatchesLoops) {
  Tensor a = rand_f64({2, 1, 3, 4}, 1, -1, 1, false);
  Tensor b = rand_f64({5, 4, 2}, 2, -1, 1, false);
  Tensor c = ops::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  Tensor ae = a.expand({2, 5, 3, 4}).contiguous().reshape({10, 3, 4});
  Tensor be = b.expand({2, 5, 4, 2}).contiguous().reshape({10, 4, 2});
  expect_close(c.reshape({10, 3, 2}), naive_bmm(ae, be), 1e-12, 1e-12);
  // A shared right operand folds the batch into one GEMM; a shared left one loops.
  Tensor x = rand_f64({3, 5, 4}, 3, -1, 1, false);
  Tensor w = rand_f64({4, 6}, 4, -1, 1, false);
  expect_close(ops::matmul(x, w), naive_bmm(x, w.unsqueeze(0).expand({3, 4, 6}).contiguous()),
               1e-12, 1e-12);
  expect_close(
      ops::matmul(w.t(), x.transpose(1, 2)),
      naive_bmm(w.t().unsqueeze(0).expand({3, 6, 4}).contiguous(), x.transpose(1, 2).contiguous()),
      1e-12, 1e-12);
}

TEST(Matmul, TransposedAndStridedViews) {
  Tensor a = rand_f64({4, 3}, 5, -1, 1, false);
  Tensor b = rand_f64({5, 4}, 6, -1, 1, false);
  // Transposed views go to BLAS as flags, no copy needed.
  EXPECT_TRUE(kernels::cpu::gemm_operand_ok(a.t().k()));
  EXPECT_FALSE(kernels::cpu::gemm_operand_ok(b.slice(1, 0, 4, 2).k()));
  Tensor ref =
      naive_bmm(a.t().contiguous().unsqueeze(0), b.t().contiguous().unsqueeze(0)).squeeze(0);
  expect_close(ops::matmul(a.t(), b.t()), ref, 1e-12, 1e-12);
  // Every other column: no unit stride, copied first.
  Tensor bs = b.slice(1, 0, 4, 2);  // (5, 2)
  Tensor lhs = rand_f64({2, 5}, 7, -1, 1, false);
  Tensor ref2 = naive_bmm(lhs.unsqueeze(0), bs.contiguous().unsqueeze(0)).squeeze(0);
  expect_close(ops::matmul(lhs, bs), ref2, 1e-12, 1e-12);
}

TEST(Matmul, F32AgreesWithF64) {
  Tensor a = rand_f64({7, 33}, 8, -1, 1, false), b = rand_f64({33, 9}, 9, -1, 1, false);
  testing::expect_within(ops::matmul(a.to(DType::f32), b.to(DType::f32)), ops::matmul(a, b),
                         f32_product_bound(ops::matmul(ops::abs(a), ops::abs(b)), 33), "f32");
}

TEST(Matmul, ErrorsNameShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  try {
    ops::matmul(a, b);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[matmul] shapes (2, 3) and (4, 5)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::matmul(zeros({2, 3}), zeros({3, 2}, {.dtype = DType::f64})), Error);
  EXPECT_THROW(ops::matmul(zeros({2, 3, 4}), zeros({3, 4, 2})), Error);  // batch 2 vs 3
  EXPECT_THROW(ops::matmul(zeros({}), zeros({3})), Error);
}

TEST(Matmul, Gradients) {
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  check_gradients("matmul 2d", mm, {rand_f64({3, 4}, 10), rand_f64({4, 5}, 11)});
  check_gradients("matmul 1d.2d", mm, {rand_f64({4}, 12), rand_f64({4, 3}, 13)});
  check_gradients("matmul 2d.1d", mm, {rand_f64({3, 4}, 14), rand_f64({4}, 15)});
  check_gradients("matmul dot", mm, {rand_f64({5}, 16), rand_f64({5}, 17)});
  check_gradients("matmul batched broadcast", mm,
                  {rand_f64({2, 1, 3, 4}, 18), rand_f64({3, 4, 2}, 19)});
  check_gradients("matmul shared rhs", mm, {rand_f64({2, 3, 4}, 20), rand_f64({4, 5}, 21)});
  check_gradients("matmul shared lhs", mm, {rand_f64({3, 4}, 22), rand_f64({2, 4, 5}, 23)});
  check_gradients("matmul 1d.batched", mm, {rand_f64({4}, 24), rand_f64({2, 4, 3}, 25)});
  check_gradients(
      "matmul transposed views",
      [](const std::vector<Tensor>& in) { return ops::matmul(in[0].t(), in[1].transpose(0, 1)); },
      {rand_f64({4, 3}, 26), rand_f64({2, 4}, 27)});
}

TEST(Linear, KnownValuesAndShapes) {
  Tensor x = lit({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = lit({1, 0, -1, 0.5, 0.5, 0.5}, {2, 3});
  Tensor b = lit({10, -10}, {2});
  expect_close(ops::linear(x, w, b), lit({8, -7, 8, -2.5}, {2, 2}));
  expect_close(ops::linear(x, w), lit({-2, 3, -2, 7.5}, {2, 2}));
  Tensor y = ops::linear(lit({1, 2, 3}, {3}), w, b);  // 1-D input
  expect_close(y, lit({8, -7}, {2}));
  Tensor x4 = rand_f64({2, 3, 4, 3}, 30, -1, 1, false);
  EXPECT_EQ(ops::linear(x4, w, b).shape(), (Shape{2, 3, 4, 2}));
  try {
    ops::linear(zeros({2, 4}), zeros({5, 3}));
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(2, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::linear(zeros({2, 3}), zeros({5, 3}), zeros({4})), Error);
}

TEST(Linear, MatchesMatmulOracleInValueAndGradient) {
  Tensor x = rand_f64({2, 3, 6}, 31), w = rand_f64({4, 6}, 32), b = rand_f64({4}, 33);
  Tensor y = ops::linear(x, w, b);
  ops::sum(ops::mul(y, y)).backward();
  const Tensor dx = x.grad(), dw = w.grad(), db = b.grad();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  Tensor yo = ops::add(ops::matmul(x, w.t()), b);
  ops::sum(ops::mul(yo, yo)).backward();
  expect_close(y, yo, 1e-12, 1e-12, "y");
  expect_close(dx, x.grad(), 1e-12, 1e-12, "dx");
  expect_close(dw, w.grad(), 1e-12, 1e-12, "dweight");
  expect_close(db, b.grad(), 1e-12, 1e-12, "dbias");
}

TEST(Linear, Gradients) {
  auto lin = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); };
  check_gradients("linear", lin, {rand_f64({5, 4}, 40), rand_f64({3, 4}, 41), rand_f64({3}, 42)});
  check_gradients("linear batched", lin,
                  {rand_f64({2, 3, 4}, 43), rand_f64({2, 4}, 44), rand_f64({2}, 45)});
  check_gradients("linear 1d", lin, {rand_f64({4}, 46), rand_f64({3, 4}, 47), rand_f64({3}, 48)});
  check_gradients("linear no bias",
                  [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); },
                  {rand_f64({3, 4}, 49), rand_f64({2, 4}, 50)});
  // Only the weight needs a gradient (frozen features).
  check_gradients(
      "linear weight only", lin,
      {rand_f64({3, 4}, 51, -1, 1, false), rand_f64({2, 4}, 52), rand_f64({2}, 53, -1, 1, false)});
}

TEST(Linear, F32ClassifierHeadAgreesWithF64) {
  Tensor x = rand_f64({16, 300}, 60, -1, 1, false), w = rand_f64({10, 300}, 61, -1, 1, false);
  Tensor b = rand_f64({10}, 62, -1, 1, false);
  testing::expect_within(
      ops::linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32)), ops::linear(x, w, b),
      f32_product_bound(ops::linear(ops::abs(x), ops::abs(w), ops::abs(b)), 301), "f32");
}

// Batches of small f32 GEMMs are spread over OpenMP threads. They once shared
// one cached oneDNN primitive, whose scratchpad is not safe to run on several
// threads at once: with 4 or more threads later batches came out wrong.
TEST(Linalg, BatchedF32MatmulIsRightOnManyThreads) {
  Tensor a = testing::rand_f64({4, 37, 53}, 1, -2.0, 2.0, false);
  Tensor b = testing::rand_f64({4, 53, 19}, 2, -2.0, 2.0, false);
  const Tensor ref = ops::matmul(a, b);
  const Tensor bound = f32_product_bound(ops::matmul(ops::abs(a), ops::abs(b)), 53);
  const int before = omp_get_max_threads();
  for (int threads : {1, 4, 8, 16}) {
    omp_set_num_threads(threads);
    testing::expect_within(ops::matmul(a.to(DType::f32), b.to(DType::f32)), ref, bound,
                           std::to_string(threads) + " threads");
  }
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace tcv
