// Elementwise ops beyond the op table's cases (tests/ops/cases_elementwise.cpp):
// values, broadcasting, dtypes, type promotion, NaN, ties, the fused add_relu
// against the composite, in-place gradients, the operators.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "engine/ops/unary_grad.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::rand_f64;

TEST(Elementwise, BroadcastingValues) {
  Tensor a = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor b = from_vector<float>({10, 20}, {1, 2});
  Tensor s = ops::add(a, b);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{11, 21, 12, 22, 13, 23}));
  EXPECT_EQ(ops::sub(a, b, 2.0).to_vector<float>(),
            (std::vector<float>{-19, -39, -18, -38, -17, -37}));
  EXPECT_EQ(ops::mul(b, 0.5).to_vector<float>(), (std::vector<float>{5, 10}));
  EXPECT_EQ((a / b).to_vector<float>()[5], 3.0f / 20.0f);
  EXPECT_EQ(ops::broadcast_shapes({8, 1, 6, 1}, {7, 1, 5}), (Shape{8, 7, 6, 5}));
  EXPECT_THROW(ops::add(zeros({2, 3}), zeros({4})), Error);
}

TEST(Elementwise, NonContiguousOperands) {
  Tensor x = arange(0.0, 6.0, 1.0, {.dtype = DType::f32}).reshape({2, 3});
  Tensor y = ops::add(x.t(), x.t());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 6, 2, 8, 4, 10}));
  Tensor z = ops::mul(x.slice(1, 0, 3, 2), from_vector<float>({1, -1}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{0, -2, 3, -5}));
}

TEST(Elementwise, LargeTensorsMatchSmallLoop) {
  // Large enough to split across threads, which split elements, not rows: a
  // thread's range starts and ends inside a run. Every element is checked.
  Tensor a = randn({3, 70001});
  Tensor b = randn({1, 70001});
  Tensor c = ops::mul(ops::add(a, b), a);
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) ASSERT_EQ(cv[i], (av[i] + bv[i % 70001]) * av[i]) << i;
  // One contiguous run of 100003 (all dims merge), plus a broadcast scalar.
  Tensor x = randn({7, 14287, 1});
  Tensor s = from_vector<float>({0.25f});
  const auto xv = x.to_vector<float>(), xs = ops::sub(x, s).to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(xs[i], xv[i] - 0.25f) << i;
  // A transposed operand: runs of 3 strided elements in the output's order.
  Tensor t = randn({70001, 3});
  const auto tv = t.to_vector<float>(), at = ops::add(a, t.t()).to_vector<float>();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t k = 0; k < 70001; ++k)
      ASSERT_EQ(at[r * 70001 + k], av[r * 70001 + k] + tv[k * 3 + r]) << r << "," << k;
}

TEST(Elementwise, TypePromotion) {
  Tensor i = from_vector<int64_t>({1, 2, 3});
  Tensor f = from_vector<float>({0.5f, 0.5f, 0.5f});
  EXPECT_EQ(ops::add(i, f).dtype(), DType::f32);
  EXPECT_EQ(ops::add(i, i).dtype(), DType::i64);
  EXPECT_EQ(ops::div(i, from_vector<int64_t>({2, 2, 2})).to_vector<float>(),
            (std::vector<float>{0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(ops::add(f.to(DType::bf16), f.to(DType::bf16)).dtype(), DType::bf16);
  EXPECT_EQ(ops::mul(f.to(DType::f16), f.to(DType::f16)).to_vector<float>(),
            (std::vector<float>{0.25f, 0.25f, 0.25f}));
}

TEST(Elementwise, UnaryValues) {
  Tensor x = from_vector<double>({-2, -0.5, 0, 0.5, 2});
  expect_close(ops::relu(x), from_vector<double>({0, 0, 0, 0.5, 2}));
  expect_close(ops::leaky_relu(x, 0.1), from_vector<double>({-0.2, -0.05, 0, 0.5, 2}));
  expect_close(ops::hardswish(x),
               from_vector<double>({-2.0 * 1 / 6, -0.5 * 2.5 / 6, 0, 0.5 * 3.5 / 6, 2 * 5.0 / 6}));
  expect_close(ops::sigmoid(x),
               from_vector<double>({1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)), 0.5,
                                    1 / (1 + std::exp(-0.5)), 1 / (1 + std::exp(-2.0))}));
  expect_close(ops::clamp(x, -1, 1), from_vector<double>({-1, -0.5, 0, 0.5, 1}));
  expect_close(ops::relu6(from_vector<double>({-1, 0, 3, 6, 7})),
               from_vector<double>({0, 0, 3, 6, 6}));
  EXPECT_TRUE(std::isnan(ops::relu6(from_vector<float>({NAN})).item()));
  expect_close(ops::abs(x), from_vector<double>({2, 0.5, 0, 0.5, 2}));
  expect_close(ops::sign(x), from_vector<double>({-1, -1, 0, 1, 1}));
  expect_close(ops::neg(x), from_vector<double>({2, 0.5, 0, -0.5, -2}));
  Tensor p = from_vector<float>({0.25f, 1, 4});
  expect_close(ops::sqrt(p), from_vector<float>({0.5f, 1, 2}));
  expect_close(ops::rsqrt(p), from_vector<float>({2, 1, 0.5f}));
  expect_close(ops::log(ops::exp(p)), p, 1e-6, 1e-6);
  expect_close(ops::tanh(from_vector<float>({0.5f})), from_vector<float>({std::tanh(0.5f)}));
  EXPECT_TRUE(std::isnan(ops::clamp(from_vector<float>({NAN}), 0, 1).item()));
  EXPECT_TRUE(std::isnan(ops::maximum(from_vector<float>({NAN}), from_vector<float>({1})).item()));
}

TEST(Elementwise, ComparisonsAndWhere) {
  Tensor a = from_vector<float>({1, 2, 3});
  Tensor b = from_vector<float>({3, 2, 1});
  EXPECT_EQ(ops::lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(ops::le(a, b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(ops::eq(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(ops::ne(a, b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(ops::ge(a, 2.0 * ones({1})).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(ops::gt(a, 2.0).dtype(), DType::b8);
  Tensor w = ops::where(ops::gt(a, 1.5), a, zeros({1}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0, 2, 3}));
  EXPECT_EQ(ops::maximum(a, b).to_vector<float>(), (std::vector<float>{3, 2, 3}));
  EXPECT_EQ(ops::minimum(a, b).to_vector<float>(), (std::vector<float>{1, 2, 1}));
  EXPECT_THROW(ops::where(a, a, b), Error);  // condition must be bool
}

TEST(Elementwise, AddReluIsReluOfAdd) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i64}) {
    const bool grad = is_floating(dt);
    Tensor a0 = rand_f64({4, 3, 5}, 7, -2, 2, false).to(dt),
           b0 = rand_f64({3, 1}, 8, -2, 2, false).to(dt);
    Tensor a1 = a0.clone(), b1 = b0.clone(), a2 = a0.clone(), b2 = b0.clone();
    for (Tensor* t : {&a1, &b1, &a2, &b2}) t->set_requires_grad(grad);
    Tensor fused = ops::add_relu(a1, b1), apart = ops::relu(ops::add(a2, b2));
    const std::string what = dtype_name(dt);
    EXPECT_EQ(fused.dtype(), dt);
    expect_close(fused, apart, 0, 0, what);
    EXPECT_GT(ops::sum(ops::eq(fused, 0.0)).item<double>(), 10) << what;  // both sides of the kink
    if (!grad) continue;
    Tensor dy = rand_f64(fused.shape(), 9, -1, 1, false).to(dt);
    fused.backward(dy);
    apart.backward(dy);
    expect_close(a1.grad(), a2.grad(), 0, 0, what + " da");
    expect_close(b1.grad(), b2.grad(), 0, 0, what + " db (broadcast)");
  }
}

TEST(Elementwise, UnaryGradConsumeWorksInPlaceOnlyOnExclusiveBuffers) {
  const Tensor y = ops::relu(rand_f64({6, 7}, 10, -1, 1, false));
  const Tensor expected = ops::where(ops::gt(y, 0.0), full({6, 7}, 2.0, {.dtype = DType::f64}),
                                     zeros({6, 7}, {.dtype = DType::f64}));
  // Nobody else holds g: the gradient is written into its buffer.
  Tensor g = full({6, 7}, 2.0, {.dtype = DType::f64});
  const void* buffer = g.data_ptr();
  Tensor dx = ops::unary_grad_consume(kernels::UnaryOp::relu, g, y);
  EXPECT_FALSE(g.defined());
  EXPECT_EQ(dx.data_ptr(), buffer);
  expect_close(dx, expected, 0, 0, "in place");
  // Another reference to the buffer: a new tensor, the shared one untouched.
  Tensor shared = full({6, 7}, 2.0, {.dtype = DType::f64});
  Tensor g2 = shared;
  Tensor dx2 = ops::unary_grad_consume(kernels::UnaryOp::relu, g2, y);
  EXPECT_FALSE(g2.defined());
  EXPECT_NE(dx2.data_ptr(), shared.data_ptr());
  expect_close(dx2, expected, 0, 0, "copy");
  expect_close(shared, full({6, 7}, 2.0, {.dtype = DType::f64}), 0, 0, "shared buffer unchanged");
  // A view (its storage is shared with the base): not in place either.
  Tensor base = full({12, 7}, 2.0, {.dtype = DType::f64});
  Tensor view = base.narrow(0, 0, 6);
  Tensor dx3 = ops::unary_grad_consume(kernels::UnaryOp::relu, view, y);
  expect_close(base, full({12, 7}, 2.0, {.dtype = DType::f64}), 0, 0, "base unchanged");
  expect_close(dx3, expected, 0, 0, "from a view");
}

TEST(Elementwise, TiesSplitTheGradientEvenly) {
  Tensor a = from_vector<double>({1, 2}), b = from_vector<double>({1, 3});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  ops::sum(ops::maximum(a, b)).backward();
  expect_close(a.grad(), from_vector<double>({0.5, 0}));
  expect_close(b.grad(), from_vector<double>({0.5, 1}));
}

TEST(Elementwise, Relu6HasNoGradientAtItsBounds) {
  // As torch's hardtanh: no gradient at exactly 0 and 6, where clamp passes it.
  Tensor edges = from_vector<double>({0, 6, 3});
  edges.set_requires_grad(true);
  ops::sum(ops::relu6(edges)).backward();
  expect_close(edges.grad(), from_vector<double>({0, 0, 1}), 0, 0, "relu6 at its bounds");
}

TEST(Elementwise, OperatorsCompose) {
  Tensor x = rand_f64({3}, 10, 0.5, 1.5);
  check_gradients("operators",
                  [](auto& v) { return (2.0 * v[0] + 1.0) / (v[0] - 3.0) - (1.0 / v[0]) * -v[0]; },
                  {x});
}

TEST(Elementwise, InPlaceReluRefusesTensorsThatNeedGrad) {
  Tensor x = from_vector<float>({-1, 2});
  ops::relu_(x);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 2}));
  Tensor y = from_vector<float>({1});
  y.set_requires_grad(true);
  EXPECT_THROW(ops::relu_(y), Error);
}

}  // namespace
}  // namespace tcv
