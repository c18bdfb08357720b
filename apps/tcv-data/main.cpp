// tcv-data: makes data sets.
//
//   tcv-data scenes --out DIR [--train N] [--val N] [--test N] [--size S | --width W --height H]
//                   [--seed N] [--min-objects N] [--max-objects N] [--min-scale F]
//                   [--max-scale F] [--min-visible F] [--difficult-below F] [--noise A]
//                   [--border R] [--jpeg-quality Q] [--fmnist DIR] [--json]
//
// Exit status: 0 on success, 2 for a bad command line, 1 otherwise.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "apps/cli.h"
#include "data/det/scenes.h"

namespace {

constexpr const char* kUsage =
    "usage: tcv-data scenes --out DIR [options]\n"
    "\n"
    "scenes: multi-object scenes drawn from Fashion-MNIST items, written as a Pascal VOC\n"
    "tree (JPEGImages/, Annotations/, SegmentationClass/, SegmentationObject/, ImageSets/),\n"
    "COCO files (annotations/instances_{train,val,test}.json) and classes.txt.\n"
    "The same options and seed give the same files on any number of threads.\n"
    "  --out DIR            where to write (created if needed)\n"
    "  --train N            scenes in the train split, from Fashion-MNIST's train items (2000)\n"
    "  --val N              scenes in the val split, from its test items (500)\n"
    "  --test N             scenes in the test split, from its test items (0)\n"
    "  --size S             S x S images (300); or --width W --height H\n"
    "  --seed N             random seed (0)\n"
    "  --min-objects N      items tried per scene, at least (2)\n"
    "  --max-objects N      ... at most (6)\n"
    "  --min-scale F        an item's longer side / the image's shorter side, at least (0.18)\n"
    "  --max-scale F        ... at most (0.6)\n"
    "  --min-visible F      share of each object's pixels later items may not hide (0.4)\n"
    "  --difficult-below F  objects with less of their pixels visible are difficult (0.6)\n"
    "  --noise A            per-pixel noise amplitude, at most (16)\n"
    "  --border R           void (255) band around object outlines in the masks (1)\n"
    "  --jpeg-quality Q     1..100 (95)\n"
    "  --fmnist DIR         Fashion-MNIST IDX files (/usr/share/datasets/fashion-mnist)\n"
    "  --json               one JSON line instead of text\n"
    "\n"
    "Threads: OMP_NUM_THREADS.\n";

double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw tcv::apps::UsageError{flag + " expects a number, got '" + text + "'"};
  return v;
}

int run_scenes(tcv::apps::Args& a) {
  using tcv::apps::parse_int;
  tcv::data::SceneSetOptions o;
  std::string out;
  bool json = false;
  while (a.next()) {
    auto& s = o.scene;
    if (a.is("--out"))
      out = a.value("--out");
    else if (a.is("--train"))
      o.train = parse_int("--train", a.value("--train"), 0);
    else if (a.is("--val"))
      o.val = parse_int("--val", a.value("--val"), 0);
    else if (a.is("--test"))
      o.test = parse_int("--test", a.value("--test"), 0);
    else if (a.is("--size"))
      s.width = s.height = parse_int("--size", a.value("--size"), 16);
    else if (a.is("--width"))
      s.width = parse_int("--width", a.value("--width"), 16);
    else if (a.is("--height"))
      s.height = parse_int("--height", a.value("--height"), 16);
    else if (a.is("--seed"))
      o.seed = static_cast<uint64_t>(parse_int("--seed", a.value("--seed"), 0));
    else if (a.is("--min-objects"))
      s.min_objects = parse_int("--min-objects", a.value("--min-objects"), 0);
    else if (a.is("--max-objects"))
      s.max_objects = parse_int("--max-objects", a.value("--max-objects"), 0);
    else if (a.is("--min-scale"))
      s.min_scale = parse_double("--min-scale", a.value("--min-scale"));
    else if (a.is("--max-scale"))
      s.max_scale = parse_double("--max-scale", a.value("--max-scale"));
    else if (a.is("--min-visible"))
      s.min_visible = parse_double("--min-visible", a.value("--min-visible"));
    else if (a.is("--difficult-below"))
      s.difficult_below = parse_double("--difficult-below", a.value("--difficult-below"));
    else if (a.is("--noise"))
      s.noise = static_cast<int>(parse_int("--noise", a.value("--noise"), 0));
    else if (a.is("--border"))
      s.border = static_cast<int>(parse_int("--border", a.value("--border"), 0));
    else if (a.is("--jpeg-quality"))
      o.jpeg_quality = static_cast<int>(parse_int("--jpeg-quality", a.value("--jpeg-quality"), 1));
    else if (a.is("--fmnist"))
      o.fmnist_dir = a.value("--fmnist");
    else if (a.arg() == "--json")
      json = true;
    else
      throw tcv::apps::UsageError{"unknown option '" + a.arg() + "'"};
  }
  if (out.empty()) throw tcv::apps::UsageError{"scenes needs --out DIR"};
  const auto t0 = std::chrono::steady_clock::now();
  const tcv::data::SceneSetSummary s = tcv::data::write_scene_set(o, out);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::cout << "{\"out\":\"" << out << "\",\"images\":" << s.images
              << ",\"objects\":" << s.objects << ",\"difficult\":" << s.difficult
              << ",\"truncated\":" << s.truncated << ",\"seconds\":" << sec
              << ",\"images_per_sec\":" << s.images / sec << "}\n";
  } else {
    std::cout << "tcv-data scenes: " << s.images << " images (train " << o.train << ", val "
              << o.val << ", test " << o.test << "), " << s.objects << " objects (" << s.difficult
              << " difficult, " << s.truncated << " truncated) in " << out << ", " << sec << " s ("
              << s.images / sec << " images/s)\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-data", kUsage, [&] {
    tcv::apps::Args a(argc, argv);
    if (!a.next()) throw tcv::apps::UsageError{"a subcommand (scenes) is required"};
    if (a.arg() == "--help" || a.arg() == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a.arg() != "scenes")
      throw tcv::apps::UsageError{"unknown subcommand '" + a.arg() + "' (known: scenes)"};
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
        std::cout << kUsage;
        return 0;
      }
    return run_scenes(a);
  });
}
