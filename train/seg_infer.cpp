#include "train/seg_infer.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::train {

namespace {

// The model's logits for x, f32, at x's spatial size.
Tensor forward_at_input_size(const SegForward& forward, const Tensor& x) {
  Tensor l = forward(x);
  TCV_CHECK(l.defined() && l.dim() == 4 && l.size(0) == x.size(0), "[seg_logits] the model gave ",
            l.defined() ? l.shape_str() : "nothing", " for images ", x.shape_str(),
            "; expected logits (B, K, h, w) with B = ", x.size(0));
  TCV_CHECK(l.device() == x.device(), "[seg_logits] the model's logits are on ", l.device().str(),
            ", its images on ", x.device().str());
  if (l.dtype() != DType::f32) l = ops::cast(l, DType::f32);
  if (l.size(2) != x.size(2) || l.size(3) != x.size(3))
    l = ops::upsample(l, {x.size(2), x.size(3)}, {.mode = ops::InterpMode::bilinear});
  return l;
}

// x mirrored along its last dim.
Tensor flip_width(const Tensor& x) {
  const int64_t W = x.size(3);
  std::vector<int64_t> idx(static_cast<size_t>(W));
  for (int64_t k = 0; k < W; ++k) idx[static_cast<size_t>(k)] = W - 1 - k;
  return ops::index_select(x, 3, from_vector(idx, {W}, x.device()));
}

Tensor slide(const SegForward& forward, const Tensor& x, const SegInferOptions& o) {
  const int64_t B = x.size(0), H = x.size(2), W = x.size(3);
  const auto windows = slide_windows(H, W, o.crop, o.stride);
  if (windows.size() == 1) return forward_at_input_size(forward, x);
  Tensor preds;  // (B, K, H, W)
  std::vector<float> count(static_cast<size_t>(H * W), 0.0f);
  for (const SlideWindow& w : windows) {
    const Tensor crop = x.narrow(2, w.y1, w.y2 - w.y1).narrow(3, w.x1, w.x2 - w.x1).contiguous();
    const Tensor l = forward_at_input_size(forward, crop);
    if (!preds.defined()) preds = zeros({B, l.size(1), H, W}, {.device = x.device()});
    TCV_CHECK(l.size(1) == preds.size(1), "[seg_logits] the model gave ", l.size(1),
              " classes for one window and ", preds.size(1), " for another");
    Tensor dst = preds.narrow(2, w.y1, w.y2 - w.y1).narrow(3, w.x1, w.x2 - w.x1);
    dst.add_(l);
    for (int64_t y = w.y1; y < w.y2; ++y)
      for (int64_t c = w.x1; c < w.x2; ++c) count[static_cast<size_t>(y * W + c)] += 1.0f;
  }
  if (std::all_of(count.begin(), count.end(), [](float c) { return c == 1.0f; })) return preds;
  return ops::div(preds, from_vector(count, {1, 1, H, W}, x.device()));
}

}  // namespace

std::vector<SlideWindow> slide_windows(int64_t H, int64_t W, std::array<int64_t, 2> crop,
                                       std::array<int64_t, 2> stride) {
  TCV_CHECK(H > 0 && W > 0, "[slide_windows] image size must be positive, got (", H, ", ", W, ")");
  TCV_CHECK(crop[0] > 0 && crop[1] > 0 && stride[0] > 0 && stride[1] > 0,
            "[slide_windows] crop and stride must be positive, got crop (", crop[0], ", ", crop[1],
            ") stride (", stride[0], ", ", stride[1], ")");
  TCV_CHECK(stride[0] <= crop[0] && stride[1] <= crop[1], "[slide_windows] stride (", stride[0],
            ", ", stride[1], ") larger than the crop (", crop[0], ", ", crop[1],
            ") would leave pixels no window covers");
  const int64_t rows = std::max<int64_t>(H - crop[0] + stride[0] - 1, 0) / stride[0] + 1;
  const int64_t cols = std::max<int64_t>(W - crop[1] + stride[1] - 1, 0) / stride[1] + 1;
  std::vector<SlideWindow> out;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      SlideWindow w;
      w.y2 = std::min(i * stride[0] + crop[0], H);
      w.y1 = std::max<int64_t>(w.y2 - crop[0], 0);
      w.x2 = std::min(j * stride[1] + crop[1], W);
      w.x1 = std::max<int64_t>(w.x2 - crop[1], 0);
      out.push_back(w);
    }
  return out;
}

namespace {
int64_t n_passes(const SegInferOptions& o) {
  return static_cast<int64_t>(o.scales.size()) * (o.flip == FlipTest::on ? 2 : 1);
}
}  // namespace

Tensor seg_logits(const SegForward& forward, const Tensor& images, const SegInferOptions& opts,
                  std::array<int64_t, 2> out_size) {
  TCV_CHECK(images.defined() && images.dim() == 4 && images.dtype() == DType::f32,
            "[seg_logits] expects f32 images (B, C, H, W), got ",
            images.defined() ? dtype_name(images.dtype()) : "undefined", " ",
            images.defined() ? images.shape_str() : "");
  TCV_CHECK(!opts.scales.empty(), "[seg_logits] no scales given");
  for (double s : opts.scales) TCV_CHECK(s > 0, "[seg_logits] scales must be positive, got ", s);
  NoGradGuard no_grad;
  const int64_t H = images.size(2), W = images.size(3);
  if (out_size[0] <= 0 || out_size[1] <= 0) out_size = {H, W};
  auto pass = [&](const Tensor& x) {
    return opts.mode == SegInferMode::slide ? slide(forward, x, opts)
                                            : forward_at_input_size(forward, x);
  };
  Tensor sum;
  int64_t n = 0;
  for (double s : opts.scales) {
    const std::array<int64_t, 2> size{
        std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(H) * s + 0.5)),
        std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(W) * s + 0.5))};
    const Tensor xs = size == std::array<int64_t, 2>{H, W}
                          ? images
                          : ops::upsample(images, size, {.mode = ops::InterpMode::bilinear});
    for (int flip = 0; flip < (opts.flip == FlipTest::on ? 2 : 1); ++flip) {
      Tensor l = flip ? flip_width(pass(flip_width(xs))) : pass(xs);
      if (l.size(2) != out_size[0] || l.size(3) != out_size[1])
        l = ops::upsample(l, out_size, {.mode = ops::InterpMode::bilinear});
      TCV_CHECK(!sum.defined() || l.size(1) == sum.size(1), "[seg_logits] the model gave ",
                l.size(1), " classes at one scale and ", sum.size(1), " at another");
      if (opts.average == SegAverage::probabilities && n_passes(opts) > 1) l = ops::softmax(l, 1);
      sum = sum.defined() ? ops::add(sum, l) : l;
      ++n;
    }
  }
  if (n == 1) return sum;
  return opts.average == SegAverage::probabilities ? ops::log(sum / static_cast<double>(n))
                                                   : sum / static_cast<double>(n);
}

Tensor seg_batch_logits(const SegForward& forward, const Tensor& images,
                        const data::SegBatch& batch, const SegInferOptions& opts) {
  const int64_t B = batch.size();
  TCV_CHECK(images.defined() && images.dim() == 4 && images.size(0) == B,
            "[seg_batch_logits] images ", images.defined() ? images.shape_str() : "undefined",
            " do not match the batch of ", B);
  TCV_CHECK(static_cast<int64_t>(batch.sizes.size()) == B, "[seg_batch_logits] the batch has ",
            batch.sizes.size(), " sizes for ", B, " samples");
  const bool labels = batch.labels.defined();
  const std::array<int64_t, 2> out{labels ? batch.labels.size(1) : images.size(2),
                                   labels ? batch.labels.size(2) : images.size(3)};
  bool whole = batch.uniform();
  if (labels)
    for (const auto& s : batch.label_sizes) whole = whole && s == out;
  if (whole) return seg_logits(forward, images, opts, out);
  Tensor result;  // (B, K, Hl, Wl)
  for (int64_t i = 0; i < B; ++i) {
    const auto [h, w] = batch.sizes[static_cast<size_t>(i)];
    const auto target = labels ? batch.label_sizes[static_cast<size_t>(i)] : batch.sizes[i];
    const Tensor x = images.narrow(0, i, 1).narrow(2, 0, h).narrow(3, 0, w).contiguous();
    const Tensor l = seg_logits(forward, x, opts, target);
    if (!result.defined())
      result = zeros({B, l.size(1), out[0], out[1]}, {.device = images.device()});
    result.narrow(0, i, 1).narrow(2, 0, target[0]).narrow(3, 0, target[1]).copy_(l);
  }
  return result;
}

Tensor seg_predict(const Tensor& logits) {
  TCV_CHECK(logits.defined() && logits.dim() == 4, "[seg_predict] expects logits (B, K, H, W)");
  return ops::argmax(logits, 1);
}

}  // namespace tcv::train
