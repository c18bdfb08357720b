// Transcendental pointwise ops, softmax and the class losses on the CPU, forward
// and backward through the op API. PyTorch's numbers for the same shapes come
// from bench/compare/pointwise_torch.py.
//
//   OMP_NUM_THREADS=2 tcv-gbench --benchmark_filter='Unary|Softmax|CrossEntropy|BceLogits'
#include <benchmark/benchmark.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"

namespace {

using namespace tcv;

// 3.1M floats, the size of a ResNet-18-CIFAR activation at batch 48.
const Shape kActivation{48, 64, 32, 32};

// range(0): 0 exp, 1 log, 2 sigmoid, 3 tanh.
void BM_UnaryFwdBwd(benchmark::State& state) {
  Generator gen(3);
  const int op = static_cast<int>(state.range(0));
  Tensor x = randn(kActivation, {}, &gen);
  if (op == 1) x = ops::add(ops::abs(x), 0.01);  // log's domain
  x.set_requires_grad(true);
  Tensor dy = randn(kActivation, {}, &gen);
  for (auto _ : state) {
    Tensor y = op == 0   ? ops::exp(x)
               : op == 1 ? ops::log(x)
               : op == 2 ? ops::sigmoid(x)
                         : ops::tanh(x);
    x.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  static const char* names[] = {"exp", "log", "sigmoid", "tanh"};
  state.SetLabel(names[op]);
  state.counters["Melem/s"] = benchmark::Counter(static_cast<double>(x.numel()) * 1e-6,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_UnaryFwdBwd)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: N, C, H, W, log (0 softmax, 1 log_softmax) over dim 1.
void BM_SoftmaxFwdBwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const bool log = state.range(4) != 0;
  Generator gen(4);
  const Shape shape = h * w == 1 ? Shape{n, c} : Shape{n, c, h, w};
  Tensor x = randn(shape, {}, &gen).set_requires_grad(true);
  Tensor dy = randn(shape, {}, &gen);
  for (auto _ : state) {
    Tensor y = log ? ops::log_softmax(x, 1) : ops::softmax(x, 1);
    x.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  state.SetLabel(log ? "log_softmax" : "softmax");
}
BENCHMARK(BM_SoftmaxFwdBwd)
    ->ArgNames({"N", "C", "H", "W", "log"})
    ->Args({256, 1000, 1, 1, 0})
    ->Args({256, 1000, 1, 1, 1})
    ->Args({8, 21, 128, 128, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: N, C, H, W (H = W = 1: classification logits (N, C)), label smoothing x100,
// percent of targets set to 255 (= ignore_index; segmentation's unlabelled pixels).
Tensor class_targets(int64_t n, int64_t c, int64_t h, int64_t w, int64_t ignored_pct,
                     Generator& gen) {
  const bool dense = h * w > 1;
  const Shape shape = dense ? Shape{n, h, w} : Shape{n};
  Tensor t = randint(0, c, shape, {.dtype = DType::i64}, &gen);
  if (ignored_pct > 0)
    t = ops::masked_fill(t, ops::lt(rand(shape, {}, &gen), ignored_pct / 100.0), 255);
  return t;
}

void BM_CrossEntropyFwdBwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const double smoothing = static_cast<double>(state.range(4)) / 100.0;
  Generator gen(5);
  const bool dense = h * w > 1;
  Tensor x = randn(dense ? Shape{n, c, h, w} : Shape{n, c}, {}, &gen).set_requires_grad(true);
  Tensor t = class_targets(n, c, h, w, state.range(5), gen);
  for (auto _ : state) {
    Tensor loss = ops::cross_entropy(x, t, {.ignore_index = 255, .label_smoothing = smoothing});
    x.set_grad(Tensor());
    loss.backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  // Forward reads the logits; backward reads them again and writes the gradient.
  state.counters["GB/s"] = benchmark::Counter(3.0 * 4.0 * static_cast<double>(x.numel()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CrossEntropyFwdBwd)
    ->ArgNames({"N", "C", "H", "W", "smooth", "ignored"})
    ->Args({256, 1000, 1, 1, 0, 0})
    ->Args({256, 1000, 1, 1, 10, 0})
    ->Args({8, 21, 128, 128, 0, 0})
    // A segmentation batch: 4 of 256x256, 21 classes, 5% of the pixels ignored.
    ->Args({4, 21, 256, 256, 0, 5})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// TorchCV's OHEM cross-entropy on the segmentation batch, both selection
// regimes: Args: thresh x100, min_kept.
void BM_OhemCrossEntropyFwdBwd(benchmark::State& state) {
  Generator gen(7);
  Tensor x = ops::mul(randn({4, 21, 256, 256}, {}, &gen), 2.0).set_requires_grad(true);
  Tensor t = class_targets(4, 21, 256, 256, 5, gen);
  const ops::OhemOptions o{.thresh = static_cast<double>(state.range(0)) / 100.0,
                           .min_kept = state.range(1)};
  for (auto _ : state) {
    Tensor loss = ops::ohem_cross_entropy(x, t, o);
    x.set_grad(Tensor());
    loss.backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
}
BENCHMARK(BM_OhemCrossEntropyFwdBwd)
    ->ArgNames({"thresh", "min_kept"})
    ->Args({70, 100000})
    ->Args({5, 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// SSD-style per-anchor binary logits: (N, anchors, classes).
void BM_BceLogitsFwdBwd(benchmark::State& state) {
  Generator gen(6);
  const Shape shape{32, 8732, 21};
  Tensor x = randn(shape, {}, &gen).set_requires_grad(true);
  Tensor t = ops::gt(rand(shape, {}, &gen), 0.9).to(DType::f32);
  for (auto _ : state) {
    Tensor loss = ops::binary_cross_entropy_with_logits(x, t);
    x.set_grad(Tensor());
    loss.backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
}
BENCHMARK(BM_BceLogitsFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
