#include "data/det/scenes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>

#include "data/dataset.h"
#include "data/det/coco.h"
#include "data/det/voc.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/scene_set.h"

namespace tcv::data {

namespace fs = std::filesystem;

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names{"t-shirt", "trouser",   "pullover", "dress",
                                              "coat",    "sandal",    "shirt",    "sneaker",
                                              "bag",     "ankle-boot"};
  return names;
}

namespace {

constexpr int64_t kMinPixels = 16;  // an item with fewer pixels in the image is not placed

struct Rgb {
  float r = 0, g = 0, b = 0;
};

Rgb random_rgb(Rng& rng) {
  return {static_cast<float>(rng.randint(0, 256)), static_cast<float>(rng.randint(0, 256)),
          static_cast<float>(rng.randint(0, 256))};
}

// A saturated, bright colour: hue anywhere, saturation and value in their upper half.
Rgb random_tint(Rng& rng) {
  const double h = rng.uniform(0.0, 6.0), s = rng.uniform(0.5, 1.0), v = rng.uniform(0.6, 1.0);
  const int i = static_cast<int>(h) % 6;
  const double f = h - std::floor(h), p = v * (1 - s), q = v * (1 - s * f),
               t = v * (1 - s * (1 - f));
  const double rr[6] = {v, q, p, p, t, v}, gg[6] = {t, v, v, q, p, p}, bb[6] = {p, p, t, v, v, q};
  return {static_cast<float>(255 * rr[i]), static_cast<float>(255 * gg[i]),
          static_cast<float>(255 * bb[i])};
}

uint8_t to_u8(float v) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f));
}

// Uniform integer noise in [-amp, amp] from random bytes, four per draw.
class Noise {
 public:
  Noise(Rng& rng, int amp) : rng_(rng), amp_(amp) {}
  float next() {
    if (amp_ == 0) return 0.0f;
    if (left_ == 0) {
      word_ = rng_.next_u32();
      left_ = 4;
    }
    const uint32_t b = word_ & 0xFF;
    word_ >>= 8;
    --left_;
    return static_cast<float>(static_cast<int>((b * static_cast<uint32_t>(2 * amp_ + 1)) >> 8) -
                              amp_);
  }

 private:
  Rng& rng_;
  int amp_;
  uint32_t word_ = 0;
  int left_ = 0;
};

void draw_background(uint8_t* img, int64_t W, int64_t H, Rng& rng, Noise& noise) {
  const Rgb c0 = random_rgb(rng), c1 = random_rgb(rng), c2 = random_rgb(rng);
  const double theta = rng.uniform(0.0, 2 * std::numbers::pi);
  const double half_diag = 0.5 * std::hypot(static_cast<double>(W), static_cast<double>(H));
  const int64_t kind = rng.randint(0, 3);
  const double alpha = rng.uniform(0.2, 0.6);
  const double phi = rng.uniform(0.0, std::numbers::pi);
  const double period = rng.uniform(6.0, 40.0), cell = rng.uniform(8.0, 48.0);
  const int64_t G = rng.randint(3, 9);  // blob grid cells per side
  std::vector<double> nodes(static_cast<size_t>((G + 1) * (G + 1)));
  for (double& v : nodes) v = rng.uniform();
  const double cp = std::cos(phi), sp = std::sin(phi), ct = std::cos(theta), st = std::sin(theta);
  const int64_t HW = W * H;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const double fx = static_cast<double>(x) + 0.5, fy = static_cast<double>(y) + 0.5;
      const double g =
          std::clamp(0.5 + 0.5 * ((fx - 0.5 * W) * ct + (fy - 0.5 * H) * st) / half_diag, 0.0, 1.0);
      double s = 0;
      if (kind == 0) {
        s = 0.5 + 0.5 * std::sin(2 * std::numbers::pi * (fx * cp + fy * sp) / period);
      } else if (kind == 1) {
        const auto a = static_cast<int64_t>(std::floor((fx * cp + fy * sp) / cell));
        const auto b = static_cast<int64_t>(std::floor((-fx * sp + fy * cp) / cell));
        s = static_cast<double>((a + b) & 1);
      } else {
        const double u = fx / static_cast<double>(W) * static_cast<double>(G);
        const double v = fy / static_cast<double>(H) * static_cast<double>(G);
        const auto i = std::min<int64_t>(static_cast<int64_t>(u), G - 1);
        const auto j = std::min<int64_t>(static_cast<int64_t>(v), G - 1);
        const double du = u - static_cast<double>(i), dv = v - static_cast<double>(j);
        auto at = [&](int64_t a, int64_t b) { return nodes[static_cast<size_t>(b * (G + 1) + a)]; };
        s = (1 - dv) * ((1 - du) * at(i, j) + du * at(i + 1, j)) +
            dv * ((1 - du) * at(i, j + 1) + du * at(i + 1, j + 1));
      }
      const auto w = static_cast<float>(alpha * s), gf = static_cast<float>(g);
      const int64_t p = y * W + x;
      img[p] = to_u8(((1 - gf) * c0.r + gf * c1.r) * (1 - w) + c2.r * w + noise.next());
      img[HW + p] = to_u8(((1 - gf) * c0.g + gf * c1.g) * (1 - w) + c2.g * w + noise.next());
      img[2 * HW + p] = to_u8(((1 - gf) * c0.b + gf * c1.b) * (1 - w) + c2.b * w + noise.next());
    }
}

// The pixels an item covers when scaled to (w, h) with its top-left corner at
// (x0, y0): `pixels` inside the image (with the item's grey level in `grey`),
// `total` counting those outside too.
struct Raster {
  std::vector<int64_t> pixels;
  std::vector<uint8_t> grey;
  int64_t total = 0;
};

void rasterize(const uint8_t* item, int64_t S, int64_t x0, int64_t y0, int64_t w, int64_t h,
               int coverage, int64_t W, int64_t H, Raster& out) {
  out.pixels.clear();
  out.grey.clear();
  out.total = 0;
  // Bilinear taps per column and row (half-pixel centres, zero outside the item).
  auto taps = [S](int64_t n, std::vector<int64_t>& i0, std::vector<float>& f) {
    i0.resize(static_cast<size_t>(n));
    f.resize(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) {
      const double src =
          (static_cast<double>(o) + 0.5) * static_cast<double>(S) / static_cast<double>(n) - 0.5;
      const double fl = std::floor(src);
      i0[static_cast<size_t>(o)] = static_cast<int64_t>(fl);
      f[static_cast<size_t>(o)] = static_cast<float>(src - fl);
    }
  };
  thread_local std::vector<int64_t> cx, cy;
  thread_local std::vector<float> fx, fy;
  taps(w, cx, fx);
  taps(h, cy, fy);
  auto at = [&](int64_t r, int64_t c) -> float {
    return r >= 0 && r < S && c >= 0 && c < S ? static_cast<float>(item[r * S + c]) : 0.0f;
  };
  for (int64_t j = 0; j < h; ++j) {
    const int64_t r = cy[static_cast<size_t>(j)];
    const float b = fy[static_cast<size_t>(j)];
    const int64_t y = y0 + j;
    for (int64_t i = 0; i < w; ++i) {
      const int64_t c = cx[static_cast<size_t>(i)];
      const float a = fx[static_cast<size_t>(i)];
      const float v = (1 - b) * ((1 - a) * at(r, c) + a * at(r, c + 1)) +
                      b * ((1 - a) * at(r + 1, c) + a * at(r + 1, c + 1));
      const auto g = static_cast<int>(std::nearbyint(v));
      if (g < coverage) continue;
      ++out.total;
      const int64_t x = x0 + i;
      if (x < 0 || x >= W || y < 0 || y >= H) continue;
      out.pixels.push_back(y * W + x);
      out.grey.push_back(static_cast<uint8_t>(std::min(g, 255)));
    }
  }
}

void check_scene_options(const SceneOptions& o) {
  check_scene_size("[scenes]", o.width, o.height);
  check_min_max("[scenes]", "objects per scene", "min_objects", "max_objects", o.min_objects,
                o.max_objects, 0, false, 254);
  check_min_max("[scenes]", "scales", "min_scale", "max_scale", o.min_scale, o.max_scale, 0, true,
                2);
  TCV_CHECK(o.max_aspect >= 1 && o.max_aspect <= 4, "[scenes] max_aspect must be in [1, 4], got ",
            o.max_aspect);
  TCV_CHECK(o.coverage >= 1 && o.coverage <= 255, "[scenes] coverage must be in [1, 255], got ",
            o.coverage);
  TCV_CHECK(o.min_visible >= 0 && o.min_visible <= 1 && o.difficult_below >= 0 &&
                o.difficult_below <= 1 && o.max_outside >= 0 && o.max_outside < 1,
            "[scenes] min_visible and difficult_below must be in [0, 1] and max_outside in "
            "[0, 1), got ",
            o.min_visible, ", ", o.difficult_below, ", ", o.max_outside);
  TCV_CHECK(o.noise >= 0 && o.noise <= 127, "[scenes] noise must be in [0, 127], got ", o.noise);
  TCV_CHECK(o.border >= 0 && o.border <= 16, "[scenes] border must be in [0, 16], got ", o.border);
  TCV_CHECK(o.tries >= 1, "[scenes] tries must be at least 1, got ", o.tries);
}

}  // namespace

SceneRenderer::SceneRenderer(Tensor items, Tensor labels, SceneOptions opts)
    : opts_(std::move(opts)) {
  check_scene_options(opts_);
  TCV_CHECK(items.dtype() == DType::u8 && items.dim() == 3 && items.size(1) == items.size(2) &&
                items.size(0) > 0,
            "[scenes] items must be u8 (N, S, S) with N > 0, got ", dtype_name(items.dtype()), " ",
            items.shape_str());
  TCV_CHECK(labels.dim() == 1 && labels.size(0) == items.size(0), "[scenes] ", items.size(0),
            " items but labels ", labels.shape_str());
  items_ = items.contiguous();
  labels_ = labels.to(DType::i64).contiguous();
  const int64_t* l = labels_.data<int64_t>();
  for (int64_t i = 0; i < labels_.numel(); ++i)
    TCV_CHECK(l[i] >= 0 && l[i] < 10, "[scenes] item ", i, " has label ", l[i],
              ", outside [0, 10)");
}

Scene SceneRenderer::render(Rng& rng, bool keep_background) const {
  const SceneOptions& o = opts_;
  const int64_t W = o.width, H = o.height, HW = W * H;
  const int64_t S = items_.size(1), N = items_.size(0);
  Scene sc;
  sc.image = empty({3, H, W}, {.dtype = DType::u8});
  uint8_t* img = sc.image.data<uint8_t>();
  Noise noise(rng, static_cast<int>(rng.randint(0, o.noise + 1)));
  draw_background(img, W, H, rng, noise);
  if (keep_background) sc.background = sc.image.clone();
  sc.owner = zeros({H, W}, {.dtype = DType::u8});
  uint8_t* own = sc.owner.data<uint8_t>();

  std::vector<int64_t> visible;  // per object drawn so far
  std::vector<int64_t> covered;
  Raster ras;
  const int64_t n_items = rng.randint(o.min_objects, o.max_objects + 1);
  const double short_side = static_cast<double>(std::min(W, H));
  for (int64_t t = 0; t < n_items; ++t) {
    for (int attempt = 0; attempt < o.tries; ++attempt) {
      const int64_t item = rng.randint(0, N);
      const double side = rng.uniform(o.min_scale, o.max_scale) * short_side;
      const double aspect = std::exp(rng.uniform(-std::log(o.max_aspect), std::log(o.max_aspect)));
      const double sw = side * std::min(1.0, aspect), sh = side * std::min(1.0, 1.0 / aspect);
      const int64_t w = std::max<int64_t>(4, std::llround(sw));
      const int64_t h = std::max<int64_t>(4, std::llround(sh));
      // Up to a third of the item may start beyond each border; max_outside decides.
      const int64_t x0 = rng.randint(-w / 3, std::max<int64_t>(W - 2 * w / 3, -w / 3 + 1));
      const int64_t y0 = rng.randint(-h / 3, std::max<int64_t>(H - 2 * h / 3, -h / 3 + 1));
      const Rgb tint = random_tint(rng);
      rasterize(items_.data<uint8_t>() + item * S * S, S, x0, y0, w, h, o.coverage, W, H, ras);
      const auto inside = static_cast<int64_t>(ras.pixels.size());
      if (inside < kMinPixels ||
          static_cast<double>(inside) < (1.0 - o.max_outside) * static_cast<double>(ras.total))
        continue;
      // Every earlier object must keep min_visible of its in-image pixels.
      covered.assign(visible.size(), 0);
      for (const int64_t p : ras.pixels)
        if (own[p]) ++covered[own[p] - 1];
      bool ok = true;
      for (size_t k = 0; k < visible.size() && ok; ++k)
        ok = static_cast<double>(visible[k] - covered[k]) >=
             o.min_visible * static_cast<double>(sc.objects[k].inside);
      if (!ok) continue;
      for (size_t k = 0; k < visible.size(); ++k) visible[k] -= covered[k];
      const auto id = static_cast<uint8_t>(sc.objects.size() + 1);
      for (size_t q = 0; q < ras.pixels.size(); ++q) {
        const int64_t p = ras.pixels[q];
        const float shade = 0.3f + 0.7f * static_cast<float>(ras.grey[q]) / 255.0f;
        img[p] = to_u8(tint.r * shade + noise.next());
        img[HW + p] = to_u8(tint.g * shade + noise.next());
        img[2 * HW + p] = to_u8(tint.b * shade + noise.next());
        own[p] = id;
      }
      SceneObject obj;
      obj.label = labels_.data<int64_t>()[item] + 1;
      obj.inside = inside;
      obj.truncated = inside < ras.total;
      obj.item = item;
      sc.objects.push_back(obj);
      visible.push_back(inside);
      break;
    }
  }

  // Boxes and counts from the final owners.
  const size_t n = sc.objects.size();
  std::vector<int64_t> x1(n, W), y1(n, H), x2(n, -1), y2(n, -1), count(n, 0);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const uint8_t id = own[y * W + x];
      if (!id) continue;
      const size_t k = id - 1u;
      x1[k] = std::min(x1[k], x);
      x2[k] = std::max(x2[k], x);
      y1[k] = std::min(y1[k], y);
      y2[k] = std::max(y2[k], y);
      ++count[k];
    }
  for (size_t k = 0; k < n; ++k) {
    SceneObject& obj = sc.objects[k];
    obj.visible = count[k];
    obj.box = {static_cast<double>(x1[k]), static_cast<double>(y1[k]),
               static_cast<double>(x2[k] + 1), static_cast<double>(y2[k] + 1)};
    obj.difficult =
        static_cast<double>(obj.visible) < o.difficult_below * static_cast<double>(obj.inside);
  }

  sc.instances = mark_borders(sc.owner, o.border);
  sc.classes = empty({H, W}, {.dtype = DType::u8});
  const uint8_t* inst = sc.instances.data<uint8_t>();
  uint8_t* cls = sc.classes.data<uint8_t>();
  for (int64_t p = 0; p < HW; ++p)
    cls[p] = inst[p] == 0 || inst[p] == 255 ? inst[p]
                                            : static_cast<uint8_t>(sc.objects[inst[p] - 1u].label);
  return sc;
}

Tensor render_scene_background(int64_t width, int64_t height, int noise_amplitude, Rng& rng) {
  TCV_CHECK(width > 0 && height > 0 && noise_amplitude >= 0 && noise_amplitude <= 127,
            "[scenes] background of ", width, "x", height, " with noise ", noise_amplitude,
            ": need a positive size and noise in [0, 127]");
  Tensor image = empty({3, height, width}, {.dtype = DType::u8});
  Noise noise(rng, static_cast<int>(rng.randint(0, noise_amplitude + 1)));
  draw_background(image.data<uint8_t>(), width, height, rng, noise);
  return image;
}

Tensor mark_borders(const Tensor& ids, int radius) {
  TCV_CHECK(ids.dtype() == DType::u8 && ids.dim() == 2, "[mark_borders] expects u8 (H, W), got ",
            dtype_name(ids.dtype()), " ", ids.shape_str());
  TCV_CHECK(radius >= 0, "[mark_borders] radius must be non-negative, got ", radius);
  const Tensor src = ids.contiguous();
  Tensor out = src.clone();
  if (radius == 0) return out;
  const int64_t H = src.size(0), W = src.size(1);
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  // A pixel differing from its right or lower neighbour puts both within
  // distance 1 of another value; a radius r marks the (2r - 1)-wide square around
  // each such pair's pixels.
  std::vector<uint8_t> edge(static_cast<size_t>(H * W), 0);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const uint8_t v = s[y * W + x];
      if (x + 1 < W && s[y * W + x + 1] != v) edge[y * W + x] = edge[y * W + x + 1] = 1;
      if (y + 1 < H && s[(y + 1) * W + x] != v) edge[y * W + x] = edge[(y + 1) * W + x] = 1;
      if (x + 1 < W && y + 1 < H && s[(y + 1) * W + x + 1] != v)
        edge[y * W + x] = edge[(y + 1) * W + x + 1] = 1;
      if (x > 0 && y + 1 < H && s[(y + 1) * W + x - 1] != v)
        edge[y * W + x] = edge[(y + 1) * W + x - 1] = 1;
    }
  const int64_t r = radius - 1;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      if (!edge[y * W + x]) continue;
      for (int64_t yy = std::max<int64_t>(0, y - r); yy <= std::min(H - 1, y + r); ++yy)
        for (int64_t xx = std::max<int64_t>(0, x - r); xx <= std::min(W - 1, x + r); ++xx)
          d[yy * W + xx] = 255;
    }
  return out;
}

std::vector<int64_t> rle_of(const Tensor& ids, uint8_t value) {
  TCV_CHECK(ids.dtype() == DType::u8 && ids.dim() == 2, "[rle_of] expects u8 (H, W), got ",
            dtype_name(ids.dtype()), " ", ids.shape_str());
  const Tensor src = ids.contiguous();
  const int64_t H = src.size(0), W = src.size(1);
  const uint8_t* s = src.data<uint8_t>();
  std::vector<int64_t> counts;
  bool state = false;
  int64_t run = 0;
  for (int64_t x = 0; x < W; ++x)
    for (int64_t y = 0; y < H; ++y) {
      const bool v = s[y * W + x] == value;
      if (v != state) {
        counts.push_back(run);
        run = 0;
        state = v;
      }
      ++run;
    }
  counts.push_back(run);
  return counts;
}

SceneSetSummary write_scene_set(const SceneSetOptions& opts, const std::string& out_dir) {
  check_scene_options(opts.scene);
  TCV_CHECK(opts.train >= 0 && opts.val >= 0 && opts.test >= 0,
            "[scenes] split sizes must be non-negative, got train ", opts.train, ", val ", opts.val,
            ", test ", opts.test);
  TCV_CHECK(opts.jpeg_quality >= 1 && opts.jpeg_quality <= 100,
            "[scenes] jpeg_quality must be in [1, 100], got ", opts.jpeg_quality);
  const IdxFiles files = find_idx_files(opts.fmnist_dir);
  const int64_t N = opts.train + opts.val + opts.test;
  // Each split's renderer loads only the items it needs.
  std::unique_ptr<SceneRenderer> train_r, test_r;
  if (opts.train > 0)
    train_r = std::make_unique<SceneRenderer>(read_idx(files.train_images),
                                              read_idx(files.train_labels), opts.scene);
  if (opts.val + opts.test > 0)
    test_r = std::make_unique<SceneRenderer>(read_idx(files.test_images),
                                             read_idx(files.test_labels), opts.scene);

  const fs::path root(out_dir);
  create_set_dirs(root, {"JPEGImages", "Annotations", "SegmentationClass", "SegmentationObject",
                         "ImageSets/Main", "ImageSets/Segmentation", "annotations"});
  const SceneNames image_name(N);
  const auto& classes = fashion_mnist_classes();

  std::vector<std::vector<SceneObject>> objects(static_cast<size_t>(N));
  std::vector<std::vector<std::vector<int64_t>>> rles(static_cast<size_t>(N));
  parallel_for_scenes(N, [&](int64_t i) {
    Rng rng(opts.seed, static_cast<uint64_t>(i));
    const SceneRenderer& r = i < opts.train ? *train_r : *test_r;
    Scene s = r.render(rng);
    const std::string id = image_name(i);
    write_image((root / "JPEGImages" / (id + ".jpg")).string(), s.image, opts.jpeg_quality);
    write_png_indexed((root / "SegmentationClass" / (id + ".png")).string(), s.classes,
                      voc_palette());
    write_png_indexed((root / "SegmentationObject" / (id + ".png")).string(), s.instances,
                      voc_palette());
    VocAnnotation a;
    a.folder = root.filename().string();
    a.filename = id + ".jpg";
    a.width = opts.scene.width;
    a.height = opts.scene.height;
    a.segmented = true;
    auto& rle = rles[static_cast<size_t>(i)];
    for (size_t k = 0; k < s.objects.size(); ++k) {
      const SceneObject& o = s.objects[k];
      VocObject v;
      v.name = classes[static_cast<size_t>(o.label - 1)];
      v.truncated = o.truncated;
      v.difficult = o.difficult;
      v.xmin = o.box[0] + 1;
      v.ymin = o.box[1] + 1;
      v.xmax = o.box[2];
      v.ymax = o.box[3];
      a.objects.push_back(v);
      rle.push_back(rle_of(s.owner, static_cast<uint8_t>(k + 1)));
    }
    write_file((root / "Annotations" / (id + ".xml")).string(), format_voc_annotation(a));
    objects[static_cast<size_t>(i)] = std::move(s.objects);
  });

  // Lists and COCO files per split.
  struct Split {
    const char* name;
    int64_t begin, end;
  };
  const Split splits[] = {{"train", 0, opts.train},
                          {"val", opts.train, opts.train + opts.val},
                          {"trainval", 0, opts.train + opts.val},
                          {"test", opts.train + opts.val, N}};
  SceneSetSummary sum;
  sum.images = N;
  int64_t ann_id = 0;
  std::vector<int64_t> first_ann(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    first_ann[static_cast<size_t>(i)] = ann_id + 1;
    for (const SceneObject& o : objects[static_cast<size_t>(i)]) {
      ++ann_id;
      ++sum.objects;
      sum.difficult += o.difficult;
      sum.truncated += o.truncated;
    }
  }
  for (const Split& sp : splits) {
    std::string list;
    std::vector<std::string> per_class(classes.size());
    for (int64_t i = sp.begin; i < sp.end; ++i) {
      const std::string id = image_name(i);
      list += id + "\n";
      for (size_t c = 0; c < classes.size(); ++c) {
        int flag = -1;
        for (const SceneObject& o : objects[static_cast<size_t>(i)])
          if (o.label == static_cast<int64_t>(c) + 1) flag = std::max(flag, o.difficult ? 0 : 1);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s %2d\n", id.c_str(), flag);
        per_class[c] += buf;
      }
    }
    write_file((root / "ImageSets/Main" / (std::string(sp.name) + ".txt")).string(), list);
    write_file((root / "ImageSets/Segmentation" / (std::string(sp.name) + ".txt")).string(), list);
    for (size_t c = 0; c < classes.size(); ++c)
      write_file((root / "ImageSets/Main" / (classes[c] + "_" + sp.name + ".txt")).string(),
                 per_class[c]);
    if (std::string(sp.name) == "trainval") continue;
    CocoFile f;
    for (size_t c = 0; c < classes.size(); ++c)
      f.categories.push_back({static_cast<int64_t>(c) + 1, classes[c], "fashion"});
    for (int64_t i = sp.begin; i < sp.end; ++i) {
      f.images.push_back({i + 1, image_name(i) + ".jpg", opts.scene.width, opts.scene.height});
      const auto& objs = objects[static_cast<size_t>(i)];
      for (size_t k = 0; k < objs.size(); ++k) {
        const SceneObject& o = objs[k];
        CocoObject c;
        c.id = first_ann[static_cast<size_t>(i)] + static_cast<int64_t>(k);
        c.image_id = i + 1;
        c.category_id = o.label;
        c.bbox = {o.box[0], o.box[1], o.box[2] - o.box[0], o.box[3] - o.box[1]};
        c.area = static_cast<double>(o.visible);
        c.rle_counts = std::move(rles[static_cast<size_t>(i)][k]);
        f.annotations.push_back(std::move(c));
      }
    }
    write_file((root / "annotations" / ("instances_" + std::string(sp.name) + ".json")).string(),
               format_coco(f));
  }
  std::string names;
  for (const auto& c : classes) names += c + "\n";
  write_file((root / "classes.txt").string(), names);
  return sum;
}

}  // namespace tcv::data
