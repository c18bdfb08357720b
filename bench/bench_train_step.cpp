// Whole training steps (forward, loss, backward, SGD) in images/s.
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

BENCHMARK(FmnistCnnTrainStep)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FmnistResnetTrainStep)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
