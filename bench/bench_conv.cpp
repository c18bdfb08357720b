// conv2d, max_pool2d and batch_norm forward+backward through the op API (what a
// training step pays), with GFLOP/s for convolution. PyTorch's numbers for the
// same shapes come from bench/compare/conv_torch.py.
//
//   OMP_NUM_THREADS=2 tcv-gbench --benchmark_filter='Conv2d|MaxPool|BatchNorm'
#include <benchmark/benchmark.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"

namespace {

using namespace tcv;

// Args: N, C, H, W, K, R (=S), pad.
void BM_Conv2dFwdBwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const int64_t k = state.range(4), r = state.range(5), pad = state.range(6);
  Generator gen(1);
  Tensor x = randn({n, c, h, w}, {}, &gen).set_requires_grad(true);
  Tensor weight = ops::mul(randn({k, c, r, r}, {}, &gen), 0.05).set_requires_grad(true);
  Tensor bias = zeros({k}).set_requires_grad(true);
  const ops::Conv2dParams p{.padding = {pad, pad}};
  const int64_t oh = h + 2 * pad - r + 1, ow = w + 2 * pad - r + 1;
  Tensor dy = randn({n, k, oh, ow}, {}, &gen);
  for (auto _ : state) {
    Tensor y = ops::conv2d(x, weight, bias, p);
    x.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(weight.grad().data_ptr());
  }
  // Forward, backward-data and backward-weights each cost one pass.
  const double flops = 3.0 * 2.0 * n * k * c * r * r * oh * ow;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2dFwdBwd)
    ->ArgNames({"N", "C", "H", "W", "K", "R", "pad"})
    ->Args({32, 64, 32, 32, 64, 3, 1})
    ->Args({16, 256, 14, 14, 256, 3, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

// Forward only, as in inference.
void BM_Conv2dFwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const int64_t k = state.range(4), r = state.range(5), pad = state.range(6);
  Generator gen(1);
  Tensor x = randn({n, c, h, w}, {}, &gen);
  Tensor weight = ops::mul(randn({k, c, r, r}, {}, &gen), 0.05);
  const ops::Conv2dParams p{.padding = {pad, pad}};
  for (auto _ : state) benchmark::DoNotOptimize(ops::conv2d(x, weight, Tensor(), p).data_ptr());
  const int64_t oh = h + 2 * pad - r + 1, ow = w + 2 * pad - r + 1;
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * k * c * r * r * oh * ow * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2dFwd)
    ->ArgNames({"N", "C", "H", "W", "K", "R", "pad"})
    ->Args({32, 64, 32, 32, 64, 3, 1})
    ->Args({16, 256, 14, 14, 256, 3, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_MaxPool2dFwdBwd(benchmark::State& state) {
  Generator gen(2);
  Tensor x = randn({64, 32, 28, 28}, {}, &gen).set_requires_grad(true);
  Tensor dy = randn({64, 32, 14, 14}, {}, &gen);
  const ops::Pool2dParams p{.kernel = {2, 2}, .stride = {2, 2}};
  for (auto _ : state) {
    Tensor y = ops::max_pool2d(x, p);
    x.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  // Bytes touched: x and y forward, dy and dx backward (workspace not counted).
  const double bytes = 4.0 * (2 * x.numel() + 2 * dy.numel());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MaxPool2dFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BatchNormTrainFwdBwd(benchmark::State& state) {
  Generator gen(3);
  Tensor x = randn({64, 32, 28, 28}, {}, &gen).set_requires_grad(true);
  Tensor weight = ones({32}).set_requires_grad(true);
  Tensor bias = zeros({32}).set_requires_grad(true);
  Tensor rm = zeros({32}), rv = ones({32});
  Tensor dy = randn({64, 32, 28, 28}, {}, &gen);
  for (auto _ : state) {
    Tensor y = ops::batch_norm(x, weight, bias, rm, rv, {.training = true});
    x.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  // Forward reads x twice and writes y; backward reads x and dy twice, writes dx.
  const double bytes = 4.0 * 8 * x.numel();
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BatchNormTrainFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
