// The pose input pipeline on the CPU, per sample as a loader thread runs it:
// TorchCV's OpenPose augmentation (flip, focus scale, rotation, 368x368 crop
// in one affine resample) on a 640x480 scene, the targets at stride 8
// (heatmaps, PAFs, mask), and drawing one generated scene.
//
//   tcv-gbench --benchmark_filter='Pose'
#include <benchmark/benchmark.h>

#include "data/pose/scenes.h"
#include "data/pose/targets.h"
#include "data/pose/transforms.h"
#include "time_transform.h"

namespace {

using namespace tcv;
using namespace tcv::data;

PoseSample scene_sample(int64_t W, int64_t H) {
  PoseSceneOptions o{.width = W, .height = H, .min_people = 3, .max_people = 3};
  Rng rng(7, 0);
  PoseScene sc = render_pose_scene(o, rng);
  PoseSample s;
  s.image = sc.image;
  s.mask = ones({H, W}, {.dtype = DType::u8});
  for (const CocoPersonAnnotation& a : sc.people) {
    if (a.iscrowd) continue;
    PosePerson p;
    p.keypoints = a.keypoints;
    p.box = {a.bbox[0], a.bbox[1], a.bbox[0] + a.bbox[2], a.bbox[1] + a.bbox[3]};
    s.people.push_back(p);
  }
  return s;
}

void BM_PoseTrainTransform(benchmark::State& state) {
  const PoseSample src = scene_sample(640, 480);
  tcv::bench::time_transform(state, src, pose_train_transform({.size = 368}));
}
BENCHMARK(BM_PoseTrainTransform)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PoseTargets(benchmark::State& state) {
  PoseSample s = scene_sample(640, 480);
  Rng rng(1, 0);
  pose_train_transform({.size = 368})(s, rng);
  for (auto _ : state) {
    PoseTargets t = make_pose_targets(s.people, s.mask, 368, 368, {});
    benchmark::DoNotOptimize(t.pafs.data_ptr());
  }
  state.counters["images/s"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PoseTargets)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PoseSceneRender(benchmark::State& state) {
  const PoseSceneOptions o;
  uint64_t k = 0;
  for (auto _ : state) {
    Rng rng(3, k++);
    PoseScene s = render_pose_scene(o, rng);
    benchmark::DoNotOptimize(s.image.data_ptr());
  }
  state.counters["images/s"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PoseSceneRender)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
