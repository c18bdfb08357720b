#include "data/pose/scenes.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <optional>
#include <tuple>

#include "data/det/scenes.h"
#include "data/image.h"
#include "data/scene_set.h"

namespace tcv::data {

namespace fs = std::filesystem;

namespace {

constexpr uint8_t kCrowdOwner = 255;
constexpr int64_t kMinPixels = 16;  // a figure with fewer pixels in the image is not placed

struct V2 {
  double x = 0, y = 0;
};
V2 operator+(V2 a, V2 b) {
  return {a.x + b.x, a.y + b.y};
}
V2 operator-(V2 a, V2 b) {
  return {a.x - b.x, a.y - b.y};
}
V2 operator*(double s, V2 a) {
  return {s * a.x, s * a.y};
}

struct Colour {
  double r = 0, g = 0, b = 0;
};

Colour random_colour(Rng& rng, double lo, double hi) {
  return {rng.uniform(lo, hi), rng.uniform(lo, hi), rng.uniform(lo, hi)};
}

const Colour kSkins[] = {{241, 194, 165}, {224, 172, 125}, {198, 134, 66},
                         {141, 85, 36},   {92, 58, 33},    {255, 219, 172}};

// A filled shape of a figure: a capsule (segment a-b of radius r) or, with
// a == b, a disc; drawn in `colour`, striped along `stripe` when `textured`.
struct Shape {
  V2 a, b;
  double r = 1;
  Colour colour;
  bool textured = true;
};

struct Figure {
  std::array<V2, kCocoKeypoints> at{};
  std::array<int, kCocoKeypoints> v{};  // 2 where the keypoint exists, 0 for a hidden face
  std::vector<Shape> shapes;
  double stripe_angle = 0, stripe_period = 8, stripe_phase = 0;
};

// A figure of height hp with its hip centre at `hip`.
Figure make_figure(V2 hip, double hp, double thick, bool back, Rng& rng) {
  Figure f;
  const double lean = std::clamp(rng.normal() * 8.0, -25.0, 25.0) * std::numbers::pi / 180;
  const V2 up{std::sin(lean), -std::cos(lean)}, down = -1.0 * up;
  // The figure's left: the image's right when it faces the camera.
  const V2 left = (back ? -1.0 : 1.0) * V2{std::cos(lean), std::sin(lean)};
  auto dir = [&](double deg, double side) {  // from "down", turned outward by deg
    const double t = deg * std::numbers::pi / 180;
    return std::cos(t) * down + (side * std::sin(t)) * left;
  };
  const V2 neck = hip + (0.30 * hp) * up;
  const V2 head = neck + (0.11 * hp) * up;
  const double head_r = 0.07 * hp;
  auto& a = f.at;
  a[5] = neck + (0.11 * hp) * left;
  a[6] = neck - (0.11 * hp) * left;
  a[11] = hip + (0.075 * hp) * left;
  a[12] = hip - (0.075 * hp) * left;
  a[0] = head - (0.005 * hp) * up;
  a[1] = head + (0.025 * hp) * up + (0.028 * hp) * left;
  a[2] = head + (0.025 * hp) * up - (0.028 * hp) * left;
  a[3] = head + (0.068 * hp) * left;
  a[4] = head - (0.068 * hp) * left;
  for (int s = 0; s < 2; ++s) {
    const double side = s == 0 ? 1.0 : -1.0;
    const double upper = rng.uniform(-20.0, 160.0);
    const double fore = upper + rng.uniform(0.0, 140.0) * (rng.uniform() < 0.5 ? 1 : -1);
    a[static_cast<size_t>(7 + s)] = a[static_cast<size_t>(5 + s)] + (0.16 * hp) * dir(upper, side);
    a[static_cast<size_t>(9 + s)] = a[static_cast<size_t>(7 + s)] + (0.14 * hp) * dir(fore, side);
    const double thigh = rng.uniform(-15.0, 50.0);
    const double shin = thigh + rng.uniform(-50.0, 20.0);
    a[static_cast<size_t>(13 + s)] =
        a[static_cast<size_t>(11 + s)] + (0.24 * hp) * dir(thigh, side);
    a[static_cast<size_t>(15 + s)] = a[static_cast<size_t>(13 + s)] + (0.23 * hp) * dir(shin, side);
  }
  f.v.fill(2);
  if (back) f.v[0] = f.v[1] = f.v[2] = 0;

  const Colour shirt = random_colour(rng, 20, 235), trousers = random_colour(rng, 10, 200);
  const Colour skin = kSkins[rng.randint(0, 6)], hair = random_colour(rng, 10, 90);
  const double r = 0.5 * thick;
  auto capsule = [&](V2 p, V2 q, double rad, Colour c, bool tex = true) {
    f.shapes.push_back({p, q, rad, c, tex});
  };
  for (int s = 0; s < 2; ++s) {  // legs
    const auto k = static_cast<size_t>(s);
    capsule(a[11 + k], a[13 + k], 1.15 * r, trousers);
    capsule(a[13 + k], a[15 + k], 1.1 * r, trousers);
  }
  capsule(hip, neck, 0.085 * hp, shirt);
  capsule(a[11], a[12], 1.15 * r, trousers);
  capsule(a[5], a[6], r, shirt);
  for (int s = 0; s < 2; ++s) {  // arms: sleeves, then bare forearms
    const auto k = static_cast<size_t>(s);
    capsule(a[5 + k], a[7 + k], r, shirt);
    capsule(a[7 + k], a[9 + k], 0.85 * r, skin, false);
  }
  capsule(neck, head, 0.7 * r, skin, false);
  capsule(head, head, head_r, back ? hair : skin, back);
  if (!back) {
    const double dot = std::max(1.0, 0.014 * hp);
    const Colour eye{20, 20, 30}, nose{skin.r * 0.6, skin.g * 0.5, skin.b * 0.5};
    capsule(a[1], a[1], dot, eye, false);
    capsule(a[2], a[2], dot, eye, false);
    capsule(a[0], a[0], dot, nose, false);
  }
  f.stripe_angle = rng.uniform(0.0, std::numbers::pi);
  f.stripe_period = rng.uniform(4.0, 14.0);
  f.stripe_phase = rng.uniform(0.0, 2 * std::numbers::pi);
  return f;
}

// A figure rasterised into the image: pixel indices and their colours.
struct Raster {
  std::vector<int64_t> pixels;
  std::vector<std::array<uint8_t, 3>> rgb;
};

double segment_distance(V2 p, V2 a, V2 b) {
  const V2 ab = b - a, ap = p - a;
  const double len2 = ab.x * ab.x + ab.y * ab.y;
  const double t = len2 > 0 ? std::clamp((ap.x * ab.x + ap.y * ab.y) / len2, 0.0, 1.0) : 0.0;
  const V2 d = ap - t * ab;
  return std::sqrt(d.x * d.x + d.y * d.y);
}

uint8_t to_u8(double v) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0));
}

void rasterize(const Figure& f, int64_t W, int64_t H, int noise, Rng& rng, Raster& out) {
  double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
  for (const Shape& s : f.shapes) {
    x0 = std::min({x0, s.a.x - s.r, s.b.x - s.r});
    y0 = std::min({y0, s.a.y - s.r, s.b.y - s.r});
    x1 = std::max({x1, s.a.x + s.r, s.b.x + s.r});
    y1 = std::max({y1, s.a.y + s.r, s.b.y + s.r});
  }
  const auto c0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(x0)));
  const auto r0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(y0)));
  const auto c1 = std::min<int64_t>(W - 1, static_cast<int64_t>(std::ceil(x1)));
  const auto r1 = std::min<int64_t>(H - 1, static_cast<int64_t>(std::ceil(y1)));
  out.pixels.clear();
  out.rgb.clear();
  if (c0 > c1 || r0 > r1) return;
  const int64_t bw = c1 - c0 + 1, bh = r1 - r0 + 1;
  std::vector<int> which(static_cast<size_t>(bw * bh), -1);  // last shape covering each pixel
  for (size_t k = 0; k < f.shapes.size(); ++k) {
    const Shape& s = f.shapes[k];
    const auto sc0 =
        std::max<int64_t>(c0, static_cast<int64_t>(std::floor(std::min(s.a.x, s.b.x) - s.r)));
    const auto sc1 =
        std::min<int64_t>(c1, static_cast<int64_t>(std::ceil(std::max(s.a.x, s.b.x) + s.r)));
    const auto sr0 =
        std::max<int64_t>(r0, static_cast<int64_t>(std::floor(std::min(s.a.y, s.b.y) - s.r)));
    const auto sr1 =
        std::min<int64_t>(r1, static_cast<int64_t>(std::ceil(std::max(s.a.y, s.b.y) + s.r)));
    for (int64_t y = sr0; y <= sr1; ++y)
      for (int64_t x = sc0; x <= sc1; ++x)
        if (segment_distance({static_cast<double>(x) + 0.5, static_cast<double>(y) + 0.5}, s.a,
                             s.b) <= s.r)
          which[static_cast<size_t>((y - r0) * bw + (x - c0))] = static_cast<int>(k);
  }
  const double ca = std::cos(f.stripe_angle), sa = std::sin(f.stripe_angle);
  const int amp = static_cast<int>(rng.randint(0, noise + 1));
  for (int64_t y = r0; y <= r1; ++y)
    for (int64_t x = c0; x <= c1; ++x) {
      const int k = which[static_cast<size_t>((y - r0) * bw + (x - c0))];
      if (k < 0) continue;
      const Shape& s = f.shapes[static_cast<size_t>(k)];
      double shade = 1.0;
      if (s.textured)
        shade =
            0.8 + 0.2 * std::sin(2 * std::numbers::pi *
                                     (static_cast<double>(x) * ca + static_cast<double>(y) * sa) /
                                     f.stripe_period +
                                 f.stripe_phase);
      auto jitter = [&] { return amp > 0 ? static_cast<double>(rng.randint(-amp, amp + 1)) : 0.0; };
      out.pixels.push_back(y * W + x);
      out.rgb.push_back({to_u8(s.colour.r * shade + jitter()), to_u8(s.colour.g * shade + jitter()),
                         to_u8(s.colour.b * shade + jitter())});
    }
}

void paint(const Raster& r, uint8_t* img, uint8_t* owner, int64_t HW, uint8_t id) {
  for (size_t q = 0; q < r.pixels.size(); ++q) {
    const int64_t p = r.pixels[q];
    img[p] = r.rgb[q][0];
    img[HW + p] = r.rgb[q][1];
    img[2 * HW + p] = r.rgb[q][2];
    owner[p] = id;
  }
}

void check_options(const PoseSceneOptions& o) {
  const char* tag = "[pose scenes]";
  check_scene_size(tag, o.width, o.height);
  check_min_max(tag, "people per scene", "min_people", "max_people", o.min_people, o.max_people, 0,
                false, 200);
  check_min_max(tag, "heights", "min_height", "max_height", o.min_height, o.max_height, 0, true, 3);
  check_min_max(tag, "thickness", "min_thickness", "max_thickness", o.min_thickness,
                o.max_thickness, 0, true, 0.5);
  TCV_CHECK(o.min_visible >= 0 && o.min_visible <= 1 && o.back_p >= 0 && o.back_p <= 1 &&
                o.crowd_p >= 0 && o.crowd_p <= 1,
            "[pose scenes] min_visible, back_p and crowd_p must be in [0, 1]");
  TCV_CHECK(o.max_occluders >= 0 && o.noise >= 0 && o.noise <= 127 && o.tries >= 1,
            "[pose scenes] need max_occluders >= 0, noise in [0, 127] and tries >= 1");
}

}  // namespace

PoseScene render_pose_scene(const PoseSceneOptions& o, Rng& rng) {
  check_options(o);
  const int64_t W = o.width, H = o.height, HW = W * H;
  const double short_side = static_cast<double>(std::min(W, H));
  PoseScene sc;
  sc.image = render_scene_background(W, H, o.noise, rng);
  uint8_t* img = sc.image.data<uint8_t>();
  Tensor owner_t = zeros({H, W}, {.dtype = DType::u8});
  uint8_t* owner = owner_t.data<uint8_t>();
  Raster ras;

  // A crowd of tiny figures behind everything.
  std::optional<Box> crowd;
  if (rng.uniform() < o.crowd_p) {
    const double cw = rng.uniform(0.25, 0.45) * static_cast<double>(W);
    const double ch = rng.uniform(0.12, 0.22) * static_cast<double>(H);
    const double cx = rng.uniform(0.0, static_cast<double>(W) - cw);
    const double cy = rng.uniform(0.0, static_cast<double>(H) - ch);
    const int64_t n = rng.randint(4, 9);
    const double hp = 0.8 * ch;
    for (int64_t k = 0; k < n; ++k) {
      const V2 hip{rng.uniform(cx + 0.1 * hp, cx + cw - 0.1 * hp), cy + 0.5 * ch};
      const Figure f = make_figure(hip, hp, 0.08 * hp, rng.uniform() < o.back_p, rng);
      rasterize(f, W, H, o.noise, rng, ras);
      paint(ras, img, owner, HW, kCrowdOwner);
    }
    crowd = Box{std::floor(cx), std::floor(cy), std::ceil(cx + cw), std::ceil(cy + ch)};
  }

  std::vector<Figure> figures;
  std::vector<int64_t> inside, visible;
  std::vector<int64_t> covered;
  const int64_t n_people = rng.randint(o.min_people, o.max_people + 1);
  for (int64_t t = 0; t < n_people; ++t)
    for (int attempt = 0; attempt < o.tries; ++attempt) {
      const double hp = rng.uniform(o.min_height, o.max_height) * short_side;
      const double thick = rng.uniform(o.min_thickness, o.max_thickness) * hp;
      const V2 hip{rng.uniform(0.05, 0.95) * static_cast<double>(W),
                   rng.uniform(0.1, 0.9) * static_cast<double>(H)};
      Figure f = make_figure(hip, hp, thick, rng.uniform() < o.back_p, rng);
      rasterize(f, W, H, o.noise, rng, ras);
      const auto n = static_cast<int64_t>(ras.pixels.size());
      if (n < kMinPixels) continue;
      covered.assign(figures.size(), 0);
      for (const int64_t p : ras.pixels)
        if (owner[p] && owner[p] != kCrowdOwner) ++covered[owner[p] - 1u];
      bool ok = true;
      for (size_t k = 0; k < figures.size() && ok; ++k)
        ok = static_cast<double>(visible[k] - covered[k]) >=
             o.min_visible * static_cast<double>(inside[k]);
      if (!ok) continue;
      for (size_t k = 0; k < figures.size(); ++k) visible[k] -= covered[k];
      paint(ras, img, owner, HW, static_cast<uint8_t>(figures.size() + 1));
      figures.push_back(std::move(f));
      inside.push_back(n);
      visible.push_back(n);
      break;
    }

  // Occluders: textured rectangles over everything.
  const int64_t n_occ = rng.randint(0, o.max_occluders + 1);
  for (int64_t k = 0; k < n_occ; ++k) {
    Figure f;
    const double len = rng.uniform(0.1, 0.35) * short_side;
    const double th = rng.uniform(0.03, 0.1) * short_side;
    const V2 c{rng.uniform(0.0, static_cast<double>(W)), rng.uniform(0.0, static_cast<double>(H))};
    const double ang = rng.uniform(0.0, std::numbers::pi);
    const V2 d{0.5 * len * std::cos(ang), 0.5 * len * std::sin(ang)};
    f.shapes.push_back({c - d, c + d, th, random_colour(rng, 0, 255), true});
    f.stripe_angle = rng.uniform(0.0, std::numbers::pi);
    f.stripe_period = rng.uniform(3.0, 10.0);
    rasterize(f, W, H, o.noise, rng, ras);
    paint(ras, img, owner, HW, 0);
  }

  // Annotations from the final owners.
  const auto fw = static_cast<double>(W), fh = static_cast<double>(H);
  for (size_t k = 0; k < figures.size(); ++k) {
    const auto id = static_cast<uint8_t>(k + 1);
    CocoPersonAnnotation a;
    for (size_t q = 0; q < static_cast<size_t>(kCocoKeypoints); ++q) {
      const V2 p = figures[k].at[q];
      Keypoint& kp = a.keypoints[q];
      if (figures[k].v[q] == 0 || p.x < 0 || p.y < 0 || p.x >= fw || p.y >= fh) continue;
      const int64_t pix = static_cast<int64_t>(p.y) * W + static_cast<int64_t>(p.x);
      kp = {p.x, p.y, owner[pix] == id ? 2 : 1};
      ++a.num_keypoints;
    }
    int64_t x1 = W, y1 = H, x2 = -1, y2 = -1, count = 0;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        if (owner[y * W + x] == id) {
          x1 = std::min(x1, x);
          x2 = std::max(x2, x);
          y1 = std::min(y1, y);
          y2 = std::max(y2, y);
          ++count;
        }
    if (count == 0) continue;
    a.bbox = {static_cast<double>(x1), static_cast<double>(y1), static_cast<double>(x2 - x1 + 1),
              static_cast<double>(y2 - y1 + 1)};
    a.area = static_cast<double>(count);
    a.segmentation.rle = rle_of(owner_t, id);
    a.segmentation.rle_height = H;
    a.segmentation.rle_width = W;
    sc.people.push_back(std::move(a));
  }
  if (crowd) {
    CocoPersonAnnotation a;
    const Box& b = *crowd;
    a.iscrowd = true;
    a.bbox = {b[0], b[1], b[2] - b[0], b[3] - b[1]};
    a.area = a.bbox[2] * a.bbox[3];
    Tensor region = zeros({H, W}, {.dtype = DType::u8});
    uint8_t* rp = region.data<uint8_t>();
    for (auto y = static_cast<int64_t>(b[1]); y < static_cast<int64_t>(b[3]); ++y)
      for (auto x = static_cast<int64_t>(b[0]); x < static_cast<int64_t>(b[2]); ++x)
        rp[y * W + x] = 1;
    a.segmentation.rle = rle_of(region, 1);
    a.segmentation.rle_height = H;
    a.segmentation.rle_width = W;
    sc.people.push_back(std::move(a));
  }
  return sc;
}

PoseSceneSetSummary write_pose_scene_set(const PoseSceneSetOptions& opts,
                                         const std::string& out_dir) {
  check_options(opts.scene);
  TCV_CHECK(opts.train >= 0 && opts.val >= 0, "[pose scenes] split sizes must be non-negative, ",
            "got train ", opts.train, ", val ", opts.val);
  TCV_CHECK(opts.jpeg_quality >= 1 && opts.jpeg_quality <= 100,
            "[pose scenes] jpeg_quality must be in [1, 100], got ", opts.jpeg_quality);
  const fs::path root(out_dir);
  create_set_dirs(root, {"images", "annotations"});
  const int64_t N = opts.train + opts.val;
  const SceneNames image_name(N);
  std::vector<std::vector<CocoPersonAnnotation>> people(static_cast<size_t>(N));
  parallel_for_scenes(N, [&](int64_t i) {
    Rng rng(opts.seed, static_cast<uint64_t>(i));
    PoseScene s = render_pose_scene(opts.scene, rng);
    write_image((root / "images" / (image_name(i) + ".jpg")).string(), s.image, opts.jpeg_quality);
    people[static_cast<size_t>(i)] = std::move(s.people);
  });

  PoseSceneSetSummary sum;
  sum.images = N;
  int64_t ann_id = 0;
  for (const auto& [name, begin, end] :
       {std::tuple{"train", int64_t{0}, opts.train}, std::tuple{"val", opts.train, N}}) {
    CocoKeypointFile f;
    f.categories.push_back({1, "person", "person"});
    for (int64_t i = begin; i < end; ++i) {
      f.images.push_back({i + 1, image_name(i) + ".jpg", opts.scene.width, opts.scene.height});
      for (CocoPersonAnnotation& a : people[static_cast<size_t>(i)]) {
        a.id = ++ann_id;
        a.image_id = i + 1;
        a.category_id = 1;
        if (a.iscrowd) {
          ++sum.crowds;
        } else {
          ++sum.people;
          sum.labelled += a.num_keypoints;
          for (const Keypoint& k : a.keypoints) sum.visible += k.v == 2;
        }
        f.annotations.push_back(std::move(a));
      }
    }
    write_file(
        (root / "annotations" / ("person_keypoints_" + std::string(name) + ".json")).string(),
        format_coco_keypoints(f));
  }
  return sum;
}

}  // namespace tcv::data
