// NMS and box IoU on the CPU. The boxes are closed-form (the murmur-hash
// sequence of tests/support/golden_formula.h), so bench/compare/nms.py feeds
// torchvision.ops.nms exactly the same ones.
//
//   OMP_NUM_THREADS=2 tcv-gbench --benchmark_filter='Nms|BoxIou'
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "support/golden_formula.h"

namespace {

using namespace tcv;

/// n boxes and scores: layout 0 spreads them over a 1000x1000 image (sides 10
/// to 100, most kept at 0.5); layout 1 jitters them around 50 centres (sides
/// 40 to 80, most suppressed). As bench/compare/nms.py's boxes().
void make_boxes(int64_t n, int layout, Tensor& boxes, Tensor& scores) {
  std::vector<float> b(static_cast<size_t>(4 * n)), s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v[5];
    for (int k = 0; k < 5; ++k) v[k] = testing::golden_uniform(5 * i + k, 77);
    double x1, y1, w, h;
    if (layout == 0) {
      x1 = 1000.0 * v[0];
      y1 = 1000.0 * v[1];
      w = 10.0 + 90.0 * v[2];
      h = 10.0 + 90.0 * v[3];
    } else {
      const double c = std::floor(50.0 * v[0]);
      x1 = 20.0 * std::fmod(c, 7.0) * 7.0 + 30.0 * v[1];
      y1 = 20.0 * std::floor(c / 7.0) * 7.0 + 30.0 * v[2];
      w = 40.0 + 40.0 * v[3];
      h = 40.0 + 40.0 * v[4];
    }
    b[4 * i] = static_cast<float>(x1);
    b[4 * i + 1] = static_cast<float>(y1);
    b[4 * i + 2] = static_cast<float>(x1 + w);
    b[4 * i + 3] = static_cast<float>(y1 + h);
    s[i] = static_cast<float>(testing::golden_uniform(i, 78));
  }
  boxes = from_vector<float>(b, {n, 4});
  scores = from_vector<float>(s, {n});
}

// range(0): boxes; range(1): layout.
void BM_Nms(benchmark::State& state) {
  Tensor boxes, scores;
  make_boxes(state.range(0), static_cast<int>(state.range(1)), boxes, scores);
  int64_t kept = 0;
  for (auto _ : state) {
    Tensor keep = ops::nms(boxes, scores, 0.5);
    kept = keep.numel();
    benchmark::DoNotOptimize(keep.data_ptr());
  }
  state.counters["kept"] = static_cast<double>(kept);
  state.SetLabel(state.range(1) == 0 ? "spread" : "clustered");
}
BENCHMARK(BM_Nms)
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond);

void BM_BoxIou(benchmark::State& state) {
  Tensor a, b, s;
  make_boxes(20, 0, a, s);
  make_boxes(8732, 0, b, s);
  for (auto _ : state) benchmark::DoNotOptimize(ops::box_iou(a, b).data_ptr());
  state.counters["Mpairs/s"] =
      benchmark::Counter(20.0 * 8732.0 * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BoxIou)->Unit(benchmark::kMicrosecond);

}  // namespace
