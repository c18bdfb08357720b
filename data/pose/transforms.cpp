#include "data/pose/transforms.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tcv::data {

namespace {

void check_image(const PoseSample& s, const char* op) {
  TCV_CHECK(s.image.defined() && s.image.dtype() == DType::u8 && s.image.dim() == 3 &&
                s.image.size(0) == 3,
            "[", op, "] expects a u8 (3, H, W) image, got ",
            s.image.defined() ? dtype_name(s.image.dtype()) : "undefined", " ",
            s.image.defined() ? s.image.shape_str() : "");
  TCV_CHECK(
      !s.mask.defined() || (s.mask.dtype() == DType::u8 && s.mask.dim() == 2 &&
                            s.mask.size(0) == s.image.size(1) && s.mask.size(1) == s.image.size(2)),
      "[", op, "] the mask must be u8 (H, W) like the ", s.image.shape_str(), " image, got ",
      s.mask.defined() ? s.mask.shape_str() : "");
}

Box map_box(const Box& b, const Affine& m) {
  const double xs[4] = {b[0], b[2], b[0], b[2]}, ys[4] = {b[1], b[1], b[3], b[3]};
  Box out{INFINITY, INFINITY, -INFINITY, -INFINITY};
  for (int k = 0; k < 4; ++k) {
    const double x = m[0] * xs[k] + m[1] * ys[k] + m[2];
    const double y = m[3] * xs[k] + m[4] * ys[k] + m[5];
    out = {std::min(out[0], x), std::min(out[1], y), std::max(out[2], x), std::max(out[3], y)};
  }
  return out;
}

}  // namespace

void pose_hflip(PoseSample& s) {
  check_image(s, "pose_hflip");
  const int64_t W = s.image.size(2);
  s.image = hflip(s.image);
  if (s.mask.defined()) s.mask = hflip(s.mask.unsqueeze(0)).squeeze(0);
  const auto fw = static_cast<double>(W);
  for (PosePerson& p : s.people) {
    for (Keypoint& k : p.keypoints)
      if (k.labelled()) k.x = fw - k.x;
    if (p.neck.labelled()) p.neck.x = fw - p.neck.x;  // the neck is its own mirror
    for (const auto& [a, b] : coco_flip_pairs())
      std::swap(p.keypoints[static_cast<size_t>(a)], p.keypoints[static_cast<size_t>(b)]);
    p.box = {fw - p.box[2], p.box[1], fw - p.box[0], p.box[3]};
  }
}

void pose_warp(PoseSample& s, const Affine& m, int64_t height, int64_t width,
               const std::array<uint8_t, 3>& fill) {
  check_image(s, "pose_warp");
  TCV_CHECK(height > 0 && width > 0, "[pose_warp] output size must be positive, got ", width, "x",
            height);
  const double det = m[0] * m[4] - m[1] * m[3];
  TCV_CHECK(std::isfinite(det) && std::fabs(det) > 1e-12, "[pose_warp] the map is singular");
  // Output to input: the inverse map.
  const double i0 = m[4] / det, i1 = -m[1] / det, i3 = -m[3] / det, i4 = m[0] / det;
  const double i2 = -(i0 * m[2] + i1 * m[5]), i5 = -(i3 * m[2] + i4 * m[5]);
  const Tensor src_img = s.image.contiguous();
  const uint8_t* src = src_img.data<uint8_t>();
  const int64_t H = src_img.size(1), W = src_img.size(2), HW = H * W;
  Tensor out = empty({3, height, width}, {.dtype = DType::u8});
  uint8_t* dst = out.data<uint8_t>();
  const int64_t OHW = height * width;
  Tensor mask_src = s.mask.defined() ? s.mask.contiguous() : Tensor();
  Tensor mask_out = s.mask.defined() ? empty({height, width}, {.dtype = DType::u8}) : Tensor();
  const uint8_t* ms = mask_src.defined() ? mask_src.data<uint8_t>() : nullptr;
  uint8_t* md = mask_out.defined() ? mask_out.data<uint8_t>() : nullptr;
  for (int64_t v = 0; v < height; ++v) {
    const double yc = static_cast<double>(v) + 0.5;
    for (int64_t u = 0; u < width; ++u) {
      const double xc = static_cast<double>(u) + 0.5;
      const double sx = i0 * xc + i1 * yc + i2, sy = i3 * xc + i4 * yc + i5;
      const int64_t o = v * width + u;
      if (md) {
        const auto px = static_cast<int64_t>(std::floor(sx));
        const auto py = static_cast<int64_t>(std::floor(sy));
        md[o] = px >= 0 && px < W && py >= 0 && py < H ? ms[py * W + px] : uint8_t{1};
      }
      const double fx = sx - 0.5, fy = sy - 0.5;
      const double x0f = std::floor(fx), y0f = std::floor(fy);
      const auto x0 = static_cast<int64_t>(x0f), y0 = static_cast<int64_t>(y0f);
      const double ax = fx - x0f, ay = fy - y0f;
      if (x0 < -1 || x0 >= W || y0 < -1 || y0 >= H) {
        for (int64_t c = 0; c < 3; ++c) dst[c * OHW + o] = fill[static_cast<size_t>(c)];
        continue;
      }
      const bool inside = x0 >= 0 && x0 + 1 < W && y0 >= 0 && y0 + 1 < H;
      for (int64_t c = 0; c < 3; ++c) {
        const uint8_t* p = src + c * HW;
        const double f = fill[static_cast<size_t>(c)];
        auto at = [&](int64_t y, int64_t x) -> double {
          return inside || (x >= 0 && x < W && y >= 0 && y < H) ? p[y * W + x] : f;
        };
        const double val = (1 - ay) * ((1 - ax) * at(y0, x0) + ax * at(y0, x0 + 1)) +
                           ay * ((1 - ax) * at(y0 + 1, x0) + ax * at(y0 + 1, x0 + 1));
        dst[c * OHW + o] = static_cast<uint8_t>(std::clamp(std::nearbyint(val), 0.0, 255.0));
      }
    }
  }
  s.image = out;
  s.mask = mask_out;
  const auto fw = static_cast<double>(width), fh = static_cast<double>(height);
  for (PosePerson& p : s.people) {
    auto move = [&](Keypoint& k) {
      if (!k.labelled()) return;
      const double x = m[0] * k.x + m[1] * k.y + m[2], y = m[3] * k.x + m[4] * k.y + m[5];
      k = x >= 0 && x < fw && y >= 0 && y < fh ? Keypoint{x, y, k.v} : Keypoint{};
    };
    for (Keypoint& k : p.keypoints) move(k);
    move(p.neck);
    p.box = map_box(p.box, m);
  }
}

void pose_resize(PoseSample& s, int64_t height, int64_t width) {
  check_image(s, "pose_resize");
  const int64_t H = s.image.size(1), W = s.image.size(2);
  s.image = resize(s.image, height, width, Antialias::off);
  if (s.mask.defined()) {
    const Tensor src = s.mask.contiguous();
    Tensor out = empty({height, width}, {.dtype = DType::u8});
    const uint8_t* ms = src.data<uint8_t>();
    uint8_t* md = out.data<uint8_t>();
    for (int64_t v = 0; v < height; ++v) {
      const auto py = std::min<int64_t>(
          H - 1, static_cast<int64_t>((static_cast<double>(v) + 0.5) * static_cast<double>(H) /
                                      static_cast<double>(height)));
      for (int64_t u = 0; u < width; ++u) {
        const auto px = std::min<int64_t>(
            W - 1, static_cast<int64_t>((static_cast<double>(u) + 0.5) * static_cast<double>(W) /
                                        static_cast<double>(width)));
        md[v * width + u] = ms[py * W + px];
      }
    }
    s.mask = out;
  }
  const double sx = static_cast<double>(width) / static_cast<double>(W);
  const double sy = static_cast<double>(height) / static_cast<double>(H);
  for (PosePerson& p : s.people) {
    auto scale = [&](Keypoint& k) {
      if (!k.labelled()) return;
      k.x *= sx;
      k.y *= sy;
    };
    for (Keypoint& k : p.keypoints) scale(k);
    scale(p.neck);
    p.box = {p.box[0] * sx, p.box[1] * sy, p.box[2] * sx, p.box[3] * sy};
    p.area *= sx * sy;
  }
}

Affine pose_train_affine(const std::vector<PosePerson>& people, int64_t H, int64_t W,
                         const PoseAugmentOptions& o, Rng& rng) {
  const auto size = static_cast<double>(o.size);
  double scale = rng.uniform(o.scale_range[0], o.scale_range[1]);
  if (o.focus > 0 && !people.empty()) {
    double bw = 0, bh = 0;
    for (const PosePerson& p : people) {
      bw = std::max(bw, p.box[2] - p.box[0]);
      bh = std::max(bh, p.box[3] - p.box[1]);
    }
    // A box under a pixel counts as one pixel: a sliver (1e-300 wide) would
    // otherwise scale the image beyond what a double holds.
    if (std::max(bw, bh) > 0) scale *= o.focus / std::max({bw / size, bh / size, 1.0 / size});
  }
  const double a = std::sqrt(rng.uniform(o.aspect_range[0], o.aspect_range[1]));
  const double sx = a * scale, sy = scale / a;
  double deg = 0;
  if (rng.uniform() < o.rotate_p) deg = rng.uniform(-o.max_degrees, o.max_degrees);
  // OpenCV's getRotationMatrix2D: positive angles turn counter-clockwise on screen.
  const double ca = std::cos(deg * std::numbers::pi / 180.0);
  const double sa = std::sin(deg * std::numbers::pi / 180.0);
  Affine m{ca * sx, sa * sy, 0, -sa * sx, ca * sy, 0};
  double cx = 0, cy = 0;
  if (!people.empty()) {
    size_t pick = 0;
    if (o.centre == CropCentre::random_person) {
      pick = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(people.size())));
    } else {
      double best = -1;
      for (size_t k = 0; k < people.size(); ++k) {
        const Box& b = people[k].box;
        const double area = (b[2] - b[0]) * (b[3] - b[1]);
        if (area > best) {
          best = area;
          pick = k;
        }
      }
    }
    const Box& b = people[pick].box;
    cx = 0.5 * (b[0] + b[2]);
    cy = 0.5 * (b[1] + b[3]);
  } else {
    // No person: a window inside the scaled image where it is larger than the crop.
    const double w = static_cast<double>(W) * sx, h = static_cast<double>(H) * sy;
    cx = (w > size ? rng.uniform(size / 2, w - size / 2) : w / 2) / sx;
    cy = (h > size ? rng.uniform(size / 2, h - size / 2) : h / 2) / sy;
  }
  const auto jx = static_cast<double>(rng.randint(-o.centre_jitter, o.centre_jitter + 1));
  const auto jy = static_cast<double>(rng.randint(-o.centre_jitter, o.centre_jitter + 1));
  m[2] = size / 2 - (m[0] * cx + m[1] * cy) - jx;
  m[5] = size / 2 - (m[3] * cx + m[4] * cy) - jy;
  return m;
}

PoseTransform pose_train_transform(const PoseAugmentOptions& o) {
  TCV_CHECK(o.size > 0, "[pose_train_transform] size must be positive, got ", o.size);
  TCV_CHECK(o.scale_range[0] > 0 && o.scale_range[0] <= o.scale_range[1] && o.aspect_range[0] > 0 &&
                o.aspect_range[0] <= o.aspect_range[1],
            "[pose_train_transform] scale_range and aspect_range must be positive [low, high]");
  TCV_CHECK(o.focus >= 0 && o.max_degrees >= 0 && o.centre_jitter >= 0,
            "[pose_train_transform] focus, max_degrees and centre_jitter must be non-negative");
  return [o](PoseSample& s, Rng& rng) {
    check_image(s, "pose_train_transform");
    if (rng.uniform() < o.flip_p) pose_hflip(s);
    const Affine m = pose_train_affine(s.people, s.image.size(1), s.image.size(2), o, rng);
    pose_warp(s, m, o.size, o.size, o.fill);
  };
}

PoseTransform pose_eval_transform(int64_t size) {
  TCV_CHECK(size > 0, "[pose_eval_transform] size must be positive, got ", size);
  return [size](PoseSample& s, Rng&) { pose_resize(s, size, size); };
}

}  // namespace tcv::data
