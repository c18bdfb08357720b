#include "train/tasks/scenes.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "data/det/scenes.h"
#include "data/pose/scenes.h"
#include "engine/json.h"
#include "train/task.h"

namespace tcv::train {

namespace fs = std::filesystem;

std::vector<KeySpec> scene_keys() {
  using VT = ValueType;
  return {
      {"data.scenes.train", VT::integer, int64_t{2000},
       "scenes: training images generated on first use (data.data_dir)"},
      {"data.scenes.val", VT::integer, int64_t{500}, "scenes: validation images"},
      {"data.scenes.size", VT::integer, int64_t{300}, "scenes: image side in pixels"},
      {"data.scenes.seed", VT::integer, int64_t{0}, "scenes: the generator's seed"},
  };
}

std::vector<KeySpec> people_scene_keys() {
  using VT = ValueType;
  return {
      {"data.scenes.min_people", VT::integer, int64_t{1},
       "pose scenes: figures tried per scene, at least"},
      {"data.scenes.max_people", VT::integer, int64_t{4}, "pose scenes: ... at most"},
      {"data.scenes.min_height", VT::floating, 0.4,
       "pose scenes: a figure's height / the image's side, at least"},
      {"data.scenes.max_height", VT::floating, 0.95, "pose scenes: ... at most"},
  };
}

SceneConfig parse_scene_config(const Config& cfg, SceneKind kind) {
  const ConfigChecks check(cfg);
  SceneConfig o;
  o.kind = kind;
  check.at_least("data.scenes.train", 1);
  check.at_least("data.scenes.val", 1);
  check.at_least("data.scenes.size", 32);
  check.at_least("data.scenes.seed", 0);
  if (cfg.settings().data.dataset == "scenes")
    check.required("data.data_dir", "with data.dataset \"scenes\" (where the scenes are made)");
  o.train = cfg.get_int("data.scenes.train");
  o.val = cfg.get_int("data.scenes.val");
  o.size = cfg.get_int("data.scenes.size");
  o.seed = static_cast<uint64_t>(cfg.get_int("data.scenes.seed"));
  if (kind != SceneKind::people) return o;
  check.at_least("data.scenes.min_people", 0);
  o.min_people = cfg.get_int("data.scenes.min_people");
  o.max_people = cfg.get_int("data.scenes.max_people");
  if (o.max_people < o.min_people)
    check.fail("data.scenes.max_people",
               "must be at least data.scenes.min_people (" + std::to_string(o.min_people) + ")");
  o.min_height = cfg.get_double("data.scenes.min_height");
  o.max_height = cfg.get_double("data.scenes.max_height");
  const double lo = o.min_height, hi = o.max_height;
  if (!(lo > 0 && lo <= 1))
    check.fail("data.scenes.min_height", "must be in (0, 1], got " + format_double(lo));
  if (!(hi >= lo && hi <= 1))
    check.fail("data.scenes.max_height",
               "must be in [data.scenes.min_height, 1], got " + format_double(hi));
  return o;
}

std::string ensure_scenes(const Config& cfg, const SceneConfig& sc) {
  const bool people = sc.kind == SceneKind::people;
  const fs::path dir = cfg.settings().data.data_dir;
  Json want = Json::object();
  if (people) {
    want["kind"] = "people";
    want["min_people"] = sc.min_people;
    want["max_people"] = sc.max_people;
    want["min_height"] = sc.min_height;
    want["max_height"] = sc.max_height;
  }
  want["train"] = sc.train;
  want["val"] = sc.val;
  want["size"] = sc.size;
  want["seed"] = static_cast<int64_t>(sc.seed);
  const fs::path stamp = dir / "scenes.json";
  std::error_code ec;
  if (fs::exists(stamp, ec)) {
    std::ifstream f(stamp);
    std::stringstream ss;
    ss << f.rdbuf();
    Json have;
    try {
      have = json_parse(ss.str());
    } catch (const Error& e) {
      throw ConfigError(at_key(cfg, "data.data_dir") + ": " + stamp.string() + " does not parse (" +
                        e.what() + "); delete " + dir.string() + " to make the scenes again");
    }
    if (!(have == want))
      throw ConfigError(at_key(cfg, "data.data_dir") + ": " + dir.string() +
                        " holds scenes made with " + json_dump(have) +
                        ", but data.scenes.* ask for " + json_dump(want) +
                        "; delete it or choose another data.data_dir");
    return dir.string();
  }
  // A tree written by tcv-data scenes or tcv-data pose-scenes.
  const fs::path marker =
      people ? fs::path("annotations") / "person_keypoints_train.json" : fs::path("classes.txt");
  if (fs::exists(dir / marker, ec)) return dir.string();
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    throw ConfigError(at_key(cfg, "data.data_dir") + ": " + dir.string() +
                      " is neither empty nor a scene tree (no " + marker.string() +
                      "); choose another directory for data.dataset \"scenes\"");
  const int64_t size = sc.size, train = sc.train, val = sc.val;
  const uint64_t seed = sc.seed;
  const fs::path tmp = dir.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  for_key(cfg, "data.data_dir", [&] {
    if (people) {
      data::PoseSceneSetOptions o;
      o.scene.width = o.scene.height = size;
      o.scene.min_people = sc.min_people;
      o.scene.max_people = sc.max_people;
      o.scene.min_height = sc.min_height;
      o.scene.max_height = sc.max_height;
      o.train = train;
      o.val = val;
      o.seed = seed;
      data::write_pose_scene_set(o, tmp.string());
    } else {
      data::SceneSetOptions o;
      o.scene.width = o.scene.height = size;
      o.train = train;
      o.val = val;
      o.seed = seed;
      data::write_scene_set(o, tmp.string());
    }
    return 0;
  });
  std::ofstream(tmp / "scenes.json") << json_dump(want) << "\n";
  if (!dir.parent_path().empty()) fs::create_directories(dir.parent_path(), ec);
  fs::remove(dir, ec);  // an empty directory
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp);  // another process made it first
    if (!fs::exists(stamp))
      throw ConfigError(at_key(cfg, "data.data_dir") + ": cannot create " + dir.string() + " (" +
                        ec.message() + ")");
  }
  return dir.string();
}

}  // namespace tcv::train
