#include "data/pose/loader.h"

namespace tcv::data {

PoseBatch collate_pose(SampleSource<PoseSample>& samples, const PoseTargetOptions& targets,
                       const Normalize& norm, const std::string& name) {
  const int64_t n = samples.capacity(), stride = targets.stride;
  ImageStack images(norm, n, name);
  PoseBatch batch;
  int64_t h = 0, w = 0;  // target cells
  for (PoseSample s; samples.next(s);) {
    const int64_t B = images.size();
    images.add(s.image, s.index);
    const int64_t H = images.height(), W = images.width();
    if (B == 0) {
      h = H / stride;
      w = W / stride;
      TCV_CHECK(h > 0 && w > 0, name, ": a ", W, "x", H, " image has no target cells at stride ",
                stride);
      batch.heatmaps = empty({n, kOpenposeHeatmaps, h, w});  // (B, 19, h, w)
      batch.pafs = empty({n, kOpenposePafs, h, w});          // (B, 38, h, w)
      batch.masks = empty({n, 1, h, w});                     // (B, 1, h, w)
    }
    make_pose_targets(s.people, s.mask, H, W, targets,
                      batch.heatmaps.data<float>() + B * kOpenposeHeatmaps * h * w,
                      batch.pafs.data<float>() + B * kOpenposePafs * h * w,
                      batch.masks.data<float>() + B * h * w);
    const auto m = static_cast<int64_t>(s.people.size());
    Tensor kp = empty({m, kCocoKeypoints, 3});  // (n_i, 17, 3)
    float* kd = kp.data<float>();
    for (int64_t p = 0; p < m; ++p)
      for (int64_t k = 0; k < kCocoKeypoints; ++k) {
        const Keypoint& q = s.people[static_cast<size_t>(p)].keypoints[static_cast<size_t>(k)];
        float* e = kd + (p * kCocoKeypoints + k) * 3;
        e[0] = static_cast<float>(q.labelled() ? q.x : 0.0);
        e[1] = static_cast<float>(q.labelled() ? q.y : 0.0);
        e[2] = static_cast<float>(q.v);
      }
    batch.keypoints.push_back(kp);
    batch.indices.push_back(s.index);
    batch.image_ids.push_back(s.image_id);
    batch.sizes.push_back({s.orig_height, s.orig_width});
  }
  const int64_t B = images.size();
  batch.images = images.take();
  if (B == 0) {
    batch.heatmaps = empty({0, kOpenposeHeatmaps, 0, 0});
    batch.pafs = empty({0, kOpenposePafs, 0, 0});
    batch.masks = empty({0, 1, 0, 0});
  } else if (B < n) {
    batch.heatmaps = batch.heatmaps.narrow(0, 0, B);
    batch.pafs = batch.pafs.narrow(0, 0, B);
    batch.masks = batch.masks.narrow(0, 0, B);
  }
  return batch;
}

void PoseBatch::pin_memory() {
  if (images.numel() == 0) return;
  images = images.pin_memory();
  heatmaps = heatmaps.pin_memory();
  pafs = pafs.pin_memory();
  masks = masks.pin_memory();
}

PoseDataLoader::PoseDataLoader(std::shared_ptr<const PoseDataset> dataset, PoseTransform transform,
                               PoseTargetOptions targets, LoaderOptions opts)
    : SampleLoader(
          dataset, std::move(transform), opts,
          {"PoseDataLoader", 0x8CB92BA72F3D8DD7ull,
           [targets, norm = opts.normalize, name = dataset->name()](SampleSource<PoseSample>& s) {
             return collate_pose(s, targets, norm, name);
           }}),
      targets_(targets) {
  check_pose_target_options(targets_);
  ImageStack::check(options().normalize);
}

}  // namespace tcv::data
