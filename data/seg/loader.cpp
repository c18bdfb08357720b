#include "data/seg/loader.h"

#include <algorithm>

#include "data/distributed_sampler.h"

namespace tcv::data {

namespace {

// Per-sample augmentation streams use the key the classification loader uses.
constexpr uint64_t kAugmentKey = 0x9E3779B97F4A7C15ull;

}  // namespace

bool SegBatch::uniform() const {
  if (!images.defined() || images.dim() != 4) return true;
  for (const auto& s : sizes)
    if (s[0] != images.size(2) || s[1] != images.size(3)) return false;
  return true;
}

SegBatch collate_seg(std::vector<SegSample>& samples, const Normalize& norm,
                     const std::string& name) {
  SegBatch b;
  int64_t H = 0, W = 0, LH = 0, LW = 0, C = 0;
  bool labels = false, no_labels = false;
  for (const SegSample& s : samples) {
    if (!s.image.defined()) continue;
    TCV_CHECK(s.image.dtype() == DType::u8 && s.image.dim() == 3, name, ": sample ", s.index,
              " is not a u8 (C, H, W) image: ", dtype_name(s.image.dtype()), " ",
              s.image.shape_str());
    TCV_CHECK(C == 0 || s.image.size(0) == C, name, ": sample ", s.index, " has ", s.image.size(0),
              " channels, the batch ", C);
    C = s.image.size(0);
    H = std::max(H, s.image.size(1));
    W = std::max(W, s.image.size(2));
    if (s.label.defined()) {
      TCV_CHECK(s.label.dtype() == DType::u8 && s.label.dim() == 2, name, ": sample ", s.index,
                " has a label map that is not u8 (H, W): ", dtype_name(s.label.dtype()), " ",
                s.label.shape_str());
      LH = std::max(LH, s.label.size(0));
      LW = std::max(LW, s.label.size(1));
      labels = true;
    } else {
      no_labels = true;
    }
    b.indices.push_back(s.index);
  }
  TCV_CHECK(!(labels && no_labels), name,
            ": some samples of the batch have label maps, others not");
  const auto B = static_cast<int64_t>(b.indices.size());
  if (B == 0) {
    b.images = empty({0, 3, 0, 0});
    return b;
  }
  std::vector<std::pair<float, float>> coeffs;  // (scale, shift) per channel
  for (int64_t c = 0; c < C; ++c) {
    auto pick = [&](const std::vector<double>& v, const char* what) {
      TCV_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == C, "normalize.", what, " has ",
                v.size(), " values for ", C, " channels (give 1 or ", C, ")");
      return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
    };
    const double m = pick(norm.mean, "mean"), sd = pick(norm.std, "std");
    TCV_CHECK(sd != 0.0, "normalize.std of channel ", c, " is zero");
    coeffs.emplace_back(static_cast<float>(1.0 / (norm.div_value * sd)),
                        static_cast<float>(-m / sd));
  }
  b.images = zeros({B, C, H, W});                                                 // (B, C, H, W)
  if (labels) b.labels = full({B, LH, LW}, kIgnoreLabel, {.dtype = DType::i64});  // (B, Hl, Wl)
  float* x = b.images.data<float>();
  int64_t i = 0;
  for (const SegSample& s : samples) {
    if (!s.image.defined()) continue;
    const Tensor img = s.image.contiguous();
    const int64_t h = img.size(1), w = img.size(2);
    for (int64_t c = 0; c < C; ++c) {
      const auto [a, o] = coeffs[static_cast<size_t>(c)];
      const uint8_t* src = img.data<uint8_t>() + c * h * w;
      float* dst = x + ((i * C + c) * H) * W;
      for (int64_t y = 0; y < h; ++y)
        for (int64_t k = 0; k < w; ++k) dst[y * W + k] = static_cast<float>(src[y * w + k]) * a + o;
    }
    b.sizes.push_back({h, w});
    b.orig_sizes.push_back({s.orig_height, s.orig_width});
    if (labels) {
      const Tensor lab = s.label.contiguous();
      const int64_t lh = lab.size(0), lw = lab.size(1);
      const uint8_t* src = lab.data<uint8_t>();
      int64_t* dst = b.labels.data<int64_t>() + i * LH * LW;
      for (int64_t y = 0; y < lh; ++y)
        for (int64_t k = 0; k < lw; ++k) dst[y * LW + k] = src[y * lw + k];
      b.label_sizes.push_back({lh, lw});
    }
    ++i;
  }
  return b;
}

SegDataLoader::SegDataLoader(std::shared_ptr<const SegDataset> dataset, SegTransform transform,
                             LoaderOptions opts)
    : dataset_(std::move(dataset)),
      transform_(std::move(transform)),
      opts_(std::move(opts)),
      batches_(dataset_->size(), opts_, "SegDataLoader",
               [this](const int64_t* indices, int64_t n, int64_t epoch) {
                 return make_batch(indices, n, epoch);
               }) {}

SegDataLoader::~SegDataLoader() = default;

int64_t SegDataLoader::num_batches() const {
  return batches_.num_batches();
}

SegBatch SegDataLoader::collate(const int64_t* indices, int64_t n, int64_t epoch) const {
  const uint64_t aug_seed = opts_.seed ^ kAugmentKey;
  const auto N = static_cast<uint64_t>(size());
  std::vector<SegSample> samples;
  samples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SegSample s = dataset_->load(indices[i]);
    if (s.image.defined() && transform_) {
      Rng rng(aug_seed, static_cast<uint64_t>(epoch) * N + static_cast<uint64_t>(indices[i]));
      // A transform's error names no file: say whose sample it was.
      try {
        transform_(s, rng);
      } catch (const Error& e) {
        TCV_THROW(dataset_->record(indices[i]).image_path, ": ", e.what());
      }
    }
    samples.push_back(std::move(s));
  }
  return collate_seg(samples, opts_.normalize, dataset_->name());
}

SegBatch SegDataLoader::make_batch(const int64_t* indices, int64_t n, int64_t epoch) const {
  SegBatch batch = collate(indices, n, epoch);
  if (opts_.pin_memory) {
    batch.images = batch.images.pin_memory();
    if (batch.labels.defined()) batch.labels = batch.labels.pin_memory();
  }
  return batch;
}

void SegDataLoader::start_epoch(int64_t epoch, int64_t skip) {
  batches_.start_epoch(epoch, skip);
}

bool SegDataLoader::next(SegBatch& out) {
  return batches_.next(out);
}

}  // namespace tcv::data
