// Whole epochs of the four tasks' loaders on the CPU, on the calling thread
// (workers = 0, so the figure is the work per batch and not the scheduling):
// classification batches of Fashion-MNIST in memory, and detection,
// segmentation and pose batches of generated scenes decoded from JPEG/PNG
// files, augmented and collated (pose with its OpenPose targets).
//
//   tcv-gbench --benchmark_filter='LoaderEpoch'
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/det/loader.h"
#include "data/det/scenes.h"
#include "data/det/transforms.h"
#include "data/det/voc.h"
#include "data/pose/coco.h"
#include "data/pose/loader.h"
#include "data/pose/scenes.h"
#include "data/pose/transforms.h"
#include "data/seg/loader.h"

namespace {

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

constexpr int64_t kImages = 32;
constexpr int64_t kBatch = 8;

// The generated data sets, written once per process under the temp directory.
struct Sets {
  std::shared_ptr<const DetDataset> det;
  std::shared_ptr<const SegDataset> seg;
  std::shared_ptr<const PoseDataset> pose;
  std::shared_ptr<const ImageClassificationDataset> cls;
  std::string root;

  Sets() {
    root =
        (fs::temp_directory_path() / ("tcv_bench_loader_" + std::to_string(::getpid()))).string();
    SceneSetOptions so;
    so.scene.width = so.scene.height = 160;
    so.train = kImages;
    so.val = 0;
    so.seed = 1;
    write_scene_set(so, root + "/scenes");
    det = std::make_shared<const DetDataset>(
        read_voc({.roots = {root + "/scenes"}, .split = "train"}));
    seg = std::make_shared<const SegDataset>(read_voc_seg({.root = root + "/scenes"}));
    write_pose_scene_set(
        {.scene = {.width = 160, .height = 128}, .train = kImages, .val = 0, .seed = 2},
        root + "/pose");
    pose = std::make_shared<const PoseDataset>(read_coco_keypoints(
        {.annotation_file = root + "/pose/annotations/person_keypoints_train.json",
         .image_dir = root + "/pose/images"}));
    const IdxFiles f = find_idx_files(so.fmnist_dir);
    cls = std::make_shared<const ImageClassificationDataset>(
        ImageClassificationDataset::from_idx(f.test_images, f.test_labels, 10));
  }
  ~Sets() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

const Sets& sets() {
  static const Sets s;
  return s;
}

const Normalize kNorm{
    .div_value = 1.0, .mean = {123.675, 116.28, 103.53}, .std = {58.395, 57.12, 57.375}};

// One epoch per iteration; images/s.
template <class Loader, class Batch>
void run_epochs(benchmark::State& state, Loader& loader) {
  int64_t epoch = 0, images = 0;
  for (auto _ : state) {
    loader.start_epoch(epoch++);
    Batch b;
    while (loader.next(b)) {
      benchmark::DoNotOptimize(&b);
      images += b.size();
    }
  }
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}

void BM_DetLoaderEpoch(benchmark::State& state) {
  DetDataLoader loader(sets().det, ssd_train_transform({.size = 160}),
                       {.batch_size = kBatch, .seed = 3, .normalize = kNorm});
  run_epochs<DetDataLoader, DetBatch>(state, loader);
}
BENCHMARK(BM_DetLoaderEpoch)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SegLoaderEpoch(benchmark::State& state) {
  SegDataLoader loader(sets().seg, seg_train_transform({.crop = {128, 128}}),
                       {.batch_size = kBatch, .seed = 3, .normalize = kNorm});
  run_epochs<SegDataLoader, SegBatch>(state, loader);
}
BENCHMARK(BM_SegLoaderEpoch)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PoseLoaderEpoch(benchmark::State& state) {
  PoseAugmentOptions aug;
  aug.size = 128;
  PoseDataLoader loader(sets().pose, pose_train_transform(aug), {},
                        {.batch_size = kBatch, .seed = 3, .normalize = kNorm});
  run_epochs<PoseDataLoader, PoseBatch>(state, loader);
}
BENCHMARK(BM_PoseLoaderEpoch)->Unit(benchmark::kMillisecond)->UseRealTime();

// Classification in memory: Fashion-MNIST's 10,000 test images in batches of 256.
void BM_ClsLoaderEpoch(benchmark::State& state) {
  DataLoader loader(sets().cls,
                    {.batch_size = 256, .seed = 3, .normalize = {.mean = {0.286}, .std = {0.353}}});
  int64_t epoch = 0, images = 0;
  for (auto _ : state) {
    loader.start_epoch(epoch++);
    Batch b;
    while (loader.next(b)) {
      benchmark::DoNotOptimize(b.x.data_ptr());
      images += b.y.size(0);
    }
  }
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ClsLoaderEpoch)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
