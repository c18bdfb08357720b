// Generated scenes: deterministic by seed, boxes and masks exactly those of
// the drawn pixels, and files that the VOC and COCO readers (and a PNG
// decoder) read back as the renderer made them.
#include <gtest/gtest.h>

#include <omp.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/dataset.h"
#include "data/det/coco.h"
#include "data/det/scenes.h"
#include "data/det/voc.h"
#include "data/idx.h"
#include "data/image.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

const std::string kFmnist = "/usr/share/datasets/fashion-mnist";

// A renderer over Fashion-MNIST's test items (what the val and test splits draw).
SceneRenderer renderer(const SceneOptions& o) {
  static const IdxFiles files = find_idx_files(kFmnist);
  static const Tensor items = read_idx(files.test_images), labels = read_idx(files.test_labels);
  return SceneRenderer(items, labels, o);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<uint8_t>() == b.to_vector<uint8_t>();
}

}  // namespace

TEST(Scenes, SameSeedSameSceneOtherSeedOther) {
  const SceneOptions o{.width = 128, .height = 96};
  Rng a(5, 17), b(5, 17), c(6, 17);
  const Scene s1 = renderer(o).render(a), s2 = renderer(o).render(b), s3 = renderer(o).render(c);
  EXPECT_TRUE(same(s1.image, s2.image));
  EXPECT_TRUE(same(s1.classes, s2.classes));
  ASSERT_EQ(s1.objects.size(), s2.objects.size());
  for (size_t k = 0; k < s1.objects.size(); ++k) EXPECT_EQ(s1.objects[k].box, s2.objects[k].box);
  EXPECT_FALSE(same(s1.image, s3.image));
  EXPECT_EQ(s1.image.shape(), (Shape{3, 96, 128}));
}

TEST(Scenes, BoxesAndMasksAreThoseOfTheDrawnPixels) {
  const SceneOptions o{.width = 160, .height = 120, .min_objects = 3, .max_objects = 8};
  int64_t objects = 0, occluded = 0, difficult = 0;
  for (uint64_t i = 0; i < 24; ++i) {
    Rng rng(3, i);
    const Scene s = renderer(o).render(rng, true);
    const int64_t H = 120, W = 160, HW = H * W;
    const auto img = s.image.to_vector<uint8_t>(), bg = s.background.to_vector<uint8_t>();
    const auto own = s.owner.to_vector<uint8_t>(), inst = s.instances.to_vector<uint8_t>(),
               cls = s.classes.to_vector<uint8_t>();
    // Nothing outside the objects' pixels changed.
    for (int64_t p = 0; p < HW; ++p) {
      if (own[p] != 0) continue;
      for (int64_t c = 0; c < 3; ++c) ASSERT_EQ(img[c * HW + p], bg[c * HW + p]) << p;
    }
    for (size_t k = 0; k < s.objects.size(); ++k) {
      const SceneObject& ob = s.objects[k];
      int64_t x1 = W, y1 = H, x2 = -1, y2 = -1, n = 0;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x)
          if (own[y * W + x] == k + 1) {
            x1 = std::min(x1, x), x2 = std::max(x2, x), y1 = std::min(y1, y), y2 = std::max(y2, y),
            ++n;
          }
      // The box is the tight box of the visible pixels, in continuous coordinates.
      EXPECT_EQ(ob.box, (Box{double(x1), double(y1), double(x2 + 1), double(y2 + 1)}));
      EXPECT_EQ(ob.visible, n);
      EXPECT_GE(ob.label, 1);
      EXPECT_LE(ob.label, 10);
      EXPECT_GE(double(ob.visible), o.min_visible * double(ob.inside) - 1e-9);
      EXPECT_EQ(ob.difficult, double(ob.visible) < o.difficult_below * double(ob.inside));
      ++objects;
      occluded += ob.visible < ob.inside;
      difficult += ob.difficult;
      // The COCO mask of the object decodes to its pixels.
      const std::vector<int64_t> rle = rle_of(s.owner, static_cast<uint8_t>(k + 1));
      int64_t at = 0;
      bool on = false;
      for (int64_t run : rle) {
        for (int64_t q = at; q < at + run; ++q) {
          const int64_t x = q / H, y = q % H;  // column-major
          ASSERT_EQ(own[y * W + x] == k + 1, on);
        }
        at += run;
        on = !on;
      }
      EXPECT_EQ(at, HW);
    }
    // Masks: void (255) exactly where a pixel touches another owner; else the
    // owner (instance map) and its class (class map).
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const int64_t p = y * W + x;
        bool edge = false;
        for (int64_t dy = -1; dy <= 1; ++dy)
          for (int64_t dx = -1; dx <= 1; ++dx) {
            const int64_t yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W && own[yy * W + xx] != own[p]) edge = true;
          }
        ASSERT_EQ(inst[p], edge ? 255 : own[p]);
        ASSERT_EQ(cls[p], edge ? 255 : own[p] ? s.objects[own[p] - 1u].label : 0);
      }
  }
  // The options make occlusion and difficult objects common.
  EXPECT_GT(objects, 80);
  EXPECT_GT(occluded, 10);
  EXPECT_GT(difficult, 2);
}

TEST(Scenes, MarkBordersWidensWithTheRadius) {
  // A 2x2 block of 1 in a 7x7 field of 0; radius r marks every pixel within
  // Chebyshev distance r of a pixel of the other value.
  std::vector<uint8_t> v(49, 0);
  for (int y = 3; y < 5; ++y)
    for (int x = 3; x < 5; ++x) v[y * 7 + x] = 1;
  const Tensor ids = from_vector(v, {7, 7});
  for (int r : {0, 1, 2}) {
    const auto out = mark_borders(ids, r).to_vector<uint8_t>();
    for (int y = 0; y < 7; ++y)
      for (int x = 0; x < 7; ++x) {
        int dist = 99;
        for (int yy = 0; yy < 7; ++yy)
          for (int xx = 0; xx < 7; ++xx)
            if (v[yy * 7 + xx] != v[y * 7 + x])
              dist = std::min(dist, std::max(std::abs(yy - y), std::abs(xx - x)));
        EXPECT_EQ(out[y * 7 + x], dist <= r ? 255 : v[y * 7 + x]) << r << " " << y << " " << x;
      }
  }
}

TEST(Scenes, RejectsBadOptions) {
  const IdxFiles files = find_idx_files(kFmnist);
  const Tensor items = read_idx(files.test_images).narrow(0, 0, 10);
  const Tensor labels = read_idx(files.test_labels).narrow(0, 0, 10);
  EXPECT_NE(tcv::testing::error_of([&] {
              SceneRenderer(items, labels, {.min_objects = 5, .max_objects = 2});
            }).find("min_objects <= max_objects"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              SceneRenderer(items, labels, {.width = 8});
            }).find("image size"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              SceneRenderer(items, labels.narrow(0, 0, 4), {});
            }).find("10 items but labels"),
            std::string::npos);
}

// The files of a small set, read back: the same on 1 and 2 threads, and what
// the renderer drew.
TEST(Scenes, WritesVocCocoAndMasksReadBackExactly) {
  tcv::testing::TempDir tmp("scenes");
  SceneSetOptions o;
  o.scene = {.width = 96, .height = 80, .min_objects = 2, .max_objects = 5, .min_scale = 0.3};
  o.fmnist_dir = kFmnist;
  o.train = 3;
  o.val = 4;
  o.test = 2;
  o.seed = 11;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const SceneSetSummary s1 = write_scene_set(o, tmp.path("one/scenes"));
  omp_set_num_threads(2);
  const SceneSetSummary s2 = write_scene_set(o, tmp.path("two/scenes"));
  omp_set_num_threads(threads);
  EXPECT_EQ(s1.images, 9);
  EXPECT_EQ(s1.objects, s2.objects);
  for (const auto& e : fs::recursive_directory_iterator(tmp.path("one"))) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), tmp.path("one"));
    ASSERT_EQ(slurp(e.path().string()), slurp((fs::path(tmp.path("two")) / rel).string()))
        << rel << " differs between 1 and 2 threads";
  }
  const std::string root = tmp.path("one/scenes");
  EXPECT_EQ(slurp(root + "/ImageSets/Main/val.txt"), "000004\n000005\n000006\n000007\n");
  EXPECT_EQ(slurp(root + "/ImageSets/Main/trainval.txt").size(), 7u * 7u);
  EXPECT_EQ(slurp(root + "/ImageSets/Segmentation/test.txt"), "000008\n000009\n");
  EXPECT_EQ(read_class_names(root + "/classes.txt"), fashion_mnist_classes());

  // The val split through both readers, against the renderer (val draws test items).
  const DetDataset voc = read_voc({.roots = {root}, .split = "val"});
  const DetDataset coco = read_coco({.annotation_file = root + "/annotations/instances_val.json",
                                     .image_dir = root + "/JPEGImages"});
  ASSERT_EQ(voc.size(), 4);
  ASSERT_EQ(coco.size(), 4);
  EXPECT_EQ(voc.class_names(), fashion_mnist_classes());
  EXPECT_EQ(coco.class_names(), fashion_mnist_classes());
  const nlohmann::json cj = nlohmann::json::parse(slurp(root + "/annotations/instances_val.json"));
  int64_t present = 0;
  for (int64_t j = 0; j < 4; ++j) {
    const int64_t i = 3 + j;  // scene index
    Rng rng(o.seed, static_cast<uint64_t>(i));
    const Scene s = renderer(o.scene).render(rng);
    const DetTarget& tv = voc.record(j).target;
    const DetTarget& tc = coco.record(j).target;
    EXPECT_EQ(coco.record(j).image_id, i + 1);
    ASSERT_EQ(tv.size(), static_cast<int64_t>(s.objects.size()));
    ASSERT_EQ(tc.size(), static_cast<int64_t>(s.objects.size()));
    for (size_t k = 0; k < s.objects.size(); ++k) {
      EXPECT_EQ(tv.boxes[k], s.objects[k].box);
      EXPECT_EQ(tc.boxes[k], s.objects[k].box);
      EXPECT_EQ(tv.labels[k], s.objects[k].label);
      EXPECT_EQ(tc.labels[k], s.objects[k].label);
      EXPECT_EQ(tv.difficult[k] != 0, s.objects[k].difficult);
      EXPECT_EQ(tc.area[k], double(s.objects[k].visible));
    }
    present += tv.size();
    // The class mask PNG decodes (stb expands the palette) to the palette colour
    // of each pixel's class; VOC's colour map is one-to-one.
    const std::string id = "00000" + std::to_string(i + 1);
    const auto rgb = read_image(root + "/SegmentationClass/" + id + ".png").to_vector<uint8_t>();
    const auto cls = s.classes.to_vector<uint8_t>();
    const Palette& pal = voc_palette();
    const size_t HW = cls.size();
    for (size_t p = 0; p < HW; ++p)
      for (size_t c = 0; c < 3; ++c)
        ASSERT_EQ(rgb[c * HW + p], pal[3 * cls[p] + c]) << id << " " << p;
    // The JPEG is this scene's image: much closer to it than to the next scene's.
    const auto jpg = read_image(root + "/JPEGImages/" + id + ".jpg").to_vector<uint8_t>();
    Rng next_rng(o.seed, static_cast<uint64_t>(i + 1));
    const auto other = renderer(o.scene).render(next_rng).image.to_vector<uint8_t>();
    const auto raw = s.image.to_vector<uint8_t>();
    double err = 0, err_other = 0;
    for (size_t p = 0; p < raw.size(); ++p) {
      err += std::abs(int(jpg[p]) - int(raw[p]));
      err_other += std::abs(int(jpg[p]) - int(other[p]));
    }
    EXPECT_LT(err, err_other / 4) << id;
  }
  EXPECT_EQ(present, static_cast<int64_t>(cj["annotations"].size()));
  // RLE masks cover the image.
  for (const auto& a : cj["annotations"]) {
    int64_t sum = 0;
    for (const auto& c : a["segmentation"]["counts"]) sum += c.get<int64_t>();
    EXPECT_EQ(sum, 96 * 80);
  }
  EXPECT_NE(tcv::testing::error_of([&] {
              write_scene_set({.fmnist_dir = "/nonexistent"}, root);
            }).find("/nonexistent"),
            std::string::npos);
}
