// COCO reading: instances files written here, the category map, crowd
// regions, images without boxes, and corrupt input as errors naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/det/coco.h"
#include "data/image.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

using tcv::testing::put_file;

// Three images (ids 10, 20, 30; 60x40), categories 3 "cat", 1 "dog", 7 "cow".
CocoFile sample() {
  CocoFile f;
  f.images = {{10, "a.jpg", 60, 40}, {20, "b.jpg", 60, 40}, {30, "c.jpg", 60, 40}};
  f.categories = {{3, "cat", "animal"}, {1, "dog", "animal"}, {7, "cow", "animal"}};
  CocoObject o;
  o = {1, 10, 3, {5, 6, 10, 8}, 70.5, false, {}};
  f.annotations.push_back(o);
  o = {2, 10, 7, {0, 0, 60, 40}, 2000, true, {}};  // a crowd region
  f.annotations.push_back(o);
  o = {3, 30, 1, {59.5, 39.25, 1, 1}, 1, false, {}};  // overshoots the border by rounding
  f.annotations.push_back(o);
  o = {4, 20, 7, {10, 10, 5, 5}, 25, true, {}};  // b has only a crowd region
  f.annotations.push_back(o);
  return f;
}

void write_images(const std::string& dir) {
  fs::create_directories(dir);
  for (const char* n : {"a.jpg", "b.jpg", "c.jpg"})
    write_image(dir + "/" + n, zeros({3, 40, 60}, {.dtype = DType::u8}));
}

std::string parse_err(const std::string& json) {
  return tcv::testing::error_of([&] { parse_coco(json, "inst.json"); });
}

}  // namespace

TEST(Coco, RoundTripAndCategoryMap) {
  tcv::testing::TempDir tmp("coco");
  CocoFile f = sample();
  f.annotations[0].rle_counts = {3, 4, 2393};
  put_file(tmp.path("ann/instances_val.json"), format_coco(f));
  write_images(tmp.path("img"));
  const CocoFile g = parse_coco(format_coco(f), "x.json");
  ASSERT_EQ(g.annotations.size(), 4u);
  EXPECT_EQ(g.annotations[2].bbox, (std::array<double, 4>{59.5, 39.25, 1, 1}));
  EXPECT_TRUE(g.annotations[1].iscrowd);
  EXPECT_EQ(g.annotations[0].area, 70.5);
  EXPECT_EQ(g.categories[0].name, "cat");

  const DetDataset d = read_coco(
      {.annotation_file = tmp.path("ann/instances_val.json"), .image_dir = tmp.path("img")});
  // Labels follow increasing category id: dog (1) -> 1, cat (3) -> 2, cow (7) -> 3.
  EXPECT_EQ(d.class_names(), (std::vector<std::string>{"dog", "cat", "cow"}));
  EXPECT_EQ(d.label_ids(), (std::vector<int64_t>{1, 3, 7}));
  ASSERT_EQ(d.size(), 3);
  const DetRecord& a = d.record(0);
  EXPECT_EQ(a.image_id, 10);
  EXPECT_EQ(a.image_path, tmp.path("img") + "/a.jpg");
  EXPECT_EQ(a.target.boxes[0], (Box{5, 6, 15, 14}));
  EXPECT_EQ(a.target.labels, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.target.iscrowd, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(a.target.area, (std::vector<double>{70.5, 2000}));
  EXPECT_EQ(d.record(2).target.boxes[0], (Box{59.5, 39.25, 60.5, 40.25}));
  EXPECT_EQ(d.load(2).image.shape(), (Shape{3, 40, 60}));

  // Images without a usable box (b: only a crowd region) kept or skipped.
  const DetDataset t = read_coco({.annotation_file = tmp.path("ann/instances_val.json"),
                                  .image_dir = tmp.path("img"),
                                  .empty_images = EmptyImages::skip});
  ASSERT_EQ(t.size(), 2);
  EXPECT_EQ(t.record(1).image_id, 30);
  EXPECT_EQ(t.skipped(), 0);
  // No "annotations" (an image-info file): images without boxes.
  const CocoFile info = parse_coco(R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 2,
      "height": 3}], "categories": [{"id": 1, "name": "x"}]})",
                                   "info.json");
  EXPECT_EQ(info.images.size(), 1u);
  EXPECT_TRUE(info.annotations.empty());
}

TEST(Coco, BadFilesNameTheEntryAndTheKey) {
  std::string e = parse_err("{\"images\": [");
  EXPECT_NE(e.find("inst.json: bad JSON at byte"), std::string::npos) << e;
  EXPECT_NE(parse_err("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(parse_err("{\"categories\": []}").find("the file has no \"images\""),
            std::string::npos);
  const std::string cats = R"("categories": [{"id": 1, "name": "x"}])";
  const std::string img = R"("images": [{"id": 4, "file_name": "a.jpg", "width": 9, "height": 9}])";
  e = parse_err("{\"images\": [{\"id\": 1, \"width\": 5, \"height\": 5}], " + cats + "}");
  EXPECT_NE(e.find("images[0] has no \"file_name\""), std::string::npos) << e;
  e = parse_err(R"({"images": [{"id": "1", "file_name": "a", "width": 5, "height": 5}], )" + cats +
                "}");
  EXPECT_NE(e.find("images[0] \"id\" must be an integer, got \"1\""), std::string::npos) << e;
  e = parse_err(R"({"images": [{"id": 1, "file_name": "a", "width": 5, "height": 5},
                               {"id": 1, "file_name": "b", "width": 5, "height": 5}], )" +
                cats + "}");
  EXPECT_NE(e.find("images[1] repeats image id 1"), std::string::npos) << e;
  auto ann = [&](const std::string& a) {
    return parse_err("{" + img + ", " + cats + ", \"annotations\": [" + a + "]}");
  };
  e = ann(R"({"id": 5, "image_id": 9, "category_id": 1, "bbox": [0, 0, 1, 1]})");
  EXPECT_NE(e.find("annotations[0] (id 5) refers to image id 9"), std::string::npos) << e;
  e = ann(R"({"id": 5, "image_id": 4, "category_id": 2, "bbox": [0, 0, 1, 1]})");
  EXPECT_NE(e.find("has category_id 2, which \"categories\" does not list"), std::string::npos)
      << e;
  e = ann(R"({"id": 5, "image_id": 4, "category_id": 1, "bbox": [0, 0, 1]})");
  EXPECT_NE(e.find("\"bbox\" must be [x, y, w, h], got [0,0,1]"), std::string::npos) << e;
  e = ann(R"({"id": 5, "image_id": 4, "category_id": 1, "bbox": [0, 0, -1, 1]})");
  EXPECT_NE(e.find("has a negative width or height"), std::string::npos) << e;
  e = ann(R"({"id": 5, "image_id": 4, "category_id": 1, "bbox": [0, "a", 1, 1]})");
  EXPECT_NE(e.find("\"bbox\" must be a finite number, got \"a\""), std::string::npos) << e;
  e = ann(R"({"id": 5, "image_id": 4, "category_id": 1, "bbox": [0, 0, 1, 1], "iscrowd": 2})");
  EXPECT_NE(e.find("\"iscrowd\" is 2, expected 0 or 1"), std::string::npos) << e;
  e = ann(R"({"image_id": 4, "category_id": 1, "bbox": [0, 0, 1, 1]})");
  EXPECT_NE(e.find("annotations[0] has no \"id\""), std::string::npos) << e;
}

TEST(Coco, CorruptImagesAreAnErrorOrSkippedAndCounted) {
  for (int which : {0, 1, 2}) {
    tcv::testing::TempDir tmp("coco_bad");
    CocoFile f = sample();
    write_images(tmp.path("img"));
    std::string expect;
    if (which == 0) {
      f.annotations[2].bbox = {50, 30, 12, 5};  // reaches x = 62 in a 60-wide image
      expect =
          "annotation id 3 of image id 30 (c.jpg) has bbox [50, 30, 12, 5], more than one "
          "pixel outside the 60x40 image";
    } else if (which == 2) {
      // A name the system cannot look up (fuzz_pose_keypoints found it in the
      // pose reader): std::filesystem::exists threw "File name too long".
      f.images[2].file_name = std::string(4000, 'c') + ".jpg";
      expect = "ccc.jpg: image file not found (listed in ";
    } else {
      fs::remove(tmp.path("img/c.jpg"));
      expect = "c.jpg: image file not found (listed in ";
    }
    put_file(tmp.path("inst.json"), format_coco(f));
    const CocoOptions o{.annotation_file = tmp.path("inst.json"), .image_dir = tmp.path("img")};
    const std::string e = tcv::testing::error_of([&] { read_coco(o); });
    EXPECT_NE(e.find(expect), std::string::npos) << e;
    CocoOptions s = o;
    s.on_corrupt = OnCorrupt::skip;
    const DetDataset d = read_coco(s);
    EXPECT_EQ(d.size(), 2);
    EXPECT_EQ(d.skipped(), 1);
    EXPECT_NE(d.first_skipped().find(expect), std::string::npos);
  }
  tcv::testing::TempDir tmp("coco_missing");
  EXPECT_NE(tcv::testing::error_of([&] {
              read_coco({.annotation_file = tmp.path("none.json"), .image_dir = tmp.path()});
            }).find("none.json"),
            std::string::npos);
}

// A value nested a million deep where a number belongs: the error shows it
// shortened, without recursing once per level (that overflowed the stack).
TEST(Coco, DeeplyNestedValuesInErrorsAreShortened) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  std::string e = parse_err(R"({"images": [{"id": )" + deep + "}], \"categories\": []}");
  EXPECT_NE(e.find("inst.json: images[0] \"id\" must be an integer, got [[[[[...]]]]]"),
            std::string::npos)
      << e.substr(0, 300);
  EXPECT_LT(e.size(), 300u);
  const std::string img = R"("images": [{"id": 4, "file_name": "a.jpg", "width": 9, "height": 9}])";
  e = parse_err("{" + img + R"(, "categories": [{"id": 1, "name": "x"}], "annotations": [)" +
                R"({"id": 1, "image_id": 4, "category_id": 1, "bbox": [0, 0, 1, )" + deep + "]}]}");
  EXPECT_NE(e.find("\"bbox\" must be a finite number, got [[[[[...]]]]]"), std::string::npos)
      << e.substr(0, 300);
  // Long values are cut too.
  e = parse_err(R"({"images": [{"id": [")" + std::string(5000, 'x') + "\"]}], \"categories\": []}");
  EXPECT_LT(e.size(), 300u) << e.substr(0, 300);
}

// An id above int64's range was read as a negative number.
TEST(Coco, IdsAboveInt64AreErrors) {
  const std::string e =
      parse_err(R"({"images": [{"id": 18446744073709551615, "file_name": "a.jpg", "width": 9,)"
                R"( "height": 9}], "categories": []})");
  EXPECT_NE(e.find("inst.json: images[0] \"id\" is 18446744073709551615, above the largest "
                   "integer tcv reads (2^63 - 1)"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(parse_coco(R"({"images": [{"id": 9223372036854775807, "file_name": "a.jpg",)"
                             R"( "width": 9, "height": 9}], "categories": []})",
                             "max.json"));
}

// Without "area", w x h of a huge box was +inf, which format_coco wrote as null.
TEST(Coco, BoxesWhoseAreaOverflowsAreErrors) {
  const std::string e = parse_err(
      R"({"images": [{"id": 4, "file_name": "a.jpg", "width": 9, "height": 9}],)"
      R"( "categories": [{"id": 1, "name": "x"}], "annotations": [{"id": 1, "image_id": 4,)"
      R"( "category_id": 1, "bbox": [0, 0, 1e200, 1e200]}]})");
  EXPECT_NE(e.find("inst.json: annotations[0] (id 1) \"bbox\" [0, 0, 1e+200, 1e+200] has no finite "
                   "area (w x h overflows)"),
            std::string::npos)
      << e;
}

// Found by fuzz_pose_keypoints (issue 25; the same parser code as here): a
// number beyond a double is nlohmann's out_of_range, not a parse_error, and
// escaped as a foreign exception naming no file (tests/fuzz/corpus/coco_json/
// number-beyond-double).
TEST(Coco, NumbersBeyondADoubleAreErrorsNamingTheFile) {
  const std::string e =
      parse_err(R"({"images":[],"categories":[],"annotations":[{"bbox":[1e+408]}]})");
  EXPECT_NE(e.find("inst.json: bad JSON: [json.exception.out_of_range.406] number overflow "
                   "parsing '1e+408'"),
            std::string::npos)
      << e;
}
