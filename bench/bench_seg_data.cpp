// The segmentation input pipeline on the CPU, per sample as a loader thread
// runs it: TorchCV's / mmsegmentation's training augmentation (random scale
// 0.5-2, crop, flip, photometric distortion) on a Cityscapes frame and on a
// VOC-sized image, and the collation of a batch of crops (normalise to f32,
// widen labels to i64).
//
//   tcv-gbench --benchmark_filter='Seg'
#include <benchmark/benchmark.h>

#include "data/seg/loader.h"
#include "time_transform.h"

namespace {

using namespace tcv;
using namespace tcv::data;

SegSample sample(int64_t H, int64_t W) {
  SegSample s;
  s.image = empty({3, H, W}, {.dtype = DType::u8});
  s.label = empty({H, W}, {.dtype = DType::u8});
  uint8_t* p = s.image.data<uint8_t>();
  for (int64_t k = 0; k < 3 * H * W; ++k) p[k] = static_cast<uint8_t>((k * 2654435761u) >> 24);
  uint8_t* l = s.label.data<uint8_t>();
  for (int64_t k = 0; k < H * W; ++k) l[k] = static_cast<uint8_t>((k / 97) % 19);
  return s;
}

// range: H, W, crop side.
void BM_SegTrainTransform(benchmark::State& state) {
  const int64_t H = state.range(0), W = state.range(1), crop = state.range(2);
  const SegSample src = sample(H, W);
  tcv::bench::time_transform(state, src,
                             seg_train_transform({.crop = {crop, crop}, .fill = {124, 116, 104}}));
}
BENCHMARK(BM_SegTrainTransform)
    ->Args({1024, 2048, 769})  // Cityscapes, TorchCV's crop
    ->Args({375, 500, 512})    // Pascal VOC
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SegCollate(benchmark::State& state) {
  const int64_t B = state.range(0), S = state.range(1);
  std::vector<SegSample> samples;
  for (int64_t i = 0; i < B; ++i) samples.push_back(sample(S, S));
  const Normalize norm{
      .div_value = 1.0, .mean = {123.675, 116.28, 103.53}, .std = {58.395, 57.12, 57.375}};
  for (auto _ : state) {
    SegBatch b = collate_seg(samples, norm, "bench");
    benchmark::DoNotOptimize(b.images.data_ptr());
  }
  state.counters["images/s"] =
      benchmark::Counter(double(B), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(double(B * S * S * (3 * 4 + 8 + 4)) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SegCollate)->Args({8, 769})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
