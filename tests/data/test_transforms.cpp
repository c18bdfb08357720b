#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>

#include "data/dataset.h"
#include "data/transforms.h"

using namespace tcv;
using namespace tcv::data;

namespace {

Tensor u8(const std::vector<int>& v, const Shape& shape) {
  std::vector<uint8_t> b(v.begin(), v.end());
  return from_vector(b, shape);
}

std::vector<int> ints(const Tensor& t) {
  const auto v = t.to(DType::i64).to_vector<int64_t>();
  return std::vector<int>(v.begin(), v.end());
}

// (1, H, W) u8 image with pixel (y, x) = 1 + y * W + x.
Tensor ramp(int64_t H, int64_t W) {
  std::vector<int> v;
  for (int64_t k = 0; k < H * W; ++k) v.push_back(static_cast<int>(1 + k));
  return u8(v, {1, H, W});
}

}  // namespace

TEST(Rng, ReproducibleAndInRange) {
  Rng a(5, 9), b(5, 9), c(5, 10);
  std::vector<double> va, vc;
  for (int i = 0; i < 100; ++i) {
    const double x = a.uniform();
    EXPECT_EQ(x, b.uniform());
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    va.push_back(x);
    vc.push_back(c.uniform());
  }
  EXPECT_NE(va, vc);
  Rng r(1, 2);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const int64_t k = r.randint(3, 7);
    ASSERT_GE(k, 3);
    ASSERT_LT(k, 7);
    seen.insert(k);
  }
  EXPECT_EQ(seen.size(), 4u);
  auto p = r.permutation(10);
  std::sort(p.begin(), p.end());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(p[i], i);
}

TEST(Rng, BetaMoments) {
  Rng r(3, 0);
  const int n = 4000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = r.beta(0.2, 0.2);
    ASSERT_GE(x, 0.0);
    ASSERT_LE(x, 1.0);
    sum += x;
    sq += x * x;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.03);
  EXPECT_NEAR(var, 1.0 / (4.0 * 1.4), 0.02);  // a^2 / ((2a)^2 (2a + 1)) = 1 / (4 (2a + 1))
}

TEST(Transforms, HflipIsExact) {
  const Tensor img = u8({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  EXPECT_EQ(ints(hflip(img)), (std::vector<int>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
  const Tensor f = img.to(DType::f32);
  EXPECT_EQ(hflip(f).dtype(), DType::f32);
  EXPECT_EQ(ints(hflip(f)), ints(hflip(img)));
  RandomHorizontalFlip always{1.0}, never{0.0};
  Rng rng(0, 0);
  EXPECT_EQ(ints(always(img, rng)), ints(hflip(img)));
  EXPECT_EQ(ints(never(img, rng)), ints(img));
}

TEST(Transforms, CenterCropIsExact) {
  const Tensor img = ramp(4, 5);  // values 1..20
  EXPECT_EQ(ints(center_crop(img, 2, 3)), (std::vector<int>{7, 8, 9, 12, 13, 14}));
  // Offsets round half to even, as Python's round: (4 - 1) / 2 = 1.5 -> 2, (6 - 1) / 2 = 2.5 -> 2.
  EXPECT_EQ(ints(center_crop(ramp(4, 1), 1, 1)), (std::vector<int>{3}));
  EXPECT_EQ(ints(center_crop(ramp(6, 1), 1, 1)), (std::vector<int>{3}));
  // Larger than the image: zero padding around it.
  EXPECT_EQ(ints(center_crop(u8({9}, {1, 1, 1}), 3, 3)),
            (std::vector<int>{0, 0, 0, 0, 9, 0, 0, 0, 0}));
  Rng rng(0, 0);
  EXPECT_EQ(CenterCrop{2}(img, rng).shape(), (Shape{1, 2, 2}));
}

TEST(Transforms, ResizeMatchesBilinearByHand) {
  // torch.nn.functional.interpolate(x, size=(4, 4), mode="bilinear", align_corners=False)
  // on [[0, 10], [20, 30]].
  const Tensor f = from_vector(std::vector<float>{0, 10, 20, 30}, {1, 2, 2});
  const std::vector<float> want{0,  2.5,  7.5,  10, 5,  7.5,  12.5, 15,
                                15, 17.5, 22.5, 25, 20, 22.5, 27.5, 30};
  const auto got = resize(f, 4, 4).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  // u8: computed in f32, rounded half to even (torch.round): 2.5 -> 2, 7.5 -> 8, 12.5 -> 12.
  const Tensor u = u8({0, 10, 20, 30}, {1, 2, 2});
  EXPECT_EQ(ints(resize(u, 4, 4)),
            (std::vector<int>{0, 2, 8, 10, 5, 8, 12, 15, 15, 18, 22, 25, 20, 22, 28, 30}));
  // Downscale by 2: source points 0.5 and 2.5.
  EXPECT_EQ(ints(resize(u8({0, 10, 20, 30}, {1, 1, 4}), 1, 2)), (std::vector<int>{5, 25}));
  // Shorter side: (4, 6) -> (2, int(2 * 6 / 4) = 3); (5, 3) -> (int(2 * 5 / 3) = 3, 2).
  EXPECT_EQ(resize_shorter(ramp(4, 6), 2).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(resize_shorter(ramp(5, 3), 2).shape(), (Shape{1, 3, 2}));
  // max_size: 2 x 12 exceeds 8, so (int(8 * 2 / 12) = 1, 8).
  EXPECT_EQ(resize_shorter(ramp(5, 30), 2, 8).shape(), (Shape{1, 1, 8}));
  Rng rng(0, 0);
  EXPECT_EQ((Resize{3, 5})(ramp(4, 6), rng).shape(), (Shape{1, 3, 5}));
}

TEST(Transforms, AntialiasedResizeMatchesPil) {
  // Expected values from PIL 9.4: Image.fromarray(a, "L").resize((w, h), Image.BILINEAR).
  const Tensor a = u8({0, 40, 200, 90, 10, 255, 30, 60, 120, 180, 5, 250, 100, 0, 77}, {1, 3, 5});
  EXPECT_EQ(
      ints(resize(a, 4, 7, Antialias::on)),
      (std::vector<int>{0,   23,  86,  200, 121, 56,  10,  159, 87,  57,  113, 110, 112, 116,
                        161, 133, 102, 75,  75,  104, 141, 5,   145, 207, 100, 29,  33,  77}));
  // b[y][x] = (37 * (8 y + x)) % 256, (6, 8).
  std::vector<int> bv;
  for (int k = 0; k < 48; ++k) bv.push_back(37 * k % 256);
  const Tensor b = u8(bv, {1, 6, 8});
  // Shrinking widens the filter: (6, 8) -> (3, 3).
  EXPECT_EQ(ints(resize(b, 3, 3, Antialias::on)),
            (std::vector<int>{70, 149, 106, 139, 137, 80, 169, 87, 133}));
  // resized_crop = crop((left 2, top 1, w 5, h 4)) then resize, without the copy.
  EXPECT_EQ(ints(resized_crop(b, 1, 2, 4, 5, 3, 2)),
            (std::vector<int>{159, 125, 170, 70, 115, 81}));
  EXPECT_EQ(ints(resized_crop(b, 1, 2, 4, 5, 6, 9)),
            (std::vector<int>{114, 126, 147, 167, 188, 209, 201, 79,  6,   134, 146, 167, 187, 208,
                              158, 107, 57,  26,  161, 173, 194, 195, 192, 94,  20,  41,  53,  187,
                              199, 220, 146, 48,  45,  46,  67,  79,  214, 184, 133, 83,  32,  53,
                              73,  94,  106, 234, 161, 39,  31,  52,  73,  93,  114, 126}));
  EXPECT_EQ(ints(resized_crop(b, 1, 2, 4, 5, 3, 2)),
            ints(resize(crop(b, 1, 2, 4, 5), 3, 2, Antialias::on)));
  // Every channel alike; a window reaching outside the image reads zeros, as crop().
  const Tensor b3 = b.expand({3, 6, 8}).contiguous();
  EXPECT_EQ(ints(resized_crop(b3, 1, 2, 4, 5, 3, 2).select(0, 2)),
            ints(resized_crop(b, 1, 2, 4, 5, 3, 2)));
  EXPECT_EQ(ints(resized_crop(b, -1, 5, 4, 5, 3, 2)),
            ints(resize(crop(b, -1, 5, 4, 5), 3, 2, Antialias::on)));
  // f32 (PIL mode "F"): no rounding.
  const Tensor f = from_vector(std::vector<float>{0, 10, 20, 30}, {1, 2, 2});
  EXPECT_EQ(resize(f, 3, 3, Antialias::on).to_vector<float>(),
            (std::vector<float>{0, 5, 10, 10, 15, 20, 20, 25, 30}));
  EXPECT_EQ(resize(f, 1, 1, Antialias::on).to_vector<float>(), (std::vector<float>{15}));
  // Antialias::off is torch's interpolate: 2 taps, (0 + 10) / 2 and (20 + 30) / 2.
  EXPECT_EQ(ints(resized_crop(u8({0, 10, 20, 30}, {1, 1, 4}), 0, 0, 1, 4, 1, 2, Antialias::off)),
            (std::vector<int>{5, 25}));
}

TEST(Transforms, AntialiasedResizeRowsEqualColumns) {
  // Long rows take the vectorised horizontal pass (16 outputs at a time where the
  // CPU has it); the vertical pass is plain code. Resizing only the width of an
  // image, or only the height of its transpose, must agree exactly.
  std::vector<int> v;
  for (int k = 0; k < 3 * 200; ++k) v.push_back((k * 73 + (k / 7) * 31) % 256);
  const Tensor rows = u8(v, {1, 3, 200});
  const Tensor cols = rows.permute({0, 2, 1}).contiguous();  // (1, 200, 3)
  for (const int64_t n : {17, 40, 64, 150, 224, 250, 600}) {
    const Tensor a = resize(rows, 3, n, Antialias::on);
    const Tensor b = resize(cols, n, 3, Antialias::on).permute({0, 2, 1}).contiguous();
    EXPECT_EQ(ints(a), ints(b)) << "size " << n;
    // And a window of it, reaching the end of the buffer.
    const Tensor c = resized_crop(rows, 1, 37, 2, 163, 2, n);
    const Tensor d = resized_crop(cols, 37, 1, 163, 2, n, 2).permute({0, 2, 1}).contiguous();
    EXPECT_EQ(ints(c), ints(d)) << "size " << n;
  }
}

TEST(Transforms, RandomResizedCropAntialias) {
  const Tensor img = ramp(20, 30);
  const RandomResizedCrop pil{8}, torch{8, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, Antialias::off};
  for (uint64_t s = 0; s < 20; ++s) {
    Rng a(4, s), b(4, s), c(4, s);
    const auto [i, j, h, w] = pil.params(20, 30, c);
    EXPECT_EQ(ints(pil(img, a)), ints(resized_crop(img, i, j, h, w, 8, 8)));
    EXPECT_EQ(ints(torch(img, b)), ints(resize(crop(img, i, j, h, w), 8, 8)));
  }
}

TEST(Transforms, NormalizeAndToFloat) {
  const Tensor img = u8({0, 255, 0, 255}, {2, 1, 2});
  const auto x = normalize(img, {0.5, 0.25}, {0.5, 0.5}).to_vector<float>();
  EXPECT_NEAR(x[0], -1.0, 1e-6);
  EXPECT_NEAR(x[1], 1.0, 1e-6);
  EXPECT_NEAR(x[2], -0.5, 1e-6);
  EXPECT_NEAR(x[3], 1.5, 1e-6);
  EXPECT_NEAR(to_float(u8({51}, {1, 1, 1})).item(), 0.2, 1e-6);
  EXPECT_THROW(normalize(img, {0.1, 0.2, 0.3}, {1.0}), Error);
}

TEST(Transforms, ColorAdjustmentsMatchTorchvision) {
  // Brightness: _blend with zeros, truncated for u8 (0.5 * 103 = 51.5 -> 51).
  EXPECT_EQ(ints(adjust_brightness(u8({100, 200, 103}, {1, 1, 3}), 1.5)),
            (std::vector<int>{150, 255, 154}));
  EXPECT_EQ(ints(adjust_brightness(u8({103}, {1, 1, 1}), 0.5)), (std::vector<int>{51}));
  const auto fb = adjust_brightness(from_vector(std::vector<float>{0.2f, 0.8f}, {1, 1, 2}), 1.5)
                      .to_vector<float>();
  EXPECT_NEAR(fb[0], 0.3f, 1e-6);
  EXPECT_NEAR(fb[1], 1.0f, 1e-6);
  // Contrast: the mean of the u8 (truncated) grayscale: grey(100) = 99, grey(200) = 199,
  // mean 149; 0.5 * 100 + 0.5 * 149 = 124.5 -> 124, 0.5 * 200 + 74.5 -> 174.
  const Tensor two = u8({100, 200, 100, 200, 100, 200}, {3, 1, 2});
  EXPECT_EQ(ints(rgb_to_grayscale(two)), (std::vector<int>{99, 199}));
  EXPECT_EQ(ints(adjust_contrast(two, 0.5)), (std::vector<int>{124, 174, 124, 174, 124, 174}));
  // Saturation: blend with grey 0.2989 * 200 + 0.587 * 100 + 0.114 * 50 = 124.18 -> 124.
  const Tensor px = u8({200, 100, 50}, {3, 1, 1});
  EXPECT_EQ(ints(adjust_saturation(px, 0.0)), (std::vector<int>{124, 124, 124}));
  EXPECT_EQ(ints(adjust_saturation(px, 2.0)), (std::vector<int>{255, 76, 0}));
  EXPECT_EQ(ints(adjust_saturation(u8({7}, {1, 1, 1}), 0.0)), (std::vector<int>{7}));  // grey
  // Hue: red shifted by 1/3 is green, by 1/2 cyan; 0 leaves colours alone.
  const Tensor red = from_vector(std::vector<float>{1, 0, 0}, {3, 1, 1});
  const auto g = adjust_hue(red, 1.0 / 3.0).to_vector<float>();
  EXPECT_NEAR(g[0], 0, 1e-5);
  EXPECT_NEAR(g[1], 1, 1e-5);
  EXPECT_NEAR(g[2], 0, 1e-5);
  EXPECT_EQ(ints(adjust_hue(u8({255, 0, 0}, {3, 1, 1}), 0.5)), (std::vector<int>{0, 255, 255}));
  const Tensor c = from_vector(std::vector<float>{0.9f, 0.3f, 0.5f}, {3, 1, 1});
  const auto same = adjust_hue(c, 0.0).to_vector<float>();
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(same[k], c.to_vector<float>()[k], 1e-5);
  // ColorJitter: reproducible per stream; zero strengths are the identity.
  Rng r1(4, 1), r2(4, 1), r0(4, 1);
  const ColorJitter cj{0.4, 0.4, 0.4, 0.1};
  const Tensor img = u8({10, 200, 30, 90, 60, 120, 250, 5, 77, 140, 33, 180}, {3, 2, 2});
  EXPECT_EQ(ints(cj(img, r1)), ints(cj(img, r2)));
  EXPECT_EQ(ints(ColorJitter{}(img, r0)), ints(img));
}

TEST(Transforms, RandomCropIsAPaddedWindowAndReproducible) {
  const Tensor img = ramp(6, 6);  // no zeros inside
  const Tensor padded = pad(img, 2, 2, 2, 2);
  const RandomCrop rc{6, 2};
  std::set<std::pair<int, int>> offsets;
  for (uint64_t s = 0; s < 40; ++s) {
    Rng a(11, s), b(11, s);
    const auto out = ints(rc(img, a));
    EXPECT_EQ(out, ints(rc(img, b)));
    int found = 0;
    for (int i = 0; i <= 4; ++i)
      for (int j = 0; j <= 4; ++j)
        if (ints(crop(padded, i, j, 6, 6)) == out) {
          offsets.insert({i, j});
          ++found;
        }
    EXPECT_EQ(found, 1);
  }
  EXPECT_GT(offsets.size(), 10u);  // the window moves
  // crop outside the image reads zeros.
  EXPECT_EQ(ints(crop(ramp(2, 2), -1, 1, 2, 2)), (std::vector<int>{0, 0, 2, 0}));
}

TEST(Transforms, RandomResizedCrop) {
  const RandomResizedCrop rrc{8};
  for (uint64_t s = 0; s < 50; ++s) {
    Rng r(2, s);
    const auto [i, j, h, w] = rrc.params(20, 30, r);
    ASSERT_GT(h, 0);
    ASSERT_GT(w, 0);
    ASSERT_LE(i + h, 20);
    ASSERT_LE(j + w, 30);
    const double area = static_cast<double>(h * w) / 600.0, ratio = static_cast<double>(w) / h;
    EXPECT_GE(area, 0.08 - 0.02);
    EXPECT_GE(ratio, 0.75 - 0.1);
    EXPECT_LE(ratio, 4.0 / 3.0 + 0.1);
  }
  // Impossible scale: all 10 tries fail, then the central crop at the closest ratio.
  Rng r(0, 0);
  const RandomResizedCrop wide{4, {1.5, 2.0}, {2.0, 3.0}};
  const auto p = wide.params(10, 10, r);
  EXPECT_EQ(p, (std::array<int64_t, 4>{2, 0, 5, 10}));
  const RandomResizedCrop square{4, {1.5, 2.0}, {0.75, 4.0 / 3.0}};
  EXPECT_EQ(square.params(10, 10, r), (std::array<int64_t, 4>{0, 0, 10, 10}));
  EXPECT_EQ(rrc(ramp(20, 30), r).shape(), (Shape{1, 8, 8}));
}

TEST(Transforms, MixupAndLabelSmoothing) {
  const auto oh = one_hot(from_vector(std::vector<int64_t>{2, 0}), 4, 0.1).to_vector<float>();
  EXPECT_NEAR(oh[2], 0.925f, 1e-6);
  EXPECT_NEAR(oh[0], 0.025f, 1e-6);
  EXPECT_NEAR(oh[4], 0.925f, 1e-6);
  Tensor x = from_vector(std::vector<float>{0, 0, 1, 1}, {2, 1, 1, 2});
  Tensor y = from_vector(std::vector<int64_t>{0, 1});
  Rng rng(9, 9);
  const double lam = mixup(x, y, 2, 0.4, rng);
  ASSERT_GE(lam, 0.0);
  ASSERT_LE(lam, 1.0);
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  // Sample 0 mixes with sample 1 (roll by one) and vice versa.
  EXPECT_NEAR(xv[0], 1 - lam, 1e-6);
  EXPECT_NEAR(xv[2], lam, 1e-6);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_NEAR(yv[0], lam, 1e-6);
  EXPECT_NEAR(yv[1], 1 - lam, 1e-6);
  EXPECT_NEAR(yv[2], 1 - lam, 1e-6);
  EXPECT_NEAR(yv[3], lam, 1e-6);
  Rng again(9, 9);
  EXPECT_EQ(again.beta(0.4, 0.4), lam);
}

TEST(Loader, AugmentedBatchesIndependentOfWorkerCount) {
  const int64_t n = 37;
  std::vector<uint8_t> px;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3 * 8 * 8; ++k) px.push_back(static_cast<uint8_t>((i * 13 + k) % 251 + 1));
    y.push_back(i % 5);
  }
  auto mem = std::make_shared<ImageClassificationDataset>(from_vector(px, {n, 3, 8, 8}),
                                                          from_vector(y, {n}), 5, "toy");
  const Compose aug({RandomCrop{6, 2}, RandomHorizontalFlip{}, ColorJitter{0.3, 0.3, 0.3, 0.0},
                     ToFloat{}, NormalizeImage{{0.5}, {0.25}}});
  auto ds = std::make_shared<InMemoryDataset>(mem, aug);
  auto run = [&](int workers, int64_t epoch) {
    DataLoader loader(ds, {.batch_size = 8,
                           .shuffle = true,
                           .drop_last = false,
                           .workers = workers,
                           .seed = 3,
                           .normalize = {},
                           .prefetch = 2});
    loader.start_epoch(epoch);
    std::vector<float> xs;
    std::vector<int64_t> ys;
    Batch b;
    while (loader.next(b)) {
      EXPECT_EQ(b.x.size(1), 3);
      EXPECT_EQ(b.x.size(2), 6);
      const auto xv = b.x.to_vector<float>();
      const auto yv = b.y.to_vector<int64_t>();
      xs.insert(xs.end(), xv.begin(), xv.end());
      ys.insert(ys.end(), yv.begin(), yv.end());
    }
    EXPECT_EQ(static_cast<int64_t>(ys.size()), n);
    return std::make_pair(xs, ys);
  };
  const auto a0 = run(0, 0), a1 = run(1, 0), a4 = run(4, 0), e1 = run(4, 1);
  EXPECT_EQ(a0, a1);
  EXPECT_EQ(a1, a4);
  EXPECT_NE(a4.first, e1.first);
  // Labels follow the sampler's order.
  const auto order = EpochSampler(n, 3, true).indices(0);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a0.second[i], order[i] % 5);
}

TEST(Loader, DeferredFlipAndNormalizeEqualTheTransforms) {
  const int64_t n = 11;
  std::vector<uint8_t> px;
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 3 * 12 * 10; ++k)
      px.push_back(static_cast<uint8_t>((i * 29 + k * 7) % 256));
  auto mem = std::make_shared<ImageClassificationDataset>(
      from_vector(px, {n, 3, 12, 10}), from_vector(std::vector<int64_t>(n, 1), {n}), 2, "toy");
  const std::vector<Compose> pipelines{
      Compose({RandomResizedCrop{7}, RandomHorizontalFlip{},
               NormalizeImage{{0.4, 0.5, 0.6}, {0.2, 0.3, 0.25}}}),
      Compose({RandomResizedCrop{7}, RandomHorizontalFlip{0.7}, ToFloat{}}),
      Compose({RandomResizedCrop{7}, ToFloat{}, NormalizeImage{{0.5}, {0.2}}}),
      Compose({RandomResizedCrop{7}, RandomHorizontalFlip{}}),  // u8: the loader's normalize
      Compose({RandomHorizontalFlip{}, ToFloat{}, NormalizeImage{{0.5}, {0.2}}}),
  };
  for (size_t p = 0; p < pipelines.size(); ++p) {
    const Compose& c = pipelines[p];
    // The same transform behind a lambda: the loader cannot look into it, so
    // nothing is deferred.
    const Transform opaque = [c](const Tensor& img, Rng& rng) { return c(img, rng); };
    auto batches = [&](const Transform& t) {
      DataLoader loader(std::make_shared<InMemoryDataset>(mem, t),
                        {.batch_size = 4, .seed = 7, .normalize = {255.0, {0.3}, {0.5}}});
      loader.start_epoch(1);
      std::vector<float> xs;
      Batch b;
      while (loader.next(b)) {
        const auto v = b.x.to_vector<float>();
        xs.insert(xs.end(), v.begin(), v.end());
      }
      return xs;
    };
    const auto fused = batches(c), plain = batches(opaque);
    ASSERT_EQ(fused.size(), static_cast<size_t>(n * 3 * (p == 4 ? 120 : 49))) << p;
    EXPECT_EQ(fused, plain) << "pipeline " << p;  // bit for bit
  }
  // apply_deferring leaves the tail undone on u8 images only.
  Rng r1(1, 1), r2(1, 1);
  Deferred d;
  const Tensor img = mem->images().select(0, 3);
  const Tensor kept = pipelines[0].apply_deferring(img, r1, d);
  EXPECT_EQ(kept.dtype(), DType::u8);
  EXPECT_TRUE(d.normalize);
  Tensor manual = d.flip ? hflip(kept) : kept;
  EXPECT_EQ(normalize(manual, d.mean, d.std).to_vector<float>(),
            pipelines[0](img, r2).to_vector<float>());
  Rng r3(1, 1);
  const Tensor f = pipelines[0].apply_deferring(img.to(DType::f32), r3, d);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_FALSE(d.normalize);
}
