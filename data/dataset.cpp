#include "data/dataset.h"

#include "data/distributed_sampler.h"

#include <algorithm>
#include <filesystem>

#include "data/idx.h"
#include "engine/rng.h"

namespace tcv::data {

ImageClassificationDataset::ImageClassificationDataset(Tensor images, Tensor labels,
                                                       int64_t num_classes, std::string name)
    : num_classes_(num_classes), name_(std::move(name)) {
  TCV_CHECK(images.dtype() == DType::u8, name_, ": images must be u8, got ",
            dtype_name(images.dtype()));
  if (images.dim() == 3) images = images.unsqueeze(1);
  TCV_CHECK(images.dim() == 4, name_, ": images must be (N, C, H, W) or (N, H, W), got ",
            images.shape_str());
  TCV_CHECK(labels.dim() == 1 && !is_floating(labels.dtype()), name_,
            ": labels must be a 1-D integer tensor, got ", dtype_name(labels.dtype()), " ",
            labels.shape_str());
  TCV_CHECK(labels.size(0) == images.size(0), name_, ": ", images.size(0), " images but ",
            labels.size(0), " labels");
  TCV_CHECK(num_classes > 0, name_, ": num_classes must be positive, got ", num_classes);
  images_ = images.contiguous();
  labels_ = labels.dtype() == DType::i64 ? labels.contiguous() : labels.to(DType::i64);
  const int64_t* y = labels_.data<int64_t>();
  for (int64_t i = 0; i < labels_.numel(); ++i)
    TCV_CHECK(y[i] >= 0 && y[i] < num_classes, name_, ": label ", y[i], " of sample ", i,
              " is outside [0, ", num_classes, ")");
}

ImageClassificationDataset ImageClassificationDataset::from_idx(const std::string& images_path,
                                                                const std::string& labels_path,
                                                                int64_t num_classes) {
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  TCV_CHECK(images.dtype() == DType::u8 && (images.dim() == 3 || images.dim() == 4), images_path,
            ": expected u8 images (N, H, W) or (N, C, H, W), got ", dtype_name(images.dtype()), " ",
            images.shape_str());
  TCV_CHECK(labels.dim() == 1, labels_path, ": expected labels (N), got ", labels.shape_str());
  TCV_CHECK(labels.size(0) == images.size(0), labels_path, ": ", labels.size(0), " labels, but ",
            images_path, " has ", images.size(0), " images");
  return ImageClassificationDataset(images, labels, num_classes, images_path);
}

ImageClassificationDataset ImageClassificationDataset::head(int64_t n) const {
  n = std::clamp<int64_t>(n, 0, size());
  return ImageClassificationDataset(images_.narrow(0, 0, n), labels_.narrow(0, 0, n), num_classes_,
                                    name_);
}

void Batch::pin_memory() {
  x = x.pin_memory();
  y = y.pin_memory();
}

Batch ImageClassificationDataset::get_batch(const int64_t* indices, int64_t n,
                                            const Normalize& norm) const {
  const int64_t C = channels(), HW = height() * width();
  const auto affine = pixel_affine(norm, C);
  Batch b;
  b.x = empty({n, C, height(), width()});  // (B, C, H, W)
  b.y = empty({n}, {.dtype = DType::i64});
  float* x = b.x.data<float>();
  int64_t* y = b.y.data<int64_t>();
  const uint8_t* src = images_.data<uint8_t>();
  const int64_t* lab = labels_.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = indices[i];
    TCV_CHECK(j >= 0 && j < size(), name_, ": sample index ", j, " out of range [0, ", size(), ")");
    y[i] = lab[j];
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t* s = src + (j * C + c) * HW;
      float* d = x + (i * C + c) * HW;
      const auto [a, o] = affine[static_cast<size_t>(c)];
      for (int64_t k = 0; k < HW; ++k) d[k] = static_cast<float>(s[k]) * a + o;
    }
  }
  return b;
}

IdxFiles find_idx_files(const std::string& data_dir) {
  namespace fs = std::filesystem;
  auto find = [&](const std::string& stem) {
    for (const char* ext : {".gz", ""}) {
      const fs::path p = fs::path(data_dir) / (stem + ext);
      if (fs::exists(p)) return p.string();
    }
    TCV_THROW(data_dir, ": no ", stem, "(.gz) in this directory");
  };
  return {find("train-images-idx3-ubyte"), find("train-labels-idx1-ubyte"),
          find("t10k-images-idx3-ubyte"), find("t10k-labels-idx1-ubyte")};
}

std::vector<int64_t> EpochSampler::indices(int64_t epoch) const {
  if (!shuffle_) {
    std::vector<int64_t> v(n_);
    for (int64_t i = 0; i < n_; ++i) v[i] = i;
    return v;
  }
  // Each epoch draws from its own disjoint range of the Philox stream, so the
  // order depends only on (seed, epoch), not on what ran before.
  Generator gen(seed_);
  gen.set_offset(static_cast<uint64_t>(epoch) * static_cast<uint64_t>(std::max<int64_t>(n_, 1)));
  return randperm(n_, &gen).to_vector<int64_t>();
}

Sample InMemoryDataset::get(int64_t i, Rng& rng) const {
  return make(i, rng, false);
}

Sample InMemoryDataset::get_for_batch(int64_t i, Rng& rng) const {
  return make(i, rng, true);
}

Sample InMemoryDataset::make(int64_t i, Rng& rng, bool defer) const {
  TCV_CHECK(i >= 0 && i < size(), data_->name(), ": sample index ", i, " out of range [0, ", size(),
            ")");
  Sample s{data_->images().select(0, i), data_->labels().data<int64_t>()[i], {}};
  if (transform_)
    s.image =
        defer ? apply_deferring(transform_, s.image, rng, s.deferred) : transform_(s.image, rng);
  return s;
}

namespace {

// Per-sample augmentation streams use their own key, apart from the sampler's.
constexpr uint64_t kAugmentKey = 0x9E3779B97F4A7C15ull;

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const ImageClassificationDataset> dataset,
                       LoaderOptions opts)
    : dataset_(std::move(dataset)),
      streams_(opts.seed, kAugmentKey, dataset_->size()),
      batches_(dataset_->size(), std::move(opts), "DataLoader",
               [this](const int64_t* indices, int64_t n, int64_t) {
                 return dataset_->get_batch(indices, n, batches_.options().normalize);
               }) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions opts)
    : source_(std::move(dataset)),
      streams_(opts.seed, kAugmentKey, source_->size()),
      batches_(source_->size(), std::move(opts), "DataLoader",
               [this](const int64_t* indices, int64_t n, int64_t epoch) {
                 return collate(indices, n, epoch);
               }) {}

DataLoader::~DataLoader() = default;

const ImageClassificationDataset& DataLoader::dataset() const {
  TCV_CHECK(dataset_ != nullptr, "[DataLoader] dataset(): this loader reads a generic Dataset (",
            source_->name(), "), not an in-memory one");
  return *dataset_;
}

namespace {

// One u8 (C, H, W) image into f32 `dst`, mirrored when `flip`:
// (pixel * scale[c] + shift[c]) or, with `exact`, (pixel / 255 - mean[c]) / std[c]
// with the same float operations as normalize().
void write_pixels(const uint8_t* src, int64_t C, int64_t H, int64_t W, bool flip,
                  const std::vector<std::pair<float, float>>& coeffs, bool exact, float* dst) {
  for (int64_t c = 0; c < C; ++c) {
    const auto [a, b] = coeffs[static_cast<size_t>(c)];
    for (int64_t y = 0; y < H; ++y) {
      const uint8_t* __restrict s = src + (c * H + y) * W;
      float* __restrict d = dst + (c * H + y) * W;
      if (exact && flip)
        for (int64_t x = 0; x < W; ++x) d[x] = (static_cast<float>(s[W - 1 - x]) / 255.0f - a) / b;
      else if (exact)
        for (int64_t x = 0; x < W; ++x) d[x] = (static_cast<float>(s[x]) / 255.0f - a) / b;
      else if (flip)
        for (int64_t x = 0; x < W; ++x) d[x] = static_cast<float>(s[W - 1 - x]) * a + b;
      else
        for (int64_t x = 0; x < W; ++x) d[x] = static_cast<float>(s[x]) * a + b;
    }
  }
}

}  // namespace

Batch DataLoader::collate(const int64_t* indices, int64_t n, int64_t epoch) const {
  // Each sample goes into the batch as soon as it is made, while it is still in
  // cache; the batch is allocated at the first sample, whose shape it takes.
  Batch b;
  Shape chw;
  int64_t B = 0, C = 0, H = 0, W = 0;
  float* x = nullptr;
  int64_t* y = nullptr;
  std::vector<std::pair<float, float>> loader_norm;  // (scale, shift) per channel
  for (int64_t i = 0; i < n; ++i) {
    Rng rng = streams_(epoch, indices[i]);
    Sample s = source_->get_for_batch(indices[i], rng);
    if (!s.image.defined()) continue;  // skipped (corrupt) sample
    if (s.image.dim() == 2) s.image = s.image.unsqueeze(0);
    TCV_CHECK(s.image.dim() == 3 && (s.image.dtype() == DType::u8 || s.image.dtype() == DType::f32),
              source_->name(), ": sample ", indices[i],
              " is not a u8/f32 (C, H, W) image: ", dtype_name(s.image.dtype()), " ",
              s.image.shape_str());
    if (B == 0) {
      chw = s.image.shape();
      C = chw[0];
      H = chw[1];
      W = chw[2];
      b.x = empty({n, C, H, W});  // (B, C, H, W)
      b.y = empty({n}, {.dtype = DType::i64});
      x = b.x.data<float>();
      y = b.y.data<int64_t>();
      loader_norm = pixel_affine(batches_.options().normalize, C);
    } else {
      TCV_CHECK(s.image.shape() == chw, source_->name(), ": sample ", indices[i], " has shape ",
                s.image.shape_str(), " but the batch has ", shape_str(chw),
                " (add a Resize/CenterCrop/RandomResizedCrop)");
    }
    y[B] = s.label;
    float* d = x + B * C * H * W;
    const Tensor img = s.image.contiguous();
    if (img.dtype() == DType::f32) {
      std::copy_n(img.data<float>(), C * H * W, d);
    } else if (s.deferred.normalize) {
      const auto coeffs = normalize_coeffs(s.deferred.mean, s.deferred.std, C, "normalize");
      write_pixels(img.data<uint8_t>(), C, H, W, s.deferred.flip, coeffs, true, d);
    } else {
      write_pixels(img.data<uint8_t>(), C, H, W, s.deferred.flip, loader_norm, false, d);
    }
    ++B;
  }
  if (B == 0) {
    b.x = empty({0, 0, 0, 0});
    b.y = empty({0}, {.dtype = DType::i64});
  } else if (B < n) {
    b.x = b.x.narrow(0, 0, B);
    b.y = b.y.narrow(0, 0, B);
  }
  return b;
}

}  // namespace tcv::data
