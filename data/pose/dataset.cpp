#include "data/pose/dataset.h"

#include <algorithm>
#include <cmath>

#include "data/image.h"

namespace tcv::data {

namespace {

// A floor or ceil result as an index clamped to [lo, hi] (NaN gives lo): a
// double beyond int64's range has no int64 value, and casting it is undefined.
int64_t clamped_index(double v, int64_t lo, int64_t hi) {
  if (!(v > static_cast<double>(lo))) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

}  // namespace

int64_t mask_pixels(int64_t height, int64_t width, const std::string& what) {
  int64_t n = 0;
  TCV_CHECK(height > 0 && width > 0 && !__builtin_mul_overflow(height, width, &n), what,
            ": a mask of ", width, "x", height,
            " pixels (width x height) is not positive or has more pixels than 2^63 - 1");
  return n;
}

void paint_segmentation(const Segmentation& seg, uint8_t* image, int64_t H, int64_t W,
                        uint8_t value, const std::string& what) {
  const int64_t HW = mask_pixels(H, W, what);
  if (!seg.rle.empty()) {
    TCV_CHECK(seg.rle_height == H && seg.rle_width == W, what, ": its mask is ", seg.rle_width, "x",
              seg.rle_height, " but the image is ", W, "x", H);
    // p <= HW throughout, so HW - p cannot overflow (p + run could: runs come from files).
    int64_t p = 0;
    bool on = false;
    for (size_t k = 0; k < seg.rle.size(); ++k) {
      const int64_t run = seg.rle[k];
      TCV_CHECK(run >= 0 && run <= HW - p, what, ": its run lengths cover more than the ", W, "x",
                H, " image (run ", k, " is ", run, ", ", HW - p, " pixels were left)");
      if (on)
        for (int64_t q = p; q < p + run; ++q) image[(q % H) * W + q / H] = value;
      p += run;
      on = !on;
    }
  }
  std::vector<double> xs;
  for (const std::vector<double>& poly : seg.polygons) {
    TCV_CHECK(poly.size() % 2 == 0 && poly.size() >= 6, what,
              ": a polygon needs an even number (at least 6) of coordinates, got ", poly.size());
    for (size_t k = 0; k < poly.size(); ++k)
      TCV_CHECK(std::isfinite(poly[k]), what, ": polygon coordinate ", k, " is ", poly[k],
                ", not a finite number");
    const size_t n = poly.size() / 2;
    double ymin = poly[1], ymax = poly[1];
    for (size_t k = 0; k < n; ++k) {
      ymin = std::min(ymin, poly[2 * k + 1]);
      ymax = std::max(ymax, poly[2 * k + 1]);
    }
    const int64_t r0 = clamped_index(std::floor(ymin - 0.5), 0, H);
    const int64_t r1 = clamped_index(std::ceil(ymax - 0.5), -1, H - 1);
    for (int64_t r = r0; r <= r1; ++r) {
      const double yc = static_cast<double>(r) + 0.5;
      xs.clear();
      for (size_t k = 0; k < n; ++k) {
        const double x0 = poly[2 * k], y0 = poly[2 * k + 1];
        const double x1 = poly[(2 * k + 2) % (2 * n)], y1 = poly[(2 * k + 3) % (2 * n)];
        if ((y0 <= yc && yc < y1) || (y1 <= yc && yc < y0)) {
          // Differences of finite coordinates may overflow to inf: t is then 0
          // (or x inf), never NaN, which would break the sort below.
          const double t = (yc - y0) / (y1 - y0);
          xs.push_back(t == 0 ? x0 : x0 + t * (x1 - x0));
        }
      }
      std::sort(xs.begin(), xs.end());
      for (size_t k = 0; k + 1 < xs.size(); k += 2) {
        const int64_t c0 = clamped_index(std::ceil(xs[k] - 0.5), 0, W);
        const int64_t c1 = clamped_index(std::ceil(xs[k + 1] - 0.5), 0, W);
        for (int64_t c = c0; c < c1; ++c) image[r * W + c] = value;
      }
    }
  }
}

std::vector<int64_t> decode_coco_rle(const std::string& s, const std::string& what) {
  std::vector<int64_t> counts;
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      TCV_CHECK(p < s.size(), what, ": compressed RLE ends inside a count (at character ", p, ")");
      const int c = static_cast<unsigned char>(s[p]) - 48;
      TCV_CHECK(c >= 0 && c < 64, what, ": compressed RLE has character '", s[p], "' at offset ", p,
                ", outside '0'..'o'");
      TCV_CHECK(k < 12, what, ": compressed RLE count too long at offset ", p);
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= -(int64_t{1} << (5 * k));
    }
    // Counts after the second are differences to the one two before; a sum
    // beyond int64 (a hostile string) is no run length either.
    if (counts.size() > 2)
      TCV_CHECK(!__builtin_add_overflow(x, counts[counts.size() - 2], &x), what,
                ": compressed RLE count ", counts.size(), " overflows 64 bits");
    TCV_CHECK(x >= 0, what, ": compressed RLE decodes to a negative run length (count ",
              counts.size(), ")");
    counts.push_back(x);
  }
  return counts;
}

int64_t PosePerson::num_labelled() const {
  int64_t n = 0;
  for (const Keypoint& k : keypoints) n += k.labelled();
  return n;
}

Keypoint shoulder_midpoint(const std::array<Keypoint, kCocoKeypoints>& kps) {
  const Keypoint& l = kps[5];
  const Keypoint& r = kps[6];
  if (!l.labelled() || !r.labelled()) return {};
  return {(l.x + r.x) * 0.5, (l.y + r.y) * 0.5, l.v == 2 && r.v == 2 ? 2 : 1};
}

Box keypoint_box(const std::array<Keypoint, kCocoKeypoints>& kps) {
  Box b{INFINITY, INFINITY, -INFINITY, -INFINITY};
  bool any = false;
  for (const Keypoint& k : kps) {
    if (!k.labelled()) continue;
    any = true;
    b = {std::min(b[0], k.x), std::min(b[1], k.y), std::max(b[2], k.x), std::max(b[3], k.y)};
  }
  return any ? b : Box{0, 0, 0, 0};
}

Tensor pose_loss_mask(const PoseRecord& r) {
  Tensor mask = empty({r.height, r.width}, {.dtype = DType::u8});
  uint8_t* m = mask.data<uint8_t>();
  std::fill_n(m, r.height * r.width, uint8_t{1});
  if (r.ignored.empty() && r.crowds.empty()) return mask;
  const int64_t H = r.height, W = r.width;
  for (size_t k = 0; k < r.crowds.size(); ++k)
    paint_segmentation(r.crowds[k], m, H, W, 0, r.source + " crowd region " + std::to_string(k));
  if (!r.crowds.empty())  // trained people stay in the loss where a crowd covers them
    for (size_t k = 0; k < r.people.size(); ++k)
      paint_segmentation(r.people[k].segmentation, m, H, W, 1,
                         r.source + " person " + std::to_string(k));
  for (size_t k = 0; k < r.ignored.size(); ++k)
    paint_segmentation(r.ignored[k], m, H, W, 0, r.source + " ignored person " + std::to_string(k));
  return mask;
}

PoseDataset::PoseDataset(std::vector<PoseRecord> records, OnCorrupt on_corrupt, std::string name,
                         int64_t skipped_at_load, std::string first_skipped, ImageLimits limits)
    : RecordSet(std::move(records), std::move(name), on_corrupt, limits, skipped_at_load,
                std::move(first_skipped)) {}

PoseSample PoseDataset::load(int64_t i) const {
  return annotated_sample<PoseSample>(i, [&](const PoseRecord& r, PoseSample& s) {
    s.people = r.people;
    for (PosePerson& p : s.people) p.neck = shoulder_midpoint(p.keypoints);
    s.image = annotated_image(r);
    s.mask = pose_loss_mask(r);
  });
}

PoseDataset PoseDataset::head(int64_t n) const {
  return PoseDataset(first_records(n), on_corrupt_, name_, 0, "", limits_);
}

}  // namespace tcv::data
