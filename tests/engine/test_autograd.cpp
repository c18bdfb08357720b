// The backward engine: dependency counting, accumulation, hooks, callbacks,
// version counters. The distributed reducer is built on the hooks and
// callbacks tested here.
#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;

Tensor leaf(std::vector<double> v, Shape s = {}) {
  Tensor t = from_vector<double>(v, s);
  t.set_requires_grad(true);
  return t;
}

TEST(Autograd, ChainRuleThroughSharedSubexpression) {
  // y = (x*x + x) summed: dy/dx = 2x + 1; x is used twice (a diamond).
  Tensor x = leaf({1, -2, 3});
  Tensor y = ops::sum(ops::add(ops::mul(x, x), x));
  EXPECT_FALSE(y.is_leaf());
  y.backward();
  expect_close(x.grad(), from_vector<double>({3, -3, 7}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({2});
  ops::mul(x, 3.0).backward(ones({1}, {.dtype = DType::f64}));
  Tensor g = x.grad();
  ops::mul(x, 4.0).backward(ones({1}, {.dtype = DType::f64}));
  EXPECT_DOUBLE_EQ(x.grad().item(), 7.0);
  EXPECT_TRUE(x.grad().same(g));  // accumulated in place: the same buffer
}

TEST(Autograd, LeavesNeverAliasOneGradient) {
  // add's backward hands the same tensor to both inputs.
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  ops::sum(ops::add(a, b)).backward();
  EXPECT_NE(a.grad().storage().get(), b.grad().storage().get());
  a.grad().add_(ones({2}, {.dtype = DType::f64}));
  expect_close(b.grad(), from_vector<double>({1, 1}));
}

TEST(Autograd, NoGradGuardAndDetachStopRecording) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard ng;
    Tensor y = ops::mul(x, x);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE(autograd::grad_enabled());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage().get(), x.storage().get());
  Tensor y = ops::mul(d, d);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, ModifiedSavedTensorIsAnError) {
  Tensor x = leaf({0.5, 1.0});
  Tensor y = ops::exp(x);  // saves its output
  Tensor z = ops::sum(y);
  {
    NoGradGuard ng;
    y.add_(ones({2}, {.dtype = DType::f64}));
  }
  try {
    z.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("modified in place"), std::string::npos) << msg;
    EXPECT_NE(msg.find("exp"), std::string::npos) << msg;
  }
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = ops::sum(ops::exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_close(x.grad(), ops::mul(ops::exp(x.detach()), 2.0));
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, SavedTensorsAreFreedAsBackwardPassesTheirNode) {
  // Ten sigmoids each save their 1 MiB output, and nothing else holds those
  // outputs. When the leaf's gradient arrives, every node after it has run:
  // their saved outputs must be gone already, not kept to the end of backward.
  auto& alloc = CpuAllocator::instance();
  Tensor x = testing::rand_f64({512, 512}, 3, -1, 1, false).to(DType::f32);
  x.set_requires_grad(true);
  const int64_t before = alloc.stats().allocated;
  int64_t at_leaf = -1;
  x.register_post_accumulate_grad_hook([&](Tensor&) { at_leaf = alloc.stats().allocated; });
  Tensor h = x;
  for (int i = 0; i < 10; ++i) h = ops::sigmoid(h);
  EXPECT_GE(alloc.stats().allocated - before, 10 << 20);  // the ten saved outputs
  ops::sum(h).backward();
  ASSERT_GE(at_leaf, 0);
  // Left when the leaf's gradient arrives: the output h (1 MiB), x's gradient
  // and the one being passed down (1 MiB each).
  EXPECT_LE(at_leaf - before, 4 << 20) << (at_leaf - before) / 1048576.0 << " MiB";
  // retain_graph keeps them for a second backward.
  Tensor g = x;
  for (int i = 0; i < 3; ++i) g = ops::sigmoid(g);
  ops::sum(g).backward(Tensor(), /*retain_graph=*/true);
  EXPECT_NO_THROW(ops::sum(g).backward());
}

TEST(Autograd, BranchThatGetsNoGradientStillReleasesItsDependents) {
  // x feeds a max (whose index output is not differentiable) and a mul.
  Tensor x = leaf({1, 5, 3});
  auto [values, idx] = ops::max(x, 0);
  Tensor unused = ops::mul(x, 2.0);  // recorded but not part of the loss
  Tensor y = ops::add(values, ops::sum(ops::mul(x, x)));
  y.backward();
  expect_close(x.grad(), from_vector<double>({2, 11, 6}));
  (void)unused;
  (void)idx;
}

TEST(Autograd, PostAccumulateGradHookSeesTheFinalGradientOnce) {
  Tensor w = leaf({1, 2, 3});
  std::vector<double> seen;
  int calls = 0;
  w.register_post_accumulate_grad_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().to_vector<double>();
  });
  // w is used twice: the hook must run once, after both contributions.
  Tensor y = ops::sum(ops::add(ops::mul(w, 2.0), ops::mul(w, w)));
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{4, 6, 8}));
  ops::sum(w).backward();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen, (std::vector<double>{5, 7, 9}));
}

TEST(Autograd, HooksCanBeRemoved) {
  Tensor w = leaf({1});
  int calls = 0;
  const int h = w.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
  ops::sum(w).backward();
  w.remove_post_accumulate_grad_hook(h);
  ops::sum(w).backward();
  EXPECT_EQ(calls, 1);
  Tensor nonleaf = ops::mul(w, 2.0);
  EXPECT_THROW(nonleaf.register_post_accumulate_grad_hook([](Tensor&) {}), Error);
}

TEST(Autograd, HooksFireLateLayersFirst) {
  // Gradients of parameters used later in forward become ready first: the
  // order a bucketed all-reduce relies on.
  Tensor w1 = leaf({0.5}), w2 = leaf({0.25}), w3 = leaf({2.0});
  std::vector<int> order;
  w1.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back(1); });
  w2.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back(2); });
  w3.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back(3); });
  Tensor x = from_vector<double>({3.0});
  Tensor h = ops::tanh(ops::mul(x, w1));
  h = ops::tanh(ops::mul(h, w2));
  h = ops::mul(h, w3);
  ops::sum(h).backward();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Autograd, EndOfBackwardCallbacksRunAfterEveryNode) {
  Tensor a = leaf({1, 2}), b = leaf({3});
  int callbacks = 0;
  bool all_grads_ready = false;
  std::vector<std::string> events;
  auto hook = [&](Tensor&) {
    events.push_back("hook");
    // Queue once per backward, as a reducer does from its first ready hook.
    if (events.size() == 1)
      autograd::queue_callback([&] {
        ++callbacks;
        events.push_back("callback");
        all_grads_ready = a.grad().defined() && b.grad().defined();
        // A callback may queue another; it runs in the same pass.
        autograd::queue_callback([&] { events.push_back("nested"); });
      });
  };
  a.register_post_accumulate_grad_hook(hook);
  b.register_post_accumulate_grad_hook(hook);
  ops::sum(ops::mul(a, b)).backward();
  EXPECT_EQ(callbacks, 1);
  EXPECT_TRUE(all_grads_ready);
  EXPECT_EQ(events, (std::vector<std::string>{"hook", "hook", "callback", "nested"}));
  EXPECT_FALSE(autograd::in_backward());
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(Autograd, GradientOfPreallocatedGradBufferStaysInPlace) {
  // A gradient preset to a view of a flat buffer (as a reducer does) keeps being that view.
  Tensor flat = zeros({5}, {.dtype = DType::f64});
  Tensor w = leaf({1, 2, 3});
  w.set_grad(flat.narrow(0, 1, 3));
  ops::sum(ops::mul(w, w)).backward();
  EXPECT_EQ(flat.to_vector<double>(), (std::vector<double>{0, 2, 4, 6, 0}));
  EXPECT_EQ(w.grad().storage().get(), flat.storage().get());
}

TEST(Autograd, ErrorsInBackwardNameTheNode) {
  Tensor x = leaf({1, 2});
  Tensor y = ops::mul(x, 2.0);
  try {
    y.backward();  // not a scalar, no gradient given
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos);
  }
  EXPECT_THROW(y.backward(ones({3}, {.dtype = DType::f64})), Error);
}

TEST(Autograd, ViewGradients) {
  Tensor x = testing::rand_f64({2, 3, 4}, 11);
  testing::check_gradients("reshape", [](auto& in) { return in[0].reshape({4, 6}); }, {x});
  testing::check_gradients("permute", [](auto& in) { return in[0].permute({2, 0, 1}); }, {x});
  testing::check_gradients("transpose", [](auto& in) { return in[0].transpose(0, 2); }, {x});
  testing::check_gradients("slice", [](auto& in) { return in[0].slice(2, 1, 4, 2); }, {x});
  testing::check_gradients("select", [](auto& in) { return in[0].select(1, -1); }, {x});
  testing::check_gradients("narrow", [](auto& in) { return in[0].narrow(0, 1, 1); }, {x});
  testing::check_gradients("unsqueeze", [](auto& in) { return in[0].unsqueeze(1).squeeze(1); },
                           {x});
  testing::check_gradients("flatten", [](auto& in) { return in[0].flatten(1); }, {x});
  Tensor v = testing::rand_f64({3, 1}, 12);
  testing::check_gradients("expand", [](auto& in) { return in[0].expand({2, 3, 4}); }, {v});
  testing::check_gradients("contiguous", [](auto& in) { return in[0].t().contiguous(); }, {v});
  testing::check_gradients("cast", [](auto& in) { return in[0].to(DType::f32).to(DType::f64); },
                           {v}, {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3});
  testing::check_gradients("clone", [](auto& in) { return in[0].clone(); }, {v});
}

}  // namespace
}  // namespace tcv
