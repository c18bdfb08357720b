#include "data/pose/loader.h"

#include <algorithm>

#include "data/distributed_sampler.h"

namespace tcv::data {

namespace {

// The pose loader's augmentation streams use their own key.
constexpr uint64_t kPoseAugmentKey = 0x8CB92BA72F3D8DD7ull;

}  // namespace

PoseDataLoader::PoseDataLoader(std::shared_ptr<const PoseDataset> dataset, PoseTransform transform,
                               PoseTargetOptions targets, LoaderOptions opts)
    : dataset_(std::move(dataset)),
      transform_(std::move(transform)),
      targets_(targets),
      opts_(std::move(opts)),
      batches_(dataset_->size(), opts_, "PoseDataLoader",
               [this](const int64_t* indices, int64_t n, int64_t epoch) {
                 return make_batch(indices, n, epoch);
               }) {
  check_pose_target_options(targets_);
  (void)normalize_coeffs(opts_.normalize.mean, opts_.normalize.std, 3, "normalize");
}

PoseDataLoader::~PoseDataLoader() = default;

int64_t PoseDataLoader::num_batches() const {
  return batches_.num_batches();
}

void PoseDataLoader::start_epoch(int64_t epoch, int64_t skip) {
  batches_.start_epoch(epoch, skip);
}

bool PoseDataLoader::next(PoseBatch& out) {
  return batches_.next(out);
}

PoseBatch PoseDataLoader::make_batch(const int64_t* indices, int64_t n, int64_t epoch) const {
  PoseBatch batch = collate(indices, n, epoch);
  if (opts_.pin_memory && batch.images.numel() > 0) {
    batch.images = batch.images.pin_memory();
    batch.heatmaps = batch.heatmaps.pin_memory();
    batch.pafs = batch.pafs.pin_memory();
    batch.masks = batch.masks.pin_memory();
  }
  return batch;
}

PoseBatch PoseDataLoader::collate(const int64_t* indices, int64_t n, int64_t epoch) const {
  const uint64_t aug_seed = opts_.seed ^ kPoseAugmentKey;
  const auto N = static_cast<uint64_t>(size());
  std::array<float, 3> a{}, o{};
  const auto coeffs = normalize_coeffs(opts_.normalize.mean, opts_.normalize.std, 3, "normalize");
  for (size_t c = 0; c < 3; ++c) {
    const auto [m, sd] = coeffs[c];
    a[c] = static_cast<float>(1.0 / (opts_.normalize.div_value * static_cast<double>(sd)));
    o[c] = static_cast<float>(-static_cast<double>(m) / static_cast<double>(sd));
  }
  const int64_t s = targets_.stride;
  PoseBatch batch;
  int64_t H = 0, W = 0, h = 0, w = 0, B = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = indices[i];
    Rng rng(aug_seed, static_cast<uint64_t>(epoch) * N + static_cast<uint64_t>(idx));
    PoseSample smp = dataset_->load(idx);
    if (!smp.image.defined()) continue;  // skipped (corrupt)
    if (transform_) {
      // A transform's error ("[pose_warp] ...") names no file: say whose sample it was.
      try {
        transform_(smp, rng);
      } catch (const Error& e) {
        TCV_THROW(dataset_->record(idx).source, ": ", e.what());
      }
    }
    TCV_CHECK(smp.image.defined() && smp.image.dtype() == DType::u8 && smp.image.dim() == 3 &&
                  smp.image.size(0) == 3,
              dataset_->name(), ": sample ", idx, " is not a u8 (3, H, W) image after the ",
              "transform");
    if (B == 0) {
      H = smp.image.size(1);
      W = smp.image.size(2);
      h = H / s;
      w = W / s;
      TCV_CHECK(h > 0 && w > 0, dataset_->name(), ": a ", W, "x", H,
                " image has no target cells at stride ", s);
      batch.images = empty({n, 3, H, W});                    // (B, 3, H, W)
      batch.heatmaps = empty({n, kOpenposeHeatmaps, h, w});  // (B, 19, h, w)
      batch.pafs = empty({n, kOpenposePafs, h, w});          // (B, 38, h, w)
      batch.masks = empty({n, 1, h, w});                     // (B, 1, h, w)
    } else {
      TCV_CHECK(smp.image.size(1) == H && smp.image.size(2) == W, dataset_->name(), ": sample ",
                idx, " is ", smp.image.size(2), "x", smp.image.size(1),
                " after the transform but the batch is ", W, "x", H,
                " (resize every image to one size)");
    }
    const Tensor img = smp.image.contiguous();
    const uint8_t* src = img.data<uint8_t>();
    float* dst = batch.images.data<float>() + B * 3 * H * W;
    for (int64_t c = 0; c < 3; ++c) {
      const float ac = a[static_cast<size_t>(c)], oc = o[static_cast<size_t>(c)];
      const uint8_t* __restrict sp = src + c * H * W;
      float* __restrict dp = dst + c * H * W;
      for (int64_t k = 0; k < H * W; ++k) dp[k] = static_cast<float>(sp[k]) * ac + oc;
    }
    make_pose_targets(smp.people, smp.mask, H, W, targets_,
                      batch.heatmaps.data<float>() + B * kOpenposeHeatmaps * h * w,
                      batch.pafs.data<float>() + B * kOpenposePafs * h * w,
                      batch.masks.data<float>() + B * h * w);
    const auto m = static_cast<int64_t>(smp.people.size());
    Tensor kp = empty({m, kCocoKeypoints, 3});  // (n_i, 17, 3)
    float* kd = kp.data<float>();
    for (int64_t p = 0; p < m; ++p)
      for (int64_t k = 0; k < kCocoKeypoints; ++k) {
        const Keypoint& q = smp.people[static_cast<size_t>(p)].keypoints[static_cast<size_t>(k)];
        float* e = kd + (p * kCocoKeypoints + k) * 3;
        e[0] = static_cast<float>(q.labelled() ? q.x : 0.0);
        e[1] = static_cast<float>(q.labelled() ? q.y : 0.0);
        e[2] = static_cast<float>(q.v);
      }
    batch.keypoints.push_back(kp);
    batch.indices.push_back(idx);
    batch.image_ids.push_back(smp.image_id);
    batch.sizes.push_back({smp.orig_height, smp.orig_width});
    ++B;
  }
  if (B == 0) {
    batch.images = empty({0, 3, 0, 0});
    batch.heatmaps = empty({0, kOpenposeHeatmaps, 0, 0});
    batch.pafs = empty({0, kOpenposePafs, 0, 0});
    batch.masks = empty({0, 1, 0, 0});
  } else if (B < n) {
    batch.images = batch.images.narrow(0, 0, B);
    batch.heatmaps = batch.heatmaps.narrow(0, 0, B);
    batch.pafs = batch.pafs.narrow(0, 0, B);
    batch.masks = batch.masks.narrow(0, 0, B);
  }
  return batch;
}

}  // namespace tcv::data
