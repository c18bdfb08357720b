// The task seam: the registry, each task's config keys (a key of another task
// is an error that says whose it is), and the resolved config holding only
// the keys of its task.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <tuple>

#include "support/gradcheck.h"
#include "support/tasks.h"
#include "train/config.h"
#include "train/data_setup.h"
#include "train/task.h"
#include "train/tasks/cls.h"
#include "train/tasks/common.h"

using namespace tcv;
using namespace tcv::train;
using tcv::testing::error_of;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Two toy tasks sharing one key, registered once for this binary.
void register_toy_tasks() {
  static bool done = false;
  if (done) return;
  done = true;
  auto info = [](const std::string& name, std::vector<KeySpec> keys) {
    return TaskInfo{.name = name,
                    .description = "a task of the tests",
                    .keys = std::move(keys),
                    .validate = [](const Config&) {},
                    .make = [](const Config&) -> std::unique_ptr<Task> { return nullptr; }};
  };
  register_task(info("toy_a", {{"toy.alpha", ValueType::floating, 0.5, "toy_a's own"},
                               {"toy.shared", ValueType::integer, int64_t{3}, "both toys'"}}));
  register_task(info("toy_b", {{"toy.shared", ValueType::integer, int64_t{3}, "both toys'"}}));
}

}  // namespace

TEST(Tasks, BuiltinTasksAreRegisteredInOrder) {
  const auto names = task_names();
  ASSERT_GE(names.size(), 1u);
  EXPECT_EQ(names[0], "cls");
  EXPECT_EQ(task_info("cls").name, "cls");
  const std::string msg = error_of([] { task_info("nope"); });
  EXPECT_TRUE(has(msg, "unknown task \"nope\"") && has(msg, "cls")) << msg;
  // A name taken twice.
  EXPECT_TRUE(has(error_of([] { register_task(task_info("cls")); }), "registered already"));
}

TEST(Tasks, TaskKeyMustNameARegisteredTask) {
  Config c = Config::from_string("task = \"detection\"\n", "t.toml");
  const std::string msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(has(msg, "t.toml:1: task: unknown value 'detection'") && has(msg, "cls")) << msg;
  EXPECT_EQ(Config().get_string("task"), "cls");  // TorchCV's default
}

TEST(Tasks, AKeyOfAnotherTaskIsAnErrorSayingWhose) {
  register_toy_tasks();
  // Classification's keys in a toy_a config: named with their line and owner.
  Config c = Config::from_string(
      "task = \"toy_a\"\n[toy]\nalpha = 0.25\n[loss]\nlabel_smoothing = 0.1\n", "mixed.toml");
  std::string msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(has(msg,
                  "mixed.toml:5: loss.label_smoothing: the key belongs to task cls; this "
                  "config has task = \"toy_a\""))
      << msg;
  // And the other way round, from --set.
  Config d;
  d.set_override("toy.alpha=0.75");
  msg = error_of([&] { d.validate(); });
  EXPECT_TRUE(has(msg,
                  "--set: toy.alpha: the key belongs to task toy_a; this config has "
                  "task = \"cls\""))
      << msg;
  // A key two tasks read names both.
  Config e;
  e.set_override("toy.shared=4");
  msg = error_of([&] { e.validate(); });
  EXPECT_TRUE(has(msg, "belongs to tasks toy_a and toy_b")) << msg;
  // Each task takes its own keys, and defaults of other tasks' keys are no error.
  Config b = Config::from_string("task = \"toy_b\"\n[toy]\nshared = 4\n", "b.toml");
  EXPECT_EQ(b.get_int("toy.shared"), 4);
  EXPECT_DOUBLE_EQ(b.get_double("toy.alpha"), 0.5);
}

TEST(Tasks, ResolvedConfigHoldsTheKeysOfItsTask) {
  register_toy_tasks();
  const std::string cls = Config().to_toml();
  EXPECT_TRUE(has(cls, "task = \"cls\"")) << cls;
  EXPECT_TRUE(has(cls, "label_smoothing = 0.0")) << cls;
  EXPECT_FALSE(has(cls, "[toy]")) << cls;
  Config a = Config::from_string("task = \"toy_a\"\n", "a.toml");
  const std::string toy = a.to_toml();
  EXPECT_TRUE(has(toy, "[toy]\nalpha = 0.5")) << toy;
  EXPECT_FALSE(has(toy, "label_smoothing")) << toy;
  EXPECT_FALSE(has(toy, "[train.aug")) << toy;
  // It reads back as the same config.
  const Config back = Config::from_string(toy, "back.toml");
  for (const auto& spec : config_schema()) EXPECT_EQ(back.get(spec.key), a.get(spec.key));
}

TEST(Tasks, TwoTasksDeclaringOneKeyMustAgreeOnIt) {
  register_toy_tasks();
  const std::string msg = error_of([] {
    add_task_keys("toy_c", {{"toy.shared", ValueType::integer, int64_t{5}, "another default"}});
  });
  EXPECT_TRUE(has(msg, "toy.shared") && has(msg, "another type or default")) << msg;
  // A key every task reads cannot become one task's.
  EXPECT_TRUE(has(error_of([] {
                    add_task_keys("toy_c", {{"seed", ValueType::integer, int64_t{0}, ""}});
                  }),
                  "every task reads"));
}

namespace {

const char* kPoseToml = R"(
task = "pose"
[data]
dataset = "scenes"
data_dir = "scenes"
[network]
model_name = "openpose_lite"
)";

// The message of validating the pose config with one key set.
std::string pose_error(const std::string& set) {
  Config c = Config::from_string(kPoseToml, "pose.toml");
  return error_of([&] {
    c.set_override(set);
    c.validate();
  });
}

}  // namespace

TEST(Tasks, PoseIsRegisteredWithItsKeys) {
  const auto names = task_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "pose"), names.end());
  const Config c = Config::from_string(kPoseToml, "pose.toml");
  EXPECT_NO_THROW(c.validate());
  // TorchCV's OpenPose defaults.
  EXPECT_DOUBLE_EQ(c.get_double("target.heatmap.sigma"), 7.0);
  EXPECT_DOUBLE_EQ(c.get_double("target.paf.theta"), 1.0);
  EXPECT_EQ(c.get_ints("train.aug_trans.random_focus_crop.crop_size"),
            (std::vector<int64_t>{368, 368}));
  EXPECT_DOUBLE_EQ(c.get_double("train.aug_trans.random_rotate.max_degree"), 40.0);
  EXPECT_DOUBLE_EQ(c.get_double("res.limb_pos_ratio"), 0.8);
  EXPECT_EQ(c.get_int("res.mid_point_num"), 10);
  EXPECT_DOUBLE_EQ(c.get_double("loss.loss_weights.openpose_loss.heatmap_loss5"), 1.0);
  // The resolved config holds pose's keys and none of detection's.
  const std::string toml = c.to_toml();
  EXPECT_TRUE(has(toml, "[target.heatmap]\nsigma = 7.0")) << toml;
  EXPECT_FALSE(has(toml, "[anchor]")) << toml;
}

TEST(Tasks, BadPoseKeysNameTheKey) {
  std::string msg = pose_error("data.dataset=\"voc\"");
  EXPECT_TRUE(has(msg, "--set: data.dataset: unknown value 'voc' (valid: coco, scenes)")) << msg;
  msg = pose_error("data.dataset=\"coco\"");
  EXPECT_TRUE(has(msg, "data.train_ann: must be set with data.dataset \"coco\"")) << msg;
  msg = pose_error("test.input_size=[100, 100]");
  EXPECT_TRUE(has(msg, "test.input_size: expected [s, s] with s >= 32 a multiple of 8")) << msg;
  msg = pose_error("train.aug_trans.random_focus_crop.crop_size=[368, 256]");
  EXPECT_TRUE(has(msg, "train.aug_trans.random_focus_crop.crop_size: expected [s, s]")) << msg;
  msg = pose_error("network.stride=16");
  EXPECT_TRUE(has(msg, "network.stride: OpenPose's output stride is 8, got 16")) << msg;
  msg = pose_error("test.mode=\"sscrop_test\"");
  EXPECT_TRUE(has(msg, "test.mode: unknown value 'sscrop_test' (valid: ss_test, ms_test)")) << msg;
  msg = pose_error("train.aug_trans.random_resize.method=\"bound\"");
  EXPECT_TRUE(has(msg, "train.aug_trans.random_resize.method: unknown value 'bound'")) << msg;
  msg = pose_error("train.aug_trans.random_rotate.max_degree=200.0");
  EXPECT_TRUE(has(msg, "train.aug_trans.random_rotate.max_degree: must be in [0, 180]")) << msg;
  msg = pose_error("target.heatmap.sigma=0.0");
  EXPECT_TRUE(has(msg, "target.heatmap.sigma")) << msg;
  msg = pose_error("res.part_threshold=1.5");
  EXPECT_TRUE(has(msg, "res.part_threshold")) << msg;
  msg = pose_error("loss.loss_weights.openpose_loss.paf_loss2=-1.0");
  EXPECT_TRUE(has(msg, "loss.loss_weights.openpose_loss.paf_loss2")) << msg;
  msg = pose_error("test.scale_search=[]");
  EXPECT_TRUE(has(msg, "test.scale_search: must not be empty")) << msg;
  // Other tasks' keys say whose they are.
  msg = pose_error("anchor.iou_threshold=0.4");
  EXPECT_TRUE(has(msg,
                  "anchor.iou_threshold: the key belongs to task det; this config has task "
                  "= \"pose\""))
      << msg;
  msg = pose_error("loss.loss_type=\"seg_auxce_loss\"");
  EXPECT_TRUE(has(msg, "belongs to task seg")) << msg;
  // A misspelt key is named with its closest match.
  msg = pose_error("target.heatmap.sigm=3.0");
  EXPECT_TRUE(has(msg, "unknown key 'target.heatmap.sigm' (did you mean 'target.heatmap.sigma'?)"))
      << msg;
  // A stage weight for a stage the model lacks (openpose_lite has three).
  Config c = Config::from_string(kPoseToml, "pose.toml");
  c.set_override("loss.loss_weights.openpose_loss.heatmap_loss4=0.5");
  c.validate();
  msg = error_of([&] { make_task(c)->make_model(); });
  EXPECT_TRUE(has(msg,
                  "--set: loss.loss_weights.openpose_loss.heatmap_loss4: openpose_lite has 3 "
                  "stages (0..2)"))
      << msg;
  // A classifier named as the model names the pose models.
  c = Config::from_string(kPoseToml, "pose.toml");
  c.set_override("network.model_name=\"resnet18\"");
  c.validate();
  msg = error_of([&] { make_task(c)->make_model(); });
  EXPECT_TRUE(has(msg,
                  "network.model_name: \"resnet18\" is not a pose model (task = \"pose\" "
                  "trains openpose, openpose_lite)"))
      << msg;
}

TEST(Tasks, ShippedPoseConfigsAreValid) {
  const std::string root = tcv::testing::source_dir() + "/configs/pose/";
  const Config scenes = Config::from_file(root + "scenes_openpose.toml");
  EXPECT_NO_THROW(scenes.validate());
  EXPECT_EQ(scenes.get_string("task"), "pose");
  EXPECT_EQ(scenes.get_string("data.dataset"), "scenes");
  EXPECT_EQ(scenes.get_string("network.model_name"), "openpose_lite");
  // TorchCV's COCO recipe (configs/pose/coco/openpose_vgg19_coco_pose.conf).
  const Config coco = Config::from_file(root + "coco_openpose.toml");
  EXPECT_NO_THROW(coco.validate());
  EXPECT_EQ(coco.get_string("network.model_name"), "openpose");
  EXPECT_EQ(coco.get_string("data.dataset"), "coco");
  EXPECT_EQ(coco.get_int("train.batch_size"), 16);
  EXPECT_EQ(coco.get_ints("train.aug_trans.random_focus_crop.crop_size"),
            (std::vector<int64_t>{368, 368}));
  EXPECT_EQ(coco.get_doubles("train.aug_trans.random_resize.scale_range"),
            (std::vector<double>{0.5, 1.1}));
  EXPECT_EQ(coco.get_doubles("test.scale_search"), (std::vector<double>{0.5, 1.0, 1.5, 2.0, 2.5}));
  EXPECT_DOUBLE_EQ(coco.get_double("solver.lr.base_lr"), 0.0001);
  EXPECT_EQ(coco.get_string("solver.lr.lr_policy"), "step");
  EXPECT_DOUBLE_EQ(coco.get_double("solver.lr.step.gamma"), 0.333);
  EXPECT_EQ(coco.get_int("solver.lr.step.step_size"), 50);
  EXPECT_EQ(coco.get_int("solver.max_epoch"), 200);
  EXPECT_EQ(coco.get_int("network.stride"), 8);
}

TEST(Tasks, ShippedDetectionAndSegmentationConfigsAreValid) {
  const std::string root = tcv::testing::source_dir() + "/configs/";
  std::map<std::string, Config> by_name;
  for (const std::string dir : {"det", "seg"})
    for (const auto& e : std::filesystem::directory_iterator(root + dir))
      if (e.path().extension() == ".toml") {
        const std::string name = dir + "/" + e.path().filename().string();
        const Config c = Config::from_file(e.path().string());
        EXPECT_NO_THROW(c.validate()) << name;
        EXPECT_EQ(c.get_string("task"), dir) << name;
        by_name.emplace(name, c);
      }
  for (const char* f : {"det/scenes_ssd300.toml", "det/voc_ssd300.toml", "det/voc_ssd512.toml",
                        "det/coco_ssd300.toml", "seg/scenes_pspnet.toml",
                        "seg/scenes_deeplabv3.toml", "seg/cityscapes_pspnet_r101.toml",
                        "seg/cityscapes_deeplabv3_r101.toml", "seg/voc_deeplabv3_r50.toml"})
    EXPECT_TRUE(by_name.count(f)) << f;
  // TorchCV's VOC07+12 SSD300 recipe.
  const Config& voc = by_name.at("det/voc_ssd300.toml");
  EXPECT_EQ(voc.get_strings("data.train_roots"), (std::vector<std::string>{"VOC2007", "VOC2012"}));
  EXPECT_EQ(voc.get_string("data.train_split"), "trainval");
  EXPECT_EQ(voc.get_string("data.val_split"), "test");
  EXPECT_EQ(voc.get_int("train.batch_size"), 32);
  EXPECT_DOUBLE_EQ(voc.get_double("solver.lr.base_lr"), 0.001);
  EXPECT_EQ(voc.get_ints("solver.lr.multistep.stepvalue"), (std::vector<int64_t>{156, 195, 234}));
  EXPECT_EQ(voc.get_int("solver.max_epoch"), 235);
  EXPECT_EQ(voc.get_string("val.metric"), "voc07");
  EXPECT_EQ(by_name.at("det/voc_ssd512.toml").get_string("network.model_name"), "ssd512");
  EXPECT_EQ(by_name.at("det/coco_ssd300.toml").get_string("val.metric"), "coco");
  // TorchCV's Cityscapes PSPNet recipe.
  const Config& city = by_name.at("seg/cityscapes_pspnet_r101.toml");
  // TorchCV's PSPNet recipe (issue 27, part 1): its model, batch, schedule and loss.
  EXPECT_EQ(city.get_string("network.model_name"), "pspnet_deepbase_resnet101");
  EXPECT_EQ(city.get_int("train.batch_size"), 1);  // per process, 4 processes
  EXPECT_EQ(city.get_doubles("train.aug_trans.random_resize.scale_range"),
            (std::vector<double>{0.5, 2.0}));
  EXPECT_DOUBLE_EQ(city.get_double("solver.lr.base_lr"), 0.01);
  EXPECT_DOUBLE_EQ(city.get_double("solver.lr.lambda_poly.power"), 0.9);
  EXPECT_FALSE(city.get_bool("solver.lr.is_warm"));
  EXPECT_EQ(city.get_string("loss.loss_type"), "seg_auxce_loss");  // dsnce_loss, no OHEM
  EXPECT_DOUBLE_EQ(city.get_double("loss.loss_weights.aux_loss"), 0.4);
  EXPECT_EQ(make_task(city)->make_model()->num_parameters(), 70436838);  // 19 classes
  EXPECT_EQ(city.get_ints("train.aug_trans.random_crop.crop_size"),
            (std::vector<int64_t>{769, 769}));
  EXPECT_EQ(city.get_int("solver.max_iters"), 40000);
  EXPECT_EQ(city.get_string("solver.lr.lr_policy"), "lambda_poly");
  EXPECT_TRUE(city.get_bool("network.sync_bn"));
  EXPECT_EQ(city.get_doubles("loss.params.ce_weight").size(), 19u);
  EXPECT_DOUBLE_EQ(
      by_name.at("seg/voc_deeplabv3_r50.toml").get_double("loss.loss_weights.aux_loss"), 0.4);
}

// Issue 25, item 8: seven rows of aspect ratios for SSD300's six feature maps
// were blamed on anchor.cur_anchor_sizes ("7 sizes for 7 feature maps").
TEST(Tasks, AnchorRatioRowsAreCountedAgainstTheModelsMaps) {
  // A det config (the task checks its keys when it is made).
  Config c = Config::from_string(
      "task = \"det\"\n[network]\nmodel_name = \"ssd300_lite\"\n[data]\nnum_classes = 3\n"
      "dataset = \"scenes\"\ndata_dir = \"scenes\"\n"
      "[anchor]\naspect_ratio_list = [[2], [2, 3], [2, 3], [2, 3], [2], [2], [2]]\n",
      "det.toml");
  std::string msg = error_of([&] { make_task(c)->make_model(); });
  EXPECT_TRUE(has(msg,
                  "det.toml:9: anchor.aspect_ratio_list: 7 rows, but ssd300_lite has 6 "
                  "feature maps (give one row of ratios per map)") &&
              !has(msg, "cur_anchor_sizes"))
      << msg;
  // With six rows, a size list of the wrong length is still the sizes' fault.
  c = Config::from_string(
      "task = \"det\"\n[network]\nmodel_name = \"ssd300_lite\"\n[data]\nnum_classes = 3\n"
      "dataset = \"scenes\"\ndata_dir = \"scenes\"\n"
      "[anchor]\naspect_ratio_list = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]\n"
      "cur_anchor_sizes = [21, 45, 99, 153, 207, 261]\n",
      "det.toml");
  msg = error_of([&] { make_task(c)->make_model(); });
  EXPECT_TRUE(has(msg, "anchor.cur_anchor_sizes: 6 sizes for 6 feature maps")) << msg;
}

namespace {

std::vector<std::string> names_of(const std::string& task) {
  return dataset_names(task);
}

}  // namespace

// Each task registers its data sets; the choices of data.dataset, their required
// keys, the key's help and tcv-train --list-datasets all come from there.
TEST(Tasks, DatasetsAreRegisteredByTheirTasks) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(names_of("cls"),
            (Names{"fashion_mnist", "mnist", "cifar10", "cifar100", "image_folder", "list"}));
  EXPECT_EQ(names_of("det"), (Names{"voc", "coco", "scenes"}));
  EXPECT_EQ(names_of("seg"), (Names{"cityscapes", "voc", "ade20k", "scenes"}));
  EXPECT_EQ(names_of("pose"), (Names{"coco", "scenes"}));
  // An unknown name lists the task's own.
  Config c = Config::from_string("task = \"det\"\n[data]\ndataset = \"cifar10\"\n", "d.toml");
  std::string msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(
      has(msg, "d.toml:3: data.dataset: unknown value 'cifar10' (valid: voc, coco, scenes)"))
      << msg;
  // A data set's required keys.
  c = Config::from_string("task = \"pose\"\n[data]\ndataset = \"coco\"\ndata_dir = \"x\"\n",
                          "p.toml");
  msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(has(msg, "data.train_ann: must be set with data.dataset \"coco\"")) << msg;
  c = Config::from_string("[data]\ndataset = \"cifar100\"\nnum_classes = 100\n", "c.toml");
  msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(has(msg, "data.data_dir: must be set with data.dataset \"cifar100\"")) << msg;
  EXPECT_EQ(dataset_info(Config()).name, "fashion_mnist");
  EXPECT_TRUE(dataset_info(Config()).required.empty());
  // The help of data.dataset and task, as config.toml writes it.
  const KeySpec* dataset = find_key_spec("data.dataset");
  ASSERT_NE(dataset, nullptr);
  EXPECT_TRUE(has(dataset->help,
                  "cls: fashion_mnist | mnist | cifar10 | cifar100 | image_folder | list; "
                  "det: voc | coco | scenes; seg: cityscapes | voc | ade20k | scenes; "
                  "pose: coco | scenes"))
      << dataset->help;
  EXPECT_TRUE(
      has(find_key_spec("task")->help, "cls: image classification | det: object detection (SSD)"))
      << find_key_spec("task")->help;
  EXPECT_TRUE(has(Config().to_toml(), "dataset = \"fashion_mnist\"  # cls: fashion_mnist | mnist"));
  // One line per data set: task, name, description, in columns (their widths
  // depend on the tasks this binary registered: the toy ones too).
  const std::string listing = dataset_listing();
  EXPECT_TRUE(std::regex_search(listing, std::regex("\ncls +cifar100 +CIFAR-100 binary files")))
      << listing;
  EXPECT_TRUE(std::regex_search(listing, std::regex("(^|\n)cls +fashion_mnist +Fashion-MNIST IDX")))
      << listing;
  EXPECT_TRUE(std::regex_search(
      listing, std::regex("\npose +scenes +generated scenes of stick-figure people")))
      << listing;
  EXPECT_TRUE(std::regex_search(
      task_listing(), std::regex("\nseg +semantic segmentation \\(PSPNet, DeepLabV3, FCN\\)\n")))
      << task_listing();
}

// A detection or segmentation config naming another family's model lists the
// models its task trains, as the model families registered them.
TEST(Tasks, TaskModelsComeFromTheirFamily) {
  for (const auto& [toml, kind, known] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"task = \"det\"\n[data]\ndataset = \"scenes\"\ndata_dir = \"s\"\nnum_classes = 11\n",
            "detection", "(task = \"det\" trains ssd300, ssd300_lite, ssd512)"},
           {"task = \"seg\"\n[data]\ndataset = \"scenes\"\ndata_dir = \"s\"\nnum_classes = 11\n",
            "segmentation", "(task = \"seg\" trains deeplabv3_resnet101, deeplabv3_resnet18, "}}) {
    Config c = Config::from_string(toml, "t.toml");
    c.set_override("network.model_name=\"openpose\"");
    c.validate();
    const std::string msg = error_of([&] { make_task(c)->make_model(); });
    EXPECT_TRUE(
        has(msg, "--set: network.model_name: \"openpose\" is not a " + kind + " model " + known))
        << msg;
  }
}

// Each task's data sets come from its table (DatasetInfo::source): the names a
// classification data set knows, its input and its fixed channels, with no
// branch on the name outside the table.
TEST(Tasks, ClassificationDataSetsComeFromTheirTable) {
  const auto cfg = [](const std::string& dataset, int64_t classes) {
    return Config::from_string("[data]\ndataset = \"" + dataset + "\"\nnum_classes = " +
                                   std::to_string(classes) + "\ndata_dir = \"/nonexistent\"\n",
                               "d.toml");
  };
  const Config fm = cfg("fashion_mnist", 10);
  const ClsConfig fm_cls = parse_cls_config(fm);
  const auto names = config_class_names(fm, fm_cls);
  ASSERT_EQ(names.size(), 10u);
  EXPECT_EQ(names[0], "T-shirt/top");
  EXPECT_EQ(names[9], "Ankle boot");
  EXPECT_EQ(config_class_names(cfg("fashion_mnist", 3), fm_cls),
            (std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover"}));
  EXPECT_EQ(config_class_names(cfg("mnist", 10), fm_cls)[7], "7");
  EXPECT_EQ(config_class_names(cfg("cifar10", 10), fm_cls)[3], "cat");
  EXPECT_EQ(config_class_names(cfg("cifar100", 100), fm_cls)[42], "42");
  EXPECT_EQ(input_spec(fm, fm_cls).channels, 1);
  EXPECT_EQ(input_spec(fm, fm_cls).height, 28);
  const Config c10 = cfg("cifar10", 10);
  EXPECT_EQ(input_spec(c10, parse_cls_config(c10)).channels, 3);
  EXPECT_EQ(input_spec(c10, parse_cls_config(c10)).width, 32);
  // IDX data sets leave data.data_dir to Debian's package; others keep it.
  EXPECT_EQ(resolve_data_dir(Config::from_string("[data]\ndataset = \"mnist\"\n", "m.toml")),
            "/usr/share/datasets/mnist");
  EXPECT_EQ(resolve_data_dir(c10), "/nonexistent");
  Config gray_cifar = cfg("cifar10", 10);
  gray_cifar.set_override("data.channels=1");
  EXPECT_TRUE(has(error_of([&] { parse_cls_config(gray_cifar); }),
                  "data.channels: CIFAR has 3 channels, got 1"));
  Config rgb_idx = cfg("fashion_mnist", 10);
  rgb_idx.set_override("data.channels=3");
  EXPECT_TRUE(has(error_of([&] { parse_cls_config(rgb_idx); }),
                  "data.channels: IDX datasets have 1 channel, got 3"));
  const Config list = Config::from_string(
      "[data]\ndataset = \"list\"\ntrain_list = \"a\"\nval_list = \"b\"\n", "l.toml");
  EXPECT_TRUE(has(error_of([&] { parse_cls_config(list); }),
                  "data.input_size: must be set ([h, w]) with data.dataset \"list\""));
  EXPECT_EQ(config_class_names(list, ClsConfig{}).at(1), "1");  // list files name no classes
}

// A loss divided by this rank's count is re-divided by the global batch's:
// here rank 0 of 2 holds 3 of the 3 + 5 matched boxes, so its mean over 3
// becomes sum / 8 · 2 (DDP then averages the two ranks' gradients). Both counts
// are floored; alone the loss is returned as it is, without asking the group.
TEST(Tasks, GlobalNormalizedRescalesToTheGlobalCount) {
  StepContext ctx;
  ctx.world = 2;
  int calls = 0;
  ctx.sum_over_ranks = [&](double v) {
    ++calls;
    return v + 5.0;  // the other rank's count
  };
  const Tensor mean_over_3 = from_vector<double>({1.5});  // a sum of 4.5 over 3
  EXPECT_DOUBLE_EQ(ctx.global_normalized(mean_over_3, 3.0, 1.0).item(), 4.5 / 8.0 * 2.0);
  EXPECT_EQ(calls, 1);
  // No match here: the local count floors at 1, the global one sums the raw counts.
  EXPECT_DOUBLE_EQ(ctx.global_normalized(from_vector<double>({0.0}), 0.0, 1.0).item(), 0.0);
  EXPECT_DOUBLE_EQ(ctx.global_normalized(from_vector<double>({2.0}), 0.0, 1.0).item(),
                   2.0 * 1.0 * 2.0 / 5.0);
  // Equal shares: the loss itself (scale 1).
  ctx.sum_over_ranks = [](double v) { return 2.0 * v; };
  EXPECT_DOUBLE_EQ(ctx.global_normalized(mean_over_3, 3.0, 1.0).item(), 1.5);
  StepContext alone;
  alone.sum_over_ranks = [](double) -> double { throw Error("a lone rank asked its group"); };
  EXPECT_DOUBLE_EQ(alone.global_normalized(mean_over_3, 3.0, 1.0).item(), 1.5);
}

// A key several tasks read is declared once (train/tasks/common.h), so the
// resolved config of each task carries help that is right for it.
TEST(Tasks, SharedKeysAreDeclaredOnceWithHelpForEachTask) {
  const KeySpec split = shared_key("data.train_split");
  EXPECT_TRUE(has(split.help, "ImageSets/Main") && has(split.help, "ImageSets/Segmentation"))
      << split.help;
  Config seg = Config::from_string("task = \"seg\"\n", "seg.toml");
  EXPECT_TRUE(has(seg.to_toml(), "ImageSets/Segmentation/<split>.txt")) << seg.to_toml();
  EXPECT_TRUE(has(error_of([] { shared_key("data.nope"); }), "\"data.nope\""));
}
