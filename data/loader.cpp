#include "data/loader.h"

#include <algorithm>

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/transforms.h"

namespace tcv::data {

std::vector<std::pair<float, float>> pixel_affine(const Normalize& norm, int64_t C) {
  std::vector<std::pair<float, float>> out;
  for (int64_t c = 0; c < C; ++c) {
    auto pick = [&](const std::vector<double>& v, const char* what) {
      TCV_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == C, "normalize.", what, " has ",
                v.size(), " values for ", C, " channels (give 1 or ", C, ")");
      return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
    };
    const double m = pick(norm.mean, "mean"), sd = pick(norm.std, "std");
    TCV_CHECK(sd != 0.0, "normalize.std of channel ", c, " is zero");
    out.emplace_back(static_cast<float>(1.0 / (norm.div_value * sd)), static_cast<float>(-m / sd));
  }
  return out;
}

EpochOrder::EpochOrder(int64_t size, const LoaderOptions& opts, const char* loader)
    : size_(size),
      batch_size_(opts.batch_size),
      world_size_(std::max<int64_t>(opts.world_size, 1)),
      rank_(opts.rank),
      seed_(opts.seed),
      shuffle_(opts.shuffle),
      drop_last_(opts.drop_last),
      workers_(opts.workers),
      depth_(static_cast<int64_t>(opts.prefetch) * opts.workers) {
  TCV_CHECK(opts.batch_size > 0, "[", loader, "] batch_size must be positive, got ",
            opts.batch_size);
  TCV_CHECK(opts.workers >= 0, "[", loader, "] workers must be >= 0, got ", opts.workers);
  TCV_CHECK(opts.prefetch >= 1, "[", loader, "] prefetch must be >= 1, got ", opts.prefetch);
}

int64_t EpochOrder::num_batches() const {
  const int64_t n = (size_ + world_size_ - 1) / world_size_;
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void EpochOrder::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  if (world_size_ > 1) {
    DistributedSampler ds({size_, world_size_, rank_, seed_, shuffle_});
    ds.set_epoch(epoch);
    order_ = ds.indices();
  } else {
    order_ = EpochSampler(size_, seed_, shuffle_).indices(epoch);
  }
}

std::pair<const int64_t*, int64_t> EpochOrder::batch(int64_t b) const {
  const int64_t start = b * batch_size_;
  return {order_.data() + start,
          std::min<int64_t>(batch_size_, static_cast<int64_t>(order_.size()) - start)};
}

namespace {

// (pixel / div - mean[c]) / std[c] as pixel * a[c] + b[c], mean and std as f32.
std::vector<std::pair<float, float>> stack_affine(const Normalize& norm) {
  std::vector<std::pair<float, float>> out;
  for (const auto& [m, sd] : normalize_coeffs(norm.mean, norm.std, 3, "normalize"))
    out.emplace_back(static_cast<float>(1.0 / (norm.div_value * static_cast<double>(sd))),
                     static_cast<float>(-static_cast<double>(m) / static_cast<double>(sd)));
  return out;
}

}  // namespace

ImageStack::ImageStack(const Normalize& norm, int64_t capacity, std::string name)
    : affine_(stack_affine(norm)), capacity_(capacity), name_(std::move(name)) {}

void ImageStack::check(const Normalize& norm) {
  (void)normalize_coeffs(norm.mean, norm.std, 3, "normalize");
}

void ImageStack::add(const Tensor& image, int64_t index) {
  TCV_CHECK(image.defined() && image.dtype() == DType::u8 && image.dim() == 3 && image.size(0) == 3,
            name_, ": sample ", index, " is not a u8 (3, H, W) image after the transform");
  if (count_ == 0) {
    H_ = image.size(1);
    W_ = image.size(2);
    images_ = empty({capacity_, 3, H_, W_});  // (B, 3, H, W)
  } else {
    TCV_CHECK(image.size(1) == H_ && image.size(2) == W_, name_, ": sample ", index, " is ",
              image.size(2), "x", image.size(1), " after the transform but the batch is ", W_, "x",
              H_, " (resize every image to one size)");
  }
  const Tensor img = image.contiguous();
  const uint8_t* src = img.data<uint8_t>();
  float* dst = images_.data<float>() + count_ * 3 * H_ * W_;
  for (int64_t c = 0; c < 3; ++c) {
    const auto [a, o] = affine_[static_cast<size_t>(c)];
    const uint8_t* __restrict sp = src + c * H_ * W_;
    float* __restrict dp = dst + c * H_ * W_;
    for (int64_t k = 0; k < H_ * W_; ++k) dp[k] = static_cast<float>(sp[k]) * a + o;
  }
  ++count_;
}

Tensor ImageStack::take() {
  if (count_ == 0) return empty({0, 3, 0, 0});
  return count_ < capacity_ ? images_.narrow(0, 0, count_) : images_;
}

}  // namespace tcv::data
