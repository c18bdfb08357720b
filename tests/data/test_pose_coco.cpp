// COCO person keypoint files: round trip (keypoints shift by half a pixel into
// continuous coordinates and back), segmentations (polygons, RLE, compressed
// RLE), the choice of trained people, the loss mask, and bad input as errors
// naming the file, the entry and the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "data/image.h"
#include "data/pose/coco.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

using tcv::testing::put_file;

// 17 keypoints as a file writes them: (x, y, v) with x = 10 + k, y = 20 + k.
std::string kp_json(int labelled) {
  std::string s = "[";
  for (int k = 0; k < 17; ++k) {
    if (k) s += ",";
    s += k < labelled ? std::to_string(10 + k) + "," + std::to_string(20 + k) + ",2" : "0,0,0";
  }
  return s + "]";
}

std::string doc(const std::string& anns) {
  return R"({"images":[{"id":7,"file_name":"a.jpg","width":40,"height":30}],)"
         R"("categories":[{"id":1,"name":"person"}],"annotations":[)" +
         anns + "]}";
}

std::string ann(const std::string& extra, int labelled = 17) {
  return R"({"id":1,"image_id":7,"category_id":1,"bbox":[2,3,20,20],"area":500,)"
         R"("iscrowd":0,"num_keypoints":)" +
         std::to_string(labelled) + R"(,"keypoints":)" + kp_json(labelled) + extra + "}";
}

std::string parse_err(const std::string& json) {
  return tcv::testing::error_of([&] { parse_coco_keypoints(json, "kp.json"); });
}

void expect_has(const std::string& s, const std::string& part) {
  EXPECT_NE(s.find(part), std::string::npos) << "'" << part << "' not in: " << s;
}

// doc()'s image (a.jpg, 40 x 30, black) in tmp/img, and the options that read
// tmp/kp.json with it.
PoseCocoOptions one_image_set(const tcv::testing::TempDir& tmp) {
  fs::create_directories(tmp.path("img"));
  write_image(tmp.path("img/a.jpg"), zeros({3, 30, 40}, {.dtype = DType::u8}));
  return {.annotation_file = tmp.path("kp.json"), .image_dir = tmp.path("img")};
}

}  // namespace

TEST(PoseCoco, ParsesAndRoundTrips) {
  const CocoKeypointFile f =
      parse_coco_keypoints(doc(ann(R"(,"segmentation":[[2,3,22,3,22,23,2,23]])", 15)), "kp.json");
  ASSERT_EQ(f.annotations.size(), 1u);
  const CocoPersonAnnotation& a = f.annotations[0];
  EXPECT_EQ(a.num_keypoints, 15);
  EXPECT_EQ(a.keypoints[3].x, 13.5);  // pixel index 13 -> continuous 13.5
  EXPECT_EQ(a.keypoints[3].y, 23.5);
  EXPECT_EQ(a.keypoints[3].v, 2);
  EXPECT_FALSE(a.keypoints[16].labelled());
  ASSERT_EQ(a.segmentation.polygons.size(), 1u);
  const CocoKeypointFile g = parse_coco_keypoints(format_coco_keypoints(f), "again.json");
  ASSERT_EQ(g.annotations.size(), 1u);
  for (size_t k = 0; k < 17; ++k) {
    EXPECT_EQ(g.annotations[0].keypoints[k].x, a.keypoints[k].x);
    EXPECT_EQ(g.annotations[0].keypoints[k].v, a.keypoints[k].v);
  }
  EXPECT_EQ(g.annotations[0].segmentation.polygons, a.segmentation.polygons);
  EXPECT_NE(format_coco_keypoints(f).find("\"left_shoulder\""), std::string::npos);
}

TEST(PoseCoco, Segmentations) {
  // A polygon covers the pixels whose centres lie inside: columns 2..5, rows 2..4.
  Segmentation poly;
  poly.polygons = {{2, 2, 6, 2, 6, 5, 2, 5}};
  std::vector<uint8_t> img(8 * 8, 0);
  paint_segmentation(poly, img.data(), 8, 8, 1, "poly");
  int n = 0;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      n += img[static_cast<size_t>(r * 8 + c)];
      EXPECT_EQ(img[static_cast<size_t>(r * 8 + c)], r >= 2 && r <= 4 && c >= 2 && c <= 5);
    }
  EXPECT_EQ(n, 12);
  // RLE runs are column-major: 3 off, 4 on covers column 0 rows 3..6.
  Segmentation rle;
  rle.rle = {3, 4, 57};
  rle.rle_height = rle.rle_width = 8;
  std::fill(img.begin(), img.end(), 0);
  paint_segmentation(rle, img.data(), 8, 8, 1, "rle");
  for (int r = 0; r < 8; ++r) EXPECT_EQ(img[static_cast<size_t>(r * 8)], r >= 3 && r <= 6);
  EXPECT_EQ(img[1], 0);
  // pycocotools' compressed counts: 5-bit groups + 48, later counts as differences.
  EXPECT_EQ(decode_coco_rle("3421", "x"), (std::vector<int64_t>{3, 4, 2, 5}));
  EXPECT_EQ(decode_coco_rle("342M", "x"), (std::vector<int64_t>{3, 4, 2, 1}));
  EXPECT_EQ(decode_coco_rle("T3", "x"), (std::vector<int64_t>{100}));
  expect_has(tcv::testing::error_of([] { decode_coco_rle("3~", "crowd 5"); }), "crowd 5");
  expect_has(tcv::testing::error_of([] { decode_coco_rle("T", "crowd 5"); }), "ends inside");
  // A compressed mask in a file.
  const CocoKeypointFile f = parse_coco_keypoints(
      doc(R"({"id":2,"image_id":7,"category_id":1,"iscrowd":1,"bbox":[0,0,1,3],)"
          R"("segmentation":{"counts":"X13UT1","size":[30,40]}})"),
      "kp.json");
  EXPECT_EQ(f.annotations[0].segmentation.rle, (std::vector<int64_t>{40, 3, 1157}));
}

TEST(PoseCoco, ChoosesTrainedPeopleAndMasksTheRest) {
  CocoImage im{1, "a.jpg", 64, 48};
  auto person = [](int64_t id, double x, double y, double w, double h, int labelled, double area) {
    CocoPersonAnnotation a;
    a.id = id;
    a.image_id = 1;
    a.bbox = {x, y, w, h};
    a.area = area;
    for (int k = 0; k < labelled; ++k)
      a.keypoints[static_cast<size_t>(k)] = {x + 1 + k, y + 1 + k, 2};
    a.num_keypoints = labelled;
    a.segmentation.polygons = {{x, y, x + w, y, x + w, y + h, x, y + h}};
    return a;
  };
  const auto kept = person(1, 0, 0, 30, 40, 10, 2000);
  const auto few = person(2, 40, 0, 20, 20, 4, 2000);     // < 5 keypoints
  const auto small = person(3, 40, 24, 20, 20, 10, 900);  // area < 32 x 32
  const auto close = person(4, 4, 0, 30, 40, 10, 2000);   // centre 4 px from kept's
  CocoPersonAnnotation crowd = person(5, 0, 40, 64, 8, 0, 512);
  crowd.iscrowd = true;
  crowd.segmentation.polygons = {{0, 30, 64, 30, 64, 48, 0, 48}};  // overlaps kept (rows 30..39)
  const PoseRecord r = pose_record(im, {&kept, &few, &small, &close, &crowd}, PoseSelection{});
  ASSERT_EQ(r.people.size(), 1u);
  EXPECT_EQ(r.people[0].box, (Box{0, 0, 30, 40}));
  EXPECT_EQ(r.ignored.size(), 3u);
  EXPECT_EQ(r.crowds.size(), 1u);
  const Tensor mask = pose_loss_mask(r);
  const uint8_t* m = mask.data<uint8_t>();
  EXPECT_EQ(m[10 * 64 + 10], 0);  // the close person covers part of the kept one: ignored
  EXPECT_EQ(m[10 * 64 + 2], 1);   // kept only
  EXPECT_EQ(m[35 * 64 + 2], 1);   // crowd, but inside the kept person
  EXPECT_EQ(m[35 * 64 + 36], 0);  // crowd
  EXPECT_EQ(m[10 * 64 + 50], 0);  // few keypoints
  EXPECT_EQ(m[28 * 64 + 50], 0);  // small
  EXPECT_EQ(m[22 * 64 + 38], 1);  // nobody
  // Looser thresholds train everyone but the crowd.
  const PoseRecord all = pose_record(im, {&kept, &few, &small, &close, &crowd},
                                     {.min_keypoints = 1, .min_area = 0, .min_centre_distance = 0});
  EXPECT_EQ(all.people.size(), 4u);
  EXPECT_TRUE(all.ignored.empty());
}

TEST(PoseCoco, ReadsADataSet) {
  tcv::testing::TempDir tmp("pose_coco");
  PoseCocoOptions o = one_image_set(tmp);
  o.selection.min_area = 0;
  // Keypoints 11.. lie below the 30-pixel-high image.
  put_file(tmp.path("kp.json"), doc(ann("", 17)));
  expect_has(tcv::testing::error_of([&] { read_coco_keypoints(o); }),
             "keypoint left_hip at (21, 31) lies more than one pixel outside the 40x30 image");
  put_file(tmp.path("kp.json"), doc(ann(R"(,"segmentation":[[2,3,22,3,22,23,2,23]])", 8)));
  const PoseDataset ds = read_coco_keypoints(o);
  ASSERT_EQ(ds.size(), 1);
  const PoseSample s = ds.load(0);
  EXPECT_EQ(s.image.shape(), (Shape{3, 30, 40}));
  EXPECT_EQ(s.mask.shape(), (Shape{30, 40}));
  ASSERT_EQ(s.people.size(), 1u);
  EXPECT_EQ(s.people[0].keypoints[0].x, 10.5);
  // Everyone left out: the image is skipped for training, kept for evaluation.
  o.selection.min_keypoints = 18;
  EXPECT_EQ(read_coco_keypoints(o).size(), 1);
  o.empty_images = EmptyImages::skip;
  EXPECT_EQ(read_coco_keypoints(o).size(), 0);
  // A missing image names itself; with OnCorrupt::skip it is counted.
  fs::remove(tmp.path("img/a.jpg"));
  o.empty_images = EmptyImages::keep;
  expect_has(tcv::testing::error_of([&] { read_coco_keypoints(o); }), "a.jpg");
  o.on_corrupt = OnCorrupt::skip;
  const PoseDataset skipped = read_coco_keypoints(o);
  EXPECT_EQ(skipped.size(), 0);
  EXPECT_EQ(skipped.skipped(), 1);
}

TEST(PoseCoco, BadInputNamesFileEntryAndKey) {
  expect_has(parse_err("{\"images\": ["), "kp.json: bad JSON at byte");
  expect_has(parse_err(R"({"categories":[]})"), "has no \"images\"");
  expect_has(parse_err(doc(R"({"id":1,"image_id":7,"category_id":1})")),
             "annotations[0] (id 1) has no \"keypoints\"");
  expect_has(parse_err(doc(R"({"id":1,"image_id":9,"category_id":1})")), "image id 9");
  expect_has(parse_err(doc(R"({"id":1,"image_id":7,"category_id":3})")), "category_id 3");
  expect_has(parse_err(doc(R"({"id":1,"image_id":7,"category_id":1,"keypoints":[1,2,2]})")),
             "\"keypoints\" must be 17 (x, y, v) triples (51 numbers), got 3 values");
  std::string bad_v = kp_json(17);
  bad_v.replace(0, 8, "[10,20,3");
  expect_has(parse_err(doc(R"({"id":1,"image_id":7,"category_id":1,"keypoints":)" + bad_v + "}")),
             "visibility of nose is 3");
  std::string bad_x = kp_json(17);
  bad_x.replace(1, 2, "\"a\"");
  expect_has(parse_err(doc(R"({"id":4,"image_id":7,"category_id":1,"keypoints":)" + bad_x + "}")),
             "annotations[0] (id 4) \"keypoints\" must be a finite number");
  expect_has(parse_err(doc(ann("", 17).replace(ann("", 17).find("\"num_keypoints\":17"), 18,
                                               "\"num_keypoints\":16"))),
             "\"num_keypoints\" is 16 but 17 keypoints are labelled");
  expect_has(parse_err(doc(ann(R"(,"segmentation":[[1,2,3]])"))),
             "\"segmentation\"[0] must be a polygon");
  expect_has(parse_err(doc(ann(R"(,"segmentation":{"counts":[5,5],"size":[30,40]})"))),
             "runs cover 10 pixels, the mask has 1200");
  expect_has(parse_err(doc(ann(R"(,"segmentation":{"counts":[1200],"size":[40,30]})"))),
             "differs from its image's [30, 40]");
  expect_has(parse_err(doc(ann(R"(,"segmentation":7)"))), "\"segmentation\" must be a list");
  expect_has(parse_err(doc(ann("").replace(ann("").find("\"iscrowd\":0"), 11, "\"iscrowd\":2"))),
             "\"iscrowd\" is 2");
}

// Issue 25, item 1: crowd run lengths that wrap around int64 to sum to H x W
// passed the total check and painted far outside the mask (SIGSEGV, or heap
// corruption: "corrupted double-linked list"). Both of the issue's variants,
// on the 40 x 30 image of doc().
TEST(PoseCoco, CrowdRunLengthsThatWrapInt64AreRefused) {
  const std::string big = "9223372036854775807";  // 2^63 - 1
  for (const std::string& counts : {"[1," + big + ",4611686018427387904,1,4611686018427389103]",
                                    "[1," + big + ",9223372036854775803,5,1200]"}) {
    tcv::testing::TempDir tmp("pose_rle_wrap");
    const PoseCocoOptions o = one_image_set(tmp);
    put_file(tmp.path("kp.json"), doc(ann("", 17) +
                                      R"(,{"id":2,"image_id":7,"category_id":1,"iscrowd":1,)"
                                      R"("bbox":[0,0,40,30],"area":1200,"num_keypoints":0,)"
                                      R"("segmentation":{"counts":)" +
                                      counts + R"(,"size":[30,40]}})"));
    const std::string e = tcv::testing::error_of([&] {
      const PoseDataset ds = read_coco_keypoints(o);
      for (int64_t i = 0; i < ds.size(); ++i) ds.load(i);  // the old code crashed here
    });
    expect_has(e,
               "kp.json: annotations[1] (id 2) \"segmentation\" runs cover more than the "
               "mask's 1200 pixels (30x40; run 1 is 9223372036854775807, 1199 pixels were "
               "left)");
  }
}

TEST(PoseCoco, PaintingCheckedRunsAndHostilePolygons) {
  std::vector<uint8_t> img(8 * 8, 0);
  Segmentation rle;
  rle.rle_height = rle.rle_width = 8;
  const int64_t big = std::numeric_limits<int64_t>::max();
  rle.rle = {1, big, int64_t{1} << 62, 1, (int64_t{1} << 62) + 63};  // wraps to 64
  expect_has(tcv::testing::error_of([&] { paint_segmentation(rle, img.data(), 8, 8, 1, "crowd"); }),
             "crowd: its run lengths cover more than the 8x8 image (run 1 is 9223372036854775807, "
             "63 pixels were left)");
  expect_has(tcv::testing::error_of([&] {
               paint_segmentation(rle, img.data(), int64_t{1} << 32, int64_t{1} << 32, 1, "huge");
             }),
             "huge: a mask of 4294967296x4294967296 pixels");
  // Coordinates far beyond int64 (their floor has no int64 value) and edges
  // whose differences overflow to inf paint what they cover, nothing else.
  Segmentation poly;
  poly.polygons = {{-1e308, -1e308, 1e308, -1e308, 1e308, 1e308, -1e308, 1e308}};
  paint_segmentation(poly, img.data(), 8, 8, 1, "everything");
  EXPECT_EQ(std::count(img.begin(), img.end(), 1), 64);
  std::fill(img.begin(), img.end(), 0);
  poly.polygons = {{-1.7e308, 4, 1.7e308, -1.7e308, 1.7e308, 1.7e308}};
  paint_segmentation(poly, img.data(), 8, 8, 1, "wedge");
  poly.polygons = {{0, 0, 4, 0, NAN, 4}};
  expect_has(tcv::testing::error_of([&] { paint_segmentation(poly, img.data(), 8, 8, 1, "nan"); }),
             "nan: polygon coordinate 4 is nan, not a finite number");
}

TEST(PoseCoco, CompressedCountsBeyondInt64AreRefused) {
  // Each count after the second adds to the one two before: 2^58
  // ("PPPPPPPPPPP8") added 70 times passes 2^63 in both chains.
  std::string s = "000";
  for (int k = 0; k < 70; ++k) s += "PPPPPPPPPPP8";
  EXPECT_EQ(decode_coco_rle("000PPPPPPPPPPP8", "x"),
            (std::vector<int64_t>{0, 0, 0, int64_t{1} << 58}));
  expect_has(tcv::testing::error_of([&] { decode_coco_rle(s, "crowd 1"); }),
             "crowd 1: compressed RLE count 65 overflows 64 bits");
  // Uncompressed counts above int64 and masks whose size overflows.
  expect_has(
      parse_err(doc(ann(R"(,"segmentation":{"counts":[18446744073709551615],"size":[30,40]})"))),
      "\"counts\" holds 18446744073709551615, more than the mask's 1200 pixels");
  expect_has(parse_err(R"({"images":[{"id":1,"file_name":"a.jpg","width":4294967296,)"
                       R"("height":4294967296}],"categories":[{"id":1,"name":"person"}],)"
                       R"("annotations":[{"id":1,"image_id":1,"category_id":1,"iscrowd":1,)"
                       R"("segmentation":{"counts":[1],"size":[4294967296,4294967296]}}]})"),
             "has more pixels than 2^63 - 1");
  expect_has(parse_err(R"({"images":[{"id":18446744073709551615,"file_name":"a.jpg","width":4,)"
                       R"("height":4}],"categories":[]})"),
             "\"id\" is 18446744073709551615, above the largest integer tcv reads (2^63 - 1)");
}

// Found by fuzz_pose_keypoints (tests/fuzz/corpus/pose_keypoints/
// number-beyond-double, this file's person with "bbox": [0,0,1e+408,1e+308]):
// a number beyond a double is nlohmann's out_of_range, not a parse_error, and
// escaped as a foreign exception (the harness's terminate), naming no file.
TEST(PoseCoco, NumbersBeyondADoubleAreErrorsNamingTheFile) {
  std::string a = ann("", 6);
  a.replace(a.find("[2,3,20,20]"), 11, "[0,0,1e+408,1e+308]");
  expect_has(parse_err(doc(a)),
             "kp.json: bad JSON: [json.exception.out_of_range.406] number overflow parsing "
             "'1e+408'");
}

// Found by fuzz_pose_keypoints (tests/fuzz/corpus/pose_keypoints/
// file-name-too-long): std::filesystem::exists threw filesystem_error ("File
// name too long") for a file_name of 4000 characters, naming no data file.
TEST(PoseCoco, FileNamesTheSystemCannotLookUpAreMissingImages) {
  tcv::testing::TempDir tmp("pose_long_name");
  std::string d = doc(ann("", 8));
  d.replace(d.find("a.jpg"), 5, std::string(4000, 'x') + ".jpg");
  put_file(tmp.path("kp.json"), d);
  PoseCocoOptions o{.annotation_file = tmp.path("kp.json"), .image_dir = tmp.path("img")};
  expect_has(tcv::testing::error_of([&] { read_coco_keypoints(o); }),
             "xxx.jpg: image file not found (listed in ");
  o.on_corrupt = OnCorrupt::skip;
  EXPECT_EQ(read_coco_keypoints(o).skipped(), 1);
}

// Issue 25, item 4: a person box far outside its image passed the reader and
// ended training with "[pose_warp] the map is singular", naming no file.
TEST(PoseCoco, PersonBoxesOutsideTheImageNameFileAndAnnotation) {
  tcv::testing::TempDir tmp("pose_bbox");
  PoseCocoOptions o = one_image_set(tmp);
  o.selection.min_area = 0;
  std::string a = ann("", 8);
  a.replace(a.find("[2,3,20,20]"), 11, "[0,0,1e308,1e308]");
  put_file(tmp.path("kp.json"), doc(a));
  expect_has(tcv::testing::error_of([&] { read_coco_keypoints(o); }),
             "kp.json: annotation id 1 of image id 7 (a.jpg) has bbox [0, 0, 1e+308, 1e+308], "
             "more than one pixel outside the 40x30 image");
  // With data.skip_corrupt the image is left out and counted.
  o.on_corrupt = OnCorrupt::skip;
  const PoseDataset ds = read_coco_keypoints(o);
  EXPECT_EQ(ds.size(), 0);
  EXPECT_EQ(ds.skipped(), 1);
  expect_has(ds.first_skipped(), "annotation id 1 of image id 7");
  // Within a pixel of the border (COCO's rounding) is fine.
  a = ann("", 8);
  a.replace(a.find("[2,3,20,20]"), 11, "[-0.5,-1,40.9,31]");
  put_file(tmp.path("kp.json"), doc(a));
  o.on_corrupt = OnCorrupt::error;
  EXPECT_EQ(read_coco_keypoints(o).size(), 1);
  // A box w x h that overflows has no area.
  expect_has(parse_err(doc(R"({"id":3,"image_id":7,"category_id":1,"iscrowd":1,)"
                           R"("bbox":[0,0,1e200,1e200]})")),
             "annotations[0] (id 3) \"bbox\" [0, 0, 1e+200, 1e+200] has no finite area");
}
