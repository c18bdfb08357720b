// Pascal VOC reading: small trees written here, several year roots, class
// maps, and every kind of corrupt input as an error naming the file (or a
// skipped, counted image).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/det/voc.h"
#include "data/image.h"
#include "support/gradcheck.h"
#include "support/png_builder.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

using tcv::testing::put_file;

VocObject obj(const std::string& name, double xmin, double ymin, double xmax, double ymax,
              bool difficult = false) {
  VocObject o;
  o.name = name;
  o.difficult = difficult;
  o.xmin = xmin;
  o.ymin = ymin;
  o.xmax = xmax;
  o.ymax = ymax;
  return o;
}

// A year root with images `ids` (each 40x30 unless sizes say otherwise) and the
// given objects, listed in ImageSets/Main/<split>.txt.
void make_root(const std::string& root, const std::vector<std::string>& ids,
               const std::vector<std::vector<VocObject>>& objects, const std::string& split,
               int64_t width = 40, int64_t height = 30) {
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) {
    VocAnnotation a;
    a.filename = ids[i] + ".jpg";
    a.width = width;
    a.height = height;
    a.objects = objects[i];
    put_file(root + "/Annotations/" + ids[i] + ".xml", format_voc_annotation(a));
    fs::create_directories(root + "/JPEGImages");
    write_image(root + "/JPEGImages/" + ids[i] + ".jpg",
                full({3, height, width}, 40.0 * static_cast<double>(i + 1), {.dtype = DType::u8}));
    list += ids[i] + "\n";
  }
  put_file(root + "/ImageSets/Main/" + split + ".txt", list);
}

std::string err(const VocOptions& o) {
  return tcv::testing::error_of([&] { read_voc(o); });
}

}  // namespace

TEST(Voc, AnnotationRoundTrip) {
  VocAnnotation a;
  a.folder = "VOC2007";
  a.filename = "000001.jpg";
  a.width = 353;
  a.height = 500;
  a.segmented = true;
  a.objects = {obj("dog", 48, 240, 195, 371), obj("person", 8, 12, 352, 498, true)};
  a.objects[1].truncated = true;
  a.objects[1].pose = "Left";
  const VocAnnotation b = parse_voc_annotation(format_voc_annotation(a), "x.xml");
  EXPECT_EQ(b.folder, "VOC2007");
  EXPECT_EQ(b.filename, "000001.jpg");
  EXPECT_EQ(b.width, 353);
  EXPECT_EQ(b.height, 500);
  EXPECT_TRUE(b.segmented);
  ASSERT_EQ(b.objects.size(), 2u);
  EXPECT_EQ(b.objects[0].name, "dog");
  EXPECT_EQ(b.objects[0].xmax, 195);
  EXPECT_FALSE(b.objects[0].difficult);
  EXPECT_TRUE(b.objects[1].difficult);
  EXPECT_TRUE(b.objects[1].truncated);
  EXPECT_EQ(b.objects[1].pose, "Left");
  // VOC's own files: optional fields absent, whitespace around values.
  const VocAnnotation c = parse_voc_annotation(
      "<annotation><size><width> 500</width><height>375 </height></size>"
      "<object><name>cat</name><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>3.5</xmax>"
      "<ymax>4</ymax></bndbox></object></annotation>",
      "y.xml");
  EXPECT_EQ(c.width, 500);
  EXPECT_EQ(c.depth, 3);
  EXPECT_EQ(c.objects[0].xmax, 3.5);
  EXPECT_FALSE(c.objects[0].difficult);
}

TEST(Voc, BadAnnotationsNameTheFileAndTheFault) {
  auto fault = [](const std::string& xml) {
    return tcv::testing::error_of([&] { parse_voc_annotation(xml, "Annotations/7.xml"); });
  };
  std::string e =
      fault("<annotation>\n<size><width>5</width>\n<height>5</height></size>\n<object>");
  EXPECT_NE(e.find("Annotations/7.xml: bad XML at line 4"), std::string::npos) << e;
  EXPECT_NE(fault("<root/>").find("no <annotation>"), std::string::npos);
  EXPECT_NE(fault("<annotation></annotation>").find("no <size>"), std::string::npos);
  EXPECT_NE(fault("<annotation><size><width>0</width><height>5</height></size></annotation>")
                .find("not positive"),
            std::string::npos);
  const std::string head = "<annotation><size><width>9</width><height>9</height></size>";
  EXPECT_NE(fault(head + "<object><bndbox/></object></annotation>").find("object 0 has no <name>"),
            std::string::npos);
  EXPECT_NE(fault(head + "<object><name>cat</name></object></annotation>")
                .find("object 0 (cat) has no <bndbox>"),
            std::string::npos);
  e = fault(head +
            "<object><name>cat</name><bndbox><xmin>1</xmin><ymin>x2</ymin><xmax>3</xmax>"
            "<ymax>4</ymax></bndbox></object></annotation>");
  EXPECT_NE(e.find("<ymin> is 'x2', not a decimal number"), std::string::npos) << e;
  // Issue 25, item 8: strtod read "0x20" as 32; hexadecimal, inf and nan are refused.
  for (const char* bad : {"0x20", "0X1p4", "inf", "nan", "1e999", "--1", "1.5.2", " "}) {
    e = fault(head + "<object><name>cat</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>" + bad +
              "</xmax><ymax>4</ymax></bndbox></object></annotation>");
    EXPECT_NE(e.find("Annotations/7.xml: object 0 (cat) <bndbox> <xmax> is '"), std::string::npos)
        << bad << ": " << e;
  }
  e = fault(head +
            "<object><name>cat</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>0x20</xmax>"
            "<ymax>4</ymax></bndbox></object></annotation>");
  EXPECT_NE(e.find("<xmax> is '0x20', not a decimal number"), std::string::npos) << e;
  const VocAnnotation ok = parse_voc_annotation(
      head +
          "<object><name>cat</name><bndbox><xmin>+1</xmin><ymin>-0.5</ymin><xmax>3.25e0</xmax>"
          "<ymax> 4. </ymax></bndbox></object></annotation>",
      "ok.xml");
  EXPECT_EQ(ok.objects[0].xmin, 1);
  EXPECT_EQ(ok.objects[0].ymin, -0.5);
  EXPECT_EQ(ok.objects[0].xmax, 3.25);
  EXPECT_EQ(ok.objects[0].ymax, 4);
  e = fault(head +
            "<object><name>cat</name><difficult>2</difficult><bndbox><xmin>1</xmin><ymin>1</ymin>"
            "<xmax>3</xmax><ymax>4</ymax></bndbox></object></annotation>");
  EXPECT_NE(e.find("<difficult> is 2, expected 0 or 1"), std::string::npos) << e;
}

TEST(Voc, ReadsSeveralRootsWithBoxesInContinuousPixels) {
  tcv::testing::TempDir tmp("voc");
  const std::string r07 = tmp.path("VOC2007"), r12 = tmp.path("VOC2012");
  make_root(
      r07, {"000005", "000007"},
      {{obj("chair", 1, 1, 40, 30), obj("dog", 10, 5, 19, 14, true)}, {obj("car", 3, 4, 5, 6)}},
      "trainval");
  make_root(r12, {"2008_000008"}, {{}}, "trainval");
  const DetDataset d = read_voc({.roots = {r07, r12}});
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.num_classes(), 20);
  EXPECT_EQ(d.class_names()[8], "chair");
  const DetRecord& a = d.record(0);
  EXPECT_EQ(a.image_id, 0);
  EXPECT_EQ(a.width, 40);
  EXPECT_EQ(a.height, 30);
  EXPECT_EQ(a.image_path, r07 + "/JPEGImages/000005.jpg");
  // 1-based inclusive corners -> continuous: x1 = xmin - 1, x2 = xmax.
  EXPECT_EQ(a.target.boxes[0], (Box{0, 0, 40, 30}));
  EXPECT_EQ(a.target.boxes[1], (Box{9, 4, 19, 14}));
  EXPECT_EQ(a.target.labels, (std::vector<int64_t>{9, 12}));
  EXPECT_EQ(a.target.difficult, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(a.target.area[1], 100.0);
  EXPECT_EQ(d.record(1).target.labels, (std::vector<int64_t>{7}));
  EXPECT_EQ(d.record(2).image_id, 2);
  EXPECT_EQ(d.record(2).target.size(), 0);
  const DetSample s = d.load(1);
  EXPECT_EQ(s.image.shape(), (Shape{3, 30, 40}));
  EXPECT_EQ(s.orig_width, 40);
  EXPECT_EQ(s.target.boxes[0], (Box{2, 3, 5, 6}));
  EXPECT_EQ(d.skipped(), 0);

  // classes.txt in the first root names the classes; explicit names win.
  std::ofstream(r07 + "/classes.txt") << "car\ndog\n\nchair\n";
  const DetDataset own = read_voc({.roots = {r07}});
  EXPECT_EQ(own.class_names(), (std::vector<std::string>{"car", "dog", "chair"}));
  EXPECT_EQ(own.record(0).target.labels, (std::vector<int64_t>{3, 2}));
  EXPECT_NE(err({.roots = {r07}, .class_names = {"dog", "chair"}})
                .find("object 0 has unknown class 'car' (known: dog, chair)"),
            std::string::npos);
}

TEST(Voc, CorruptInputIsAnErrorOrSkippedAndCounted) {
  struct Case {
    const char* what;
    std::function<void(const std::string&)> damage;  // applied to a good root
    const char* expect;                              // in the error
  };
  const std::vector<Case> cases = {
      {"bad XML", [](const std::string& r) { put_file(r + "/Annotations/b.xml", "<annotation>"); },
       "b.xml: bad XML at line 1"},
      {"unknown class",
       [](const std::string& r) {
         VocAnnotation a;
         a.width = 40, a.height = 30, a.objects = {obj("unicorn", 1, 1, 2, 2)};
         put_file(r + "/Annotations/b.xml", format_voc_annotation(a));
       },
       "b.xml: object 0 has unknown class 'unicorn'"},
      {"box outside",
       [](const std::string& r) {
         VocAnnotation a;
         a.width = 40, a.height = 30, a.objects = {obj("cat", 5, 5, 41, 10)};
         put_file(r + "/Annotations/b.xml", format_voc_annotation(a));
       },
       "b.xml: object 0 (cat) box (xmin 5, ymin 5, xmax 41, ymax 10) is outside the image"},
      {"zero corner",
       [](const std::string& r) {
         VocAnnotation a;
         a.width = 40, a.height = 30, a.objects = {obj("cat", 0, 5, 10, 10)};
         put_file(r + "/Annotations/b.xml", format_voc_annotation(a));
       },
       "is outside the image or its corners are out of order"},
      {"corners swapped",
       [](const std::string& r) {
         VocAnnotation a;
         a.width = 40, a.height = 30, a.objects = {obj("cat", 9, 5, 4, 10)};
         put_file(r + "/Annotations/b.xml", format_voc_annotation(a));
       },
       "corners are out of order"},
      {"missing annotation", [](const std::string& r) { fs::remove(r + "/Annotations/b.xml"); },
       "b.xml: annotation file not found (listed in"},
      {"missing image", [](const std::string& r) { fs::remove(r + "/JPEGImages/b.jpg"); },
       "b.jpg: image file not found"},
  };
  for (const Case& c : cases) {
    tcv::testing::TempDir tmp("voc_bad");
    const std::string root = tmp.path("VOC");
    make_root(root, {"a", "b", "c"},
              {{obj("cat", 1, 1, 10, 10)}, {obj("dog", 2, 2, 20, 20)}, {obj("cow", 3, 3, 30, 30)}},
              "val");
    c.damage(root);
    const std::string e = err({.roots = {root}, .split = "val"});
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.what << ": " << e;
    const DetDataset d = read_voc({.roots = {root}, .split = "val", .on_corrupt = OnCorrupt::skip});
    EXPECT_EQ(d.size(), 2) << c.what;
    EXPECT_EQ(d.skipped(), 1) << c.what;
    EXPECT_NE(d.first_skipped().find(c.expect), std::string::npos) << c.what;
    EXPECT_EQ(d.record(1).target.labels, (std::vector<int64_t>{10})) << c.what;  // "c" kept
  }
  // A corrupt JPEG, and one of another size than its annotation says, fail at load().
  tcv::testing::TempDir tmp("voc_img");
  const std::string root = tmp.path("VOC");
  make_root(root, {"a", "b"}, {{obj("cat", 1, 1, 10, 10)}, {obj("dog", 1, 1, 5, 5)}}, "test");
  put_file(root + "/JPEGImages/a.jpg", "\xFF\xD8 not a jpeg");
  write_image(root + "/JPEGImages/b.jpg", zeros({3, 31, 40}, {.dtype = DType::u8}));
  const DetDataset d = read_voc({.roots = {root}, .split = "test"});
  EXPECT_NE(tcv::testing::error_of([&] { d.load(0); }).find("a.jpg: cannot decode image"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              d.load(1);
            }).find("b.jpg: the image is 40x31 (width x height) but"),
            std::string::npos);
  const DetDataset s = read_voc({.roots = {root}, .split = "test", .on_corrupt = OnCorrupt::skip});
  EXPECT_FALSE(s.load(0).image.defined());
  EXPECT_FALSE(s.load(1).image.defined());
  EXPECT_EQ(s.skipped(), 2);
  // A missing list, and a list line with two fields.
  EXPECT_NE(err({.roots = {root}, .split = "train"}).find("Main/train.txt: no such image list"),
            std::string::npos);
  put_file(root + "/ImageSets/Main/two.txt", "a\nb 1\n");
  EXPECT_NE(err({.roots = {root}, .split = "two"}).find("two.txt:2: expected one image id"),
            std::string::npos);
}

// Issue 25, item 3: an 18000 x 18000 PNG in JPEGImages/ (its XML saying so)
// made training allocate 10.9 GB before failing with "[CpuAllocator] out of
// memory", naming no file. Loading it now fails from its header, naming the
// file, its size and data.max_pixels; with OnCorrupt::skip it is counted.
TEST(Voc, DecompressionBombsAreRefusedWhenLoaded) {
  tcv::testing::TempDir tmp("voc_bomb");
  const std::string root = tmp.path("VOC2007");
  make_root(root, {"000001"}, {{obj("dog", 1, 1, 17000, 17000)}}, "train", 18000, 18000);
  const std::string image = root + "/JPEGImages/000001.jpg";
  put_file(image, tcv::testing::png_claiming(
                      encode_image(zeros({3, 2, 2}, {.dtype = DType::u8}), ImageFormat::png), 18000,
                      18000));
  VocOptions o{.roots = {root}, .split = "train", .class_names = {"dog"}};
  const DetDataset ds = read_voc(o);
  const std::string e = tcv::testing::error_of([&] { ds.load(0); });
  EXPECT_NE(e.find(image + ": image is 18000x18000 (width x height, 324000000 pixels), more than "
                           "data.max_pixels = 178956970"),
            std::string::npos)
      << e;
  o.on_corrupt = OnCorrupt::skip;
  const DetDataset skipping = read_voc(o);
  EXPECT_FALSE(skipping.load(0).image.defined());
  EXPECT_EQ(skipping.skipped(), 1);
  // The readers pass their limit on: a 40 x 30 image under a limit of 1199 pixels.
  make_root(root, {"000002"}, {{obj("dog", 1, 1, 20, 20)}}, "val");
  const DetDataset small = read_voc(
      {.roots = {root}, .split = "val", .class_names = {"dog"}, .limits = {.max_pixels = 1199}});
  EXPECT_NE(
      tcv::testing::error_of([&] {
        small.load(0);
      }).find("image is 40x30 (width x height, 1200 pixels), more than data.max_pixels = 1199"),
      std::string::npos);
}
