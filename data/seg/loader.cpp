#include "data/seg/loader.h"

#include <algorithm>

namespace tcv::data {

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
  const auto coeffs = pixel_affine(norm, C);  // (scale, shift) per channel
  b.images = zeros({B, C, H, W});             // (B, C, H, W)
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

void SegBatch::pin_memory() {
  images = images.pin_memory();
  if (labels.defined()) labels = labels.pin_memory();
}

SegDataLoader::SegDataLoader(std::shared_ptr<const SegDataset> dataset, SegTransform transform,
                             LoaderOptions opts)
    // The samples' streams use the classification loader's key.
    : SampleLoader(dataset, std::move(transform), opts,
                   {"SegDataLoader", 0x9E3779B97F4A7C15ull,
                    [norm = opts.normalize, name = dataset->name()](SampleSource<SegSample>& s) {
                      std::vector<SegSample> samples = s.rest();
                      return collate_seg(samples, norm, name);
                    }}) {}

}  // namespace tcv::data
