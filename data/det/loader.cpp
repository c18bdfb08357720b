#include "data/det/loader.h"

#include <algorithm>

#include "data/distributed_sampler.h"

namespace tcv::data {

namespace {

// The detection loader's augmentation streams use their own key.
constexpr uint64_t kDetAugmentKey = 0xD1B54A32D192ED03ull;

}  // namespace

DetDataLoader::DetDataLoader(std::shared_ptr<const DetDataset> dataset, DetTransform transform,
                             LoaderOptions opts)
    : dataset_(std::move(dataset)),
      transform_(std::move(transform)),
      opts_(std::move(opts)),
      batches_(dataset_->size(), opts_, "DetDataLoader",
               [this](const int64_t* indices, int64_t n, int64_t epoch) {
                 return make_batch(indices, n, epoch);
               }) {
  (void)normalize_coeffs(opts_.normalize.mean, opts_.normalize.std, 3, "normalize");
}

DetDataLoader::~DetDataLoader() = default;

int64_t DetDataLoader::num_batches() const {
  return batches_.num_batches();
}

void DetDataLoader::start_epoch(int64_t epoch, int64_t skip) {
  batches_.start_epoch(epoch, skip);
}

bool DetDataLoader::next(DetBatch& out) {
  return batches_.next(out);
}

DetBatch DetDataLoader::make_batch(const int64_t* indices, int64_t n, int64_t epoch) const {
  DetBatch batch = collate(indices, n, epoch);
  if (opts_.pin_memory && batch.images.numel() > 0) batch.images = batch.images.pin_memory();
  return batch;
}

DetBatch DetDataLoader::collate(const int64_t* indices, int64_t n, int64_t epoch) const {
  const uint64_t aug_seed = opts_.seed ^ kDetAugmentKey;
  const auto N = static_cast<uint64_t>(size());
  // (pixel / div - mean[c]) / std[c] as pixel * a[c] + b[c].
  std::array<float, 3> a{}, o{};
  const auto coeffs = normalize_coeffs(opts_.normalize.mean, opts_.normalize.std, 3, "normalize");
  for (size_t c = 0; c < 3; ++c) {
    const auto [m, sd] = coeffs[c];
    a[c] = static_cast<float>(1.0 / (opts_.normalize.div_value * static_cast<double>(sd)));
    o[c] = static_cast<float>(-static_cast<double>(m) / static_cast<double>(sd));
  }
  DetBatch batch;
  int64_t H = 0, W = 0, B = 0;
  float* x = nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = indices[i];
    Rng rng(aug_seed, static_cast<uint64_t>(epoch) * N + static_cast<uint64_t>(idx));
    DetSample s = dataset_->load(idx);
    if (!s.image.defined()) continue;  // skipped (corrupt)
    if (transform_) {
      // A transform's error names no file: say whose sample it was.
      try {
        transform_(s, rng);
      } catch (const Error& e) {
        TCV_THROW(dataset_->record(idx).source, ": ", e.what());
      }
    }
    TCV_CHECK(s.image.defined() && s.image.dtype() == DType::u8 && s.image.dim() == 3 &&
                  s.image.size(0) == 3,
              dataset_->name(), ": sample ", idx, " is not a u8 (3, H, W) image after the ",
              "transform");
    if (B == 0) {
      H = s.image.size(1);
      W = s.image.size(2);
      batch.images = empty({n, 3, H, W});  // (B, 3, H, W)
      x = batch.images.data<float>();
    } else {
      TCV_CHECK(s.image.size(1) == H && s.image.size(2) == W, dataset_->name(), ": sample ", idx,
                " is ", s.image.size(2), "x", s.image.size(1), " after the transform but the ",
                "batch is ", W, "x", H, " (resize every image to one size)");
    }
    const Tensor img = s.image.contiguous();
    const uint8_t* src = img.data<uint8_t>();
    float* dst = x + B * 3 * H * W;
    for (int64_t c = 0; c < 3; ++c) {
      const float ac = a[static_cast<size_t>(c)], oc = o[static_cast<size_t>(c)];
      const uint8_t* __restrict sp = src + c * H * W;
      float* __restrict dp = dst + c * H * W;
      for (int64_t k = 0; k < H * W; ++k) dp[k] = static_cast<float>(sp[k]) * ac + oc;
    }
    const DetTarget& t = s.target;
    const int64_t m = t.size();
    Tensor boxes = empty({m, 4});  // (n_i, 4)
    Tensor labels = empty({m}, {.dtype = DType::i64});
    Tensor difficult = empty({m}, {.dtype = DType::u8});
    Tensor iscrowd = empty({m}, {.dtype = DType::u8});
    const double fw = static_cast<double>(W), fh = static_cast<double>(H);
    for (int64_t k = 0; k < m; ++k) {
      const Box& bx = t.boxes[static_cast<size_t>(k)];
      float* bp = boxes.data<float>() + 4 * k;
      bp[0] = static_cast<float>(bx[0] / fw);
      bp[1] = static_cast<float>(bx[1] / fh);
      bp[2] = static_cast<float>(bx[2] / fw);
      bp[3] = static_cast<float>(bx[3] / fh);
      labels.data<int64_t>()[k] = t.labels[static_cast<size_t>(k)];
      difficult.data<uint8_t>()[k] = t.difficult[static_cast<size_t>(k)];
      iscrowd.data<uint8_t>()[k] = t.iscrowd[static_cast<size_t>(k)];
    }
    batch.boxes.push_back(boxes);
    batch.labels.push_back(labels);
    batch.difficult.push_back(difficult);
    batch.iscrowd.push_back(iscrowd);
    batch.indices.push_back(idx);
    batch.image_ids.push_back(s.image_id);
    batch.sizes.push_back({s.orig_height, s.orig_width});
    ++B;
  }
  if (B == 0)
    batch.images = empty({0, 3, 0, 0});
  else if (B < n)
    batch.images = batch.images.narrow(0, 0, B);
  return batch;
}

}  // namespace tcv::data
