// tcv-data: makes data sets.
//
//   tcv-data scenes --out DIR [--train N] [--val N] [--test N] [--size S | --width W --height H]
//                   [--seed N] [--min-objects N] [--max-objects N] [--min-scale F]
//                   [--max-scale F] [--min-visible F] [--difficult-below F] [--noise A]
//                   [--border R] [--jpeg-quality Q] [--fmnist DIR] [--json]
//   tcv-data pose-scenes --out DIR [--train N] [--val N] [--size S | --width W --height H]
//                   [--seed N] [--min-people N] [--max-people N] [--min-height F]
//                   [--max-height F] [--min-visible F] [--crowd-p F] [--max-occluders N]
//                   [--noise A] [--jpeg-quality Q] [--json]
//
// Exit status: 0 on success, 2 for a bad command line, 1 otherwise.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "apps/cli.h"
#include "data/det/scenes.h"
#include "data/pose/scenes.h"

namespace {

constexpr const char* kUsage =
    "usage: tcv-data scenes --out DIR [options]\n"
    "       tcv-data pose-scenes --out DIR [options]\n"
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
    "\n"
    "pose-scenes: people for pose estimation, articulated stick figures with COCO's 17\n"
    "keypoints over textured backgrounds, written as images/<id>.jpg and COCO keypoint\n"
    "files (annotations/person_keypoints_{train,val}.json).\n"
    "  --out DIR            where to write (created if needed)\n"
    "  --train N            scenes in the train split (2000)\n"
    "  --val N              scenes in the val split (200)\n"
    "  --size S             S x S images (256); or --width W --height H\n"
    "  --seed N             random seed (0)\n"
    "  --min-people N       figures tried per scene, at least (1)\n"
    "  --max-people N       ... at most (4)\n"
    "  --min-height F       a figure's height / the image's shorter side, at least (0.4)\n"
    "  --max-height F       ... at most (0.95)\n"
    "  --min-visible F      share of each figure's pixels later ones may not hide (0.5)\n"
    "  --crowd-p F          probability of a crowd of tiny figures (0.1)\n"
    "  --max-occluders N    occluding bars per scene, at most (1)\n"
    "  --noise A            per-pixel noise amplitude, at most (12)\n"
    "  --jpeg-quality Q     1..100 (95)\n"
    "  --json               one JSON line instead of text\n"
    "\n"
    "Threads: OMP_NUM_THREADS.\n";

/// The options both kinds of scene sets share: where, how many, how large, the
/// seed, the noise, the JPEG quality, and --json.
template <typename SetOptions>
tcv::apps::Flags scene_set_flags(SetOptions& o, std::string& out, bool& json) {
  using tcv::apps::parse_int;
  auto& s = o.scene;
  tcv::apps::Flags f;
  f.text("--out", out)
      .integer("--train", o.train, 0)
      .integer("--val", o.val, 0)
      .with_value("--size",
                  [&s](const std::string& flag, const std::string& v) {
                    s.width = s.height = parse_int(flag, v, 16);
                  })
      .integer("--width", s.width, 16)
      .integer("--height", s.height, 16)
      .integer("--seed", o.seed, 0)
      .integer("--noise", s.noise, 0)
      .integer("--jpeg-quality", o.jpeg_quality, 1)
      .toggle("--json", json);
  return f;
}

/// What a set writer made: the images, the counts to print after them, and
/// the line that says it in words.
struct SetReport {
  int64_t images = 0;
  std::vector<std::pair<const char*, int64_t>> counts;
  std::string text;
};

/// Prints `r`, `sec` seconds after the writer started: one JSON object (out,
/// images, then the counts, seconds, images/s) or the line followed by the time.
void print_summary(bool json, const std::string& out, const SetReport& r, double sec) {
  if (json) {
    std::cout << "{\"out\":\"" << out << "\",\"images\":" << r.images;
    for (const auto& [key, n] : r.counts) std::cout << ",\"" << key << "\":" << n;
    std::cout << ",\"seconds\":" << sec << ",\"images_per_sec\":" << r.images / sec << "}\n";
  } else {
    std::cout << r.text << ", " << sec << " s (" << r.images / sec << " images/s)\n";
  }
}

/// One subcommand: the shared flags and those `own` adds, then `write(o, out)`
/// writes the set and says what it made.
template <typename SetOptions, typename OwnFlags, typename Write>
int run_set(tcv::apps::Args& a, const std::string& name, OwnFlags own, Write write) {
  SetOptions o;
  std::string out;
  bool json = false;
  tcv::apps::Flags f = scene_set_flags(o, out, json);
  own(f, o);
  f.parse(a);
  if (out.empty()) throw tcv::apps::UsageError{name + " needs --out DIR"};
  const auto t0 = std::chrono::steady_clock::now();
  const SetReport r = write(o, out);
  print_summary(json, out, r,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

int run_scenes(tcv::apps::Args& a) {
  using tcv::data::SceneSetOptions;
  return run_set<SceneSetOptions>(
      a, "scenes",
      [](tcv::apps::Flags& f, SceneSetOptions& o) {
        auto& sc = o.scene;
        f.integer("--test", o.test, 0)
            .integer("--min-objects", sc.min_objects, 0)
            .integer("--max-objects", sc.max_objects, 0)
            .number("--min-scale", sc.min_scale)
            .number("--max-scale", sc.max_scale)
            .number("--min-visible", sc.min_visible)
            .number("--difficult-below", sc.difficult_below)
            .integer("--border", sc.border, 0)
            .text("--fmnist", o.fmnist_dir);
      },
      [](const SceneSetOptions& o, const std::string& out) {
        const tcv::data::SceneSetSummary s = tcv::data::write_scene_set(o, out);
        std::ostringstream text;
        text << "tcv-data scenes: " << s.images << " images (train " << o.train << ", val " << o.val
             << ", test " << o.test << "), " << s.objects << " objects (" << s.difficult
             << " difficult, " << s.truncated << " truncated) in " << out;
        return SetReport{
            s.images,
            {{"objects", s.objects}, {"difficult", s.difficult}, {"truncated", s.truncated}},
            text.str()};
      });
}

int run_pose_scenes(tcv::apps::Args& a) {
  using tcv::data::PoseSceneSetOptions;
  return run_set<PoseSceneSetOptions>(
      a, "pose-scenes",
      [](tcv::apps::Flags& f, PoseSceneSetOptions& o) {
        auto& sc = o.scene;
        f.integer("--min-people", sc.min_people, 0)
            .integer("--max-people", sc.max_people, 0)
            .number("--min-height", sc.min_height)
            .number("--max-height", sc.max_height)
            .number("--min-visible", sc.min_visible)
            .number("--crowd-p", sc.crowd_p)
            .integer("--max-occluders", sc.max_occluders, 0);
      },
      [](const PoseSceneSetOptions& o, const std::string& out) {
        const tcv::data::PoseSceneSetSummary s = tcv::data::write_pose_scene_set(o, out);
        std::ostringstream text;
        text << "tcv-data pose-scenes: " << s.images << " images (train " << o.train << ", val "
             << o.val << "), " << s.people << " people (" << s.labelled << " labelled keypoints, "
             << s.visible << " visible), " << s.crowds << " crowds in " << out;
        return SetReport{s.images,
                         {{"people", s.people},
                          {"labelled_keypoints", s.labelled},
                          {"visible_keypoints", s.visible},
                          {"crowds", s.crowds}},
                         text.str()};
      });
}

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-data", kUsage, [&] {
    tcv::apps::Args a(argc, argv);
    if (!a.next()) throw tcv::apps::UsageError{"a subcommand (scenes, pose-scenes) is required"};
    if (a.arg() == "--help" || a.arg() == "-h") {
      std::cout << kUsage;
      return 0;
    }
    const std::string cmd = a.arg();
    if (cmd != "scenes" && cmd != "pose-scenes")
      throw tcv::apps::UsageError{"unknown subcommand '" + cmd + "' (known: scenes, pose-scenes)"};
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
        std::cout << kUsage;
        return 0;
      }
    return cmd == "scenes" ? run_scenes(a) : run_pose_scenes(a);
  });
}
