// Pascal VOC annotation XML (pugixml): any bytes give an annotation or a
// tcv::Error, and what format_voc_annotation writes reads back as the same
// annotation.
#include <cstdint>
#include <string>

#include "data/det/voc.h"
#include "fuzz_support.h"

namespace {

bool same(const tcv::data::VocAnnotation& a, const tcv::data::VocAnnotation& b) {
  if (a.folder != b.folder || a.filename != b.filename || a.width != b.width ||
      a.height != b.height || a.depth != b.depth || a.segmented != b.segmented ||
      a.objects.size() != b.objects.size())
    return false;
  for (size_t k = 0; k < a.objects.size(); ++k) {
    const auto &o = a.objects[k], &p = b.objects[k];
    if (o.name != p.name || o.pose != p.pose || o.truncated != p.truncated ||
        o.difficult != p.difficult || o.xmin != p.xmin || o.ymin != p.ymin || o.xmax != p.xmax ||
        o.ymax != p.ymax)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string xml(reinterpret_cast<const char*>(data), size);
  tcv::data::VocAnnotation a;
  try {
    a = tcv::data::parse_voc_annotation(xml, "fuzz.xml");
  } catch (const tcv::Error&) {
    return 0;
  }
  TCV_FUZZ_EXPECT(a.width > 0 && a.height > 0);
  for (const auto& o : a.objects) TCV_FUZZ_EXPECT(!o.name.empty());
  tcv::data::VocAnnotation b;
  try {
    b = tcv::data::parse_voc_annotation(tcv::data::format_voc_annotation(a), "round-trip.xml");
  } catch (const tcv::Error& e) {
    std::fprintf(stderr, "round trip: %s\n", e.what());
    TCV_FUZZ_EXPECT(!"what format_voc_annotation writes reads back");
  }
  TCV_FUZZ_EXPECT(same(a, b));
  return 0;
}
