// COCO instances JSON: any bytes give a CocoFile or a tcv::Error, and what
// format_coco writes reads back as the same file.
#include <cmath>
#include <cstdint>
#include <string>

#include "data/det/coco.h"
#include "fuzz_support.h"

namespace {

bool same(const tcv::data::CocoFile& a, const tcv::data::CocoFile& b) {
  if (a.images.size() != b.images.size() || a.categories.size() != b.categories.size() ||
      a.annotations.size() != b.annotations.size())
    return false;
  for (size_t k = 0; k < a.images.size(); ++k) {
    const auto &x = a.images[k], &y = b.images[k];
    if (x.id != y.id || x.file_name != y.file_name || x.width != y.width || x.height != y.height)
      return false;
  }
  for (size_t k = 0; k < a.categories.size(); ++k) {
    const auto &x = a.categories[k], &y = b.categories[k];
    if (x.id != y.id || x.name != y.name || x.supercategory != y.supercategory) return false;
  }
  for (size_t k = 0; k < a.annotations.size(); ++k) {
    const auto &x = a.annotations[k], &y = b.annotations[k];
    if (x.id != y.id || x.image_id != y.image_id || x.category_id != y.category_id ||
        x.bbox != y.bbox || x.area != y.area || x.iscrowd != y.iscrowd)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tcv::data::CocoFile f;
  try {
    f = tcv::data::parse_coco(text, "fuzz.json");
  } catch (const tcv::Error&) {
    return 0;
  }
  for (const auto& im : f.images) TCV_FUZZ_EXPECT(im.width > 0 && im.height > 0);
  for (const auto& o : f.annotations) {
    for (double v : o.bbox) TCV_FUZZ_EXPECT(std::isfinite(v));
    TCV_FUZZ_EXPECT(o.bbox[2] >= 0 && o.bbox[3] >= 0 && std::isfinite(o.area));
  }
  tcv::data::CocoFile g;
  try {
    g = tcv::data::parse_coco(tcv::data::format_coco(f), "round-trip.json");
  } catch (const tcv::Error& e) {
    std::fprintf(stderr, "round trip: %s\n", e.what());
    TCV_FUZZ_EXPECT(!"what format_coco writes reads back");
  }
  TCV_FUZZ_EXPECT(same(f, g));
  return 0;
}
