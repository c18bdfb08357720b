// report.html pieces: base64, the PNG encoder, and the rendered page.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/error.h"
#include "train/report.h"

using namespace tcv;
using namespace tcv::train;

namespace {

uint32_t be32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(Report, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\x00\x10", 3)), "/wAQ");
}

TEST(Report, PngHasSignatureHeaderAndChunks) {
  std::vector<uint8_t> px(3 * 5 * 7);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  const std::string png = encode_png(px.data(), 3, 5, 7);
  ASSERT_GT(png.size(), 8u + 25u + 12u + 12u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(be32(png, 8), 13u);  // IHDR length
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(png, 16), 7u);  // width
  EXPECT_EQ(be32(png, 20), 5u);  // height
  EXPECT_EQ(png[24], 8);         // bit depth
  EXPECT_EQ(png[25], 2);         // RGB
  // IHDR's CRC of "IHDR" + data, then IDAT, and IEND with its fixed CRC last.
  EXPECT_EQ(png.substr(37, 4), "IDAT");
  EXPECT_EQ(png.substr(png.size() - 12), std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
  const std::string gray = encode_png(px.data(), 1, 5, 7);
  EXPECT_EQ(gray[25], 0);
  EXPECT_THROW(encode_png(px.data(), 2, 5, 7), Error);
}

TEST(Report, PageHasChartsSamplesAndConfig) {
  ReportInputs in;
  in.title = "run <x>";
  in.config_toml = "[solver.lr]\nbase_lr = 0.05\n";
  for (int i = 1; i <= 3; ++i) {
    Value t = Value::object();
    t["split"] = "train";
    t["iter"] = 10 * i;
    t["loss"] = 2.0 / i;
    t["lr"] = 0.1;
    t["images_per_sec"] = 1000.0 + i;
    in.metrics.push_back(t);
  }
  Value v = Value::object();
  v["split"] = "val";
  v["iter"] = 30;
  v["top1"] = 81.5;
  v["top5"] = 99.0;
  v["loss"] = 0.5;
  in.metrics.push_back(v);
  in.headline = {{"top1", "top-1", "%"}, {"top5", "top-5", "%"}};
  in.val_charts = {{"validation accuracy (%)", {{"top1", "top-1"}, {"top5", "top-5"}}}};
  for (int i = 0; i < 5; ++i)
    in.samples.push_back({std::vector<uint8_t>(4, static_cast<uint8_t>(i)), 1, 2, 2, i, i % 2});
  in.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  const std::string html = render_report(in);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 4u);
  EXPECT_EQ(count(html, "</svg>"), 4u);
  EXPECT_EQ(count(html, "<img "), 5u);
  EXPECT_EQ(count(html, "src=\"data:image/png;base64,iVBORw0KGgo"), 5u);  // PNG signature
  EXPECT_NE(html.find("base_lr = 0.05"), std::string::npos);
  EXPECT_NE(html.find("run &lt;x&gt;"), std::string::npos);
  EXPECT_NE(html.find("pred: Trouser<br>true: Dress"), std::string::npos);  // sample 3
  EXPECT_NE(html.find("top-1 81.5%"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no fetches
}
