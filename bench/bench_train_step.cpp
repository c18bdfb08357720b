// Whole training steps (forward, loss, backward, SGD) in images/s, and
// evaluation forwards.
//
// FmnistCnnTrainStep is the model bench/compare/fmnist_cnn_torch.py runs
// through PyTorch: compare the two with bench/compare/fmnist_cnn.sh.
#include <benchmark/benchmark.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "models/registry.h"
#include "train/optim.h"

namespace {

using namespace tcv;

void train_step_bench(benchmark::State& state, const std::string& model_name, int64_t channels,
                      int64_t size) {
  const int64_t batch = state.range(0);
  models::register_builtin_models();
  manual_seed(0);
  auto model = models::create_model(model_name, {.num_classes = 10, .in_channels = channels});
  model->train();
  train::SGD opt(model->named_parameters(), {.lr = 0.01, .momentum = 0.9});
  Tensor x = randn({batch, channels, size, size});
  Tensor y = randint(0, 10, {batch});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = ops::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up: primitive caches, allocator
  for (auto _ : state) step();
  state.counters["images_per_sec"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

void FmnistCnnTrainStep(benchmark::State& state) {
  train_step_bench(state, "fmnist_cnn", 1, 28);
}
void FmnistResnetTrainStep(benchmark::State& state) {
  train_step_bench(state, "fmnist_resnet", 1, 28);
}

// One evaluation forward (no graph, eval mode) of ResNet-18-CIFAR on a batch
// of 32x32 images. range(1) = 1: the parameters require gradients, as a
// trained model's do, so the convolutions keep their weights in oneDNN's layout
// between batches; 0: they do not, and every batch reorders every weight.
void Resnet18CifarEval(benchmark::State& state) {
  const int64_t batch = state.range(0);
  models::register_builtin_models();
  manual_seed(0);
  auto model = models::create_model("resnet18_cifar", {.num_classes = 10, .in_channels = 3});
  model->eval();
  for (auto& [name, p] : model->named_parameters()) p.set_requires_grad(state.range(1) == 1);
  Tensor x = randn({batch, 3, 32, 32});
  NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) (*model)(x);
  for (auto _ : state) benchmark::DoNotOptimize((*model)(x));
  state.counters["images_per_sec"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(FmnistCnnTrainStep)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FmnistResnetTrainStep)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Resnet18CifarEval)
    ->Args({64, 0})
    ->Args({64, 1})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
