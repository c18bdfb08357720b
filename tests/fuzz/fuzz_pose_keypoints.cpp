// COCO person keypoint files (data/pose/coco.h): any bytes give a file or a
// tcv::Error; what format_coco_keypoints writes reads back; read_coco_keypoints
// (images found in a directory of empty files, data.skip_corrupt's skip) keeps
// boxes and keypoints on their images; and every record's loss mask paints its
// crowd regions (polygons, RLE, compressed RLE), people and ignored people
// inside the image, whoever is trained.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/pose/coco.h"
#include "fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using namespace tcv::data;

// The image files seeds name (scenes' 000001.jpg ...; hand-made a.jpg, b.jpg),
// empty: the reader only asks whether they exist.
const std::string& image_dir() {
  static const std::string dir = tcv::fuzz::empty_image_dir({"a.jpg", "b.jpg", "c.jpg"});
  return dir;
}

// Paints the loss mask of records small enough to paint quickly.
void paint(const PoseRecord& r) {
  if (r.height > 4096 || r.width > 4096 || r.height * r.width > (1 << 20)) return;
  try {
    const tcv::Tensor m = pose_loss_mask(r);
    TCV_FUZZ_EXPECT(m.size(0) == r.height && m.size(1) == r.width);
  } catch (const tcv::Error&) {
    // A run-length mask of another size than its image is reported, not painted.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  CocoKeypointFile f;
  try {
    f = parse_coco_keypoints(text, "fuzz.json");
  } catch (const tcv::Error&) {
    return 0;
  }
  for (const CocoImage& im : f.images) TCV_FUZZ_EXPECT(im.width > 0 && im.height > 0);
  for (const CocoPersonAnnotation& a : f.annotations) {
    for (double v : a.bbox) TCV_FUZZ_EXPECT(std::isfinite(v));
    TCV_FUZZ_EXPECT(a.bbox[2] >= 0 && a.bbox[3] >= 0 && std::isfinite(a.area));
    for (const Keypoint& k : a.keypoints) TCV_FUZZ_EXPECT(std::isfinite(k.x) && std::isfinite(k.y));
    const Segmentation& s = a.segmentation;
    if (!s.rle.empty()) {
      int64_t total = 0;
      for (int64_t run : s.rle) {
        TCV_FUZZ_EXPECT(run >= 0 && run <= s.rle_height * s.rle_width - total);
        total += run;
      }
      TCV_FUZZ_EXPECT(total == s.rle_height * s.rle_width);
    }
  }
  try {
    const CocoKeypointFile g = parse_coco_keypoints(format_coco_keypoints(f), "round-trip.json");
    TCV_FUZZ_EXPECT(g.images.size() == f.images.size() &&
                    g.annotations.size() == f.annotations.size());
  } catch (const tcv::Error& e) {
    std::fprintf(stderr, "round trip: %s\n", e.what());
    TCV_FUZZ_EXPECT(!"what format_coco_keypoints writes reads back");
  }
  PoseCocoOptions o{.annotation_file = tcv::fuzz::write_input(text, ".json"),
                    .image_dir = image_dir()};
  o.on_corrupt = OnCorrupt::skip;
  for (const PoseSelection sel :
       {PoseSelection{},
        PoseSelection{.min_keypoints = 0, .min_area = 0, .min_centre_distance = 0}}) {
    o.selection = sel;
    PoseDataset ds = [&] {
      try {
        return read_coco_keypoints(o);
      } catch (const tcv::Error& e) {
        std::fprintf(stderr, "read: %s\n", e.what());
        TCV_FUZZ_EXPECT(!"a file that parses reads with OnCorrupt::skip");
        std::abort();
      }
    }();
    for (const PoseRecord& r : ds.records()) {
      const auto W = static_cast<double>(r.width), H = static_cast<double>(r.height);
      for (const PosePerson& p : r.people) {
        TCV_FUZZ_EXPECT(p.box[0] >= -1 && p.box[1] >= -1 && p.box[2] <= W + 1 && p.box[3] <= H + 1);
        for (const Keypoint& k : p.keypoints)
          TCV_FUZZ_EXPECT(!k.labelled() ||
                          (k.x >= -1 && k.y >= -1 && k.x <= W + 1 && k.y <= H + 1));
      }
      paint(r);
    }
  }
  return 0;
}
