#include "train/trainer.h"

#include "engine/autocast.h"
#include "train/grad_scaler.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <system_error>

#include "dist/env.h"
#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "train/checkpoint.h"
#include "train/distributed.h"
#include "train/lr_policy.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/report.h"
#include "train/task.h"

namespace tcv::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// A metric's value in the log: top-1 in percent, mAP or mIoU as a fraction.
std::string score_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

Device pick_device(const Config& cfg) {
  const DeviceChoice d = cfg.settings().device;
  if (d == DeviceChoice::cpu) return kCPU;
  if (d == DeviceChoice::cuda) {
    if (!cuda_ops_supported())
      throw ConfigError(at_key(cfg, "device") +
                        ": \"cuda\" requested, but this build of tcv has no CUDA (it was built "
                        "without nvcc); use \"cpu\" or \"auto\"");
    if (!cuda_is_available())
      throw ConfigError(
          at_key(cfg, "device") + ": \"cuda\" requested, but " +
          (cuda_device_count() == 0 ? "no CUDA device is available" : "CUDA is not usable") +
          " (use \"cpu\" or \"auto\")");
    return Device(DeviceType::CUDA, 0);
  }
  return cuda_ops_supported() && cuda_is_available() ? Device(DeviceType::CUDA, 0) : kCPU;
}

// Keeps the lines of a run's metrics.jsonl up to iteration `iter`, where a
// resumed run starts, and drops those after it and any line a kill cut short:
// each iteration is then logged once. Returns whether a val line at `iter`
// is among those kept.
bool truncate_metrics(const fs::path& file, int64_t iter) {
  std::ifstream f(file);
  if (!f.good()) return false;
  std::string line, kept;
  bool changed = false, val_at_iter = false;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    bool keep = false;
    try {
      const Json j = json_parse(line);
      const auto it = j.find("iter"), split = j.find("split");
      const bool has_iter = it != j.end() && it->is_number_integer();
      keep = j.is_object() && (!has_iter || it->get<int64_t>() <= iter);
      if (keep && has_iter && it->get<int64_t>() == iter && split != j.end() && *split == "val")
        val_at_iter = true;
    } catch (const Error&) {
      keep = false;  // a line cut short
    }
    if (keep)
      kept += line + "\n";
    else
      changed = true;
  }
  f.close();
  if (changed) write_file_atomic(file.string(), kept);
  return val_at_iter;
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const Config& cfg, const nn::StateDict& params) {
  const SolverConfig& so = cfg.settings().solver;
  const double lr = so.lr.base_lr;
  const OptimConfig& op = so.optim;
  const NoDecay no_decay = op.nodecay_bn_bias ? NoDecay::bn_and_bias : NoDecay::none;
  if (op.method == OptimMethod::adam || op.method == OptimMethod::adamw) {
    const AdamConfig& a = op.method == OptimMethod::adam ? op.adam : op.adamw;
    AdamOptions o;
    o.lr = lr;
    o.beta1 = a.beta1;
    o.beta2 = a.beta2;
    o.eps = a.eps;
    o.weight_decay = a.weight_decay;
    o.no_decay = no_decay;
    if (op.method == OptimMethod::adam) return std::make_unique<Adam>(params, o);
    return std::make_unique<AdamW>(
        params, AdamWOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.no_decay});
  }
  SGDOptions o;
  o.lr = lr;
  o.no_decay = no_decay;
  o.momentum = op.sgd_momentum;
  o.weight_decay = op.sgd_weight_decay;
  o.nesterov = op.sgd_nesterov;
  return std::make_unique<SGD>(params, o);
}

struct Trainer::Impl {
  Config cfg;
  const Settings* set = nullptr;  // cfg's, parsed in setup()
  TrainOptions opts;
  Device device;
  std::unique_ptr<Task> task;
  TaskData data;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<DistContext> dist;                   // network.distributed, else null
  std::shared_ptr<dist::DistributedDataParallel> ddp;  // wraps model when distributed
  bool main_rank() const { return !dist || dist->is_main(); }
  int64_t world() const { return dist ? dist->world_size() : 1; }
  std::unique_ptr<Optimizer> optim;
  std::unique_ptr<LrPolicy> lr_policy;
  TrainerState state;
  int64_t iters_per_epoch = 0, max_iters = 0, max_epochs = 0;
  int64_t evaluated_at = -1;  // the iteration of the latest evaluation (a resumed run: logged)
  bool skip_corrupt = false;
  std::ofstream metrics;
  fs::path ckpt_dir;
  bool bar = false;
  Clock::time_point t0;
  double elapsed_before = 0;  // from earlier runs (resume)
  PretrainedLoad pretrained_load;
  TrainSummary summary;
  std::unique_ptr<TaskEvaluator> last_eval;  // the latest evaluation, for report.html

  // train.conv_algo, where set, for this trainer's lifetime (the choice is
  // process-wide: the previous one comes back when the trainer goes).
  struct ConvAlgoChoice {
    ops::ConvAlgo saved = ops::get_conv_algo();
    bool set = false;
    ~ConvAlgoChoice() {
      if (set) ops::set_conv_algo(saved);
    }
  } conv_algo;

  // How each step runs (set at the start of run()).
  struct StepSettings {
    int64_t display = 1, test_interval = 0, save_iters = 0, save_epoch = 0;
    int64_t stop_at = 0;  // the end, or an interruption asked for by the caller
    double clip_norm = 0;
    bool amp = false;  // mixed precision: autocast for forward; f16 (CUDA) also scales the loss
    DType amp_dtype = DType::bf16;
    std::unique_ptr<GradScaler> scaler;
    NonFinite nonfinite = NonFinite::stop;
    // solver.nonfinite = "skip" drops a step whole: the BatchNorm statistics its
    // forward updated go back to these copies.
    std::vector<std::pair<Tensor, Tensor>> buffers;  // (buffer, copy before the step)
  } step_cfg;

  // The training lines' window (since the last one) and this run's totals.
  AverageMeter win_loss;
  int64_t win_images = 0;
  Clock::time_point win_t0, last_draw;
  int64_t run_images = 0;
  double run_compute_s = 0;
  double last_loss = 0;  // of the latest step

  // Corrupt images skipped so far (data.skip_corrupt), train and val.
  int64_t skipped() const { return data.train->skipped() + data.val->skipped(); }

  // The first skipped file and why ("" when none).
  std::string first_skipped() const {
    for (const TaskLoader* l : {data.train.get(), data.val.get()})
      if (const std::string f = l->first_skipped(); !f.empty()) return f;
    return "";
  }

  std::ostream* log() const {
    return opts.progress == ProgressMode::quiet || !main_rank() ? nullptr : opts.log;
  }

  double elapsed() const { return elapsed_before + seconds_since(t0); }

  void write_metrics(const Value& j) {
    if (!main_rank()) return;
    errno = 0;
    metrics << j.dump() << "\n";
    metrics.flush();
    if (!metrics.good())
      TCV_THROW((fs::path(opts.out_dir) / "metrics.jsonl").string(),
                ": cannot write: ", errno ? std::strerror(errno) : "stream error");
  }

  // Starts a loader's epoch, naming data.workers when its threads cannot start.
  void start_loader(TaskLoader& loader, int64_t epoch, int64_t skip) {
    try {
      loader.start_epoch(epoch, skip);
    } catch (const std::system_error& e) {
      throw ConfigError(at_key(cfg, "data.workers") + " = " + std::to_string(set->data.workers) +
                        ": cannot start the data loader's worker threads (" + e.what() +
                        "); lower data.workers");
    }
  }

  void setup() {
    cfg.validate();
    set = &cfg.settings();
    device = pick_device(cfg);
    dist = init_distributed(cfg, device);
    if (dist) device = dist->device();  // cuda:LOCAL_RANK on a node with several GPUs
    // All cores, shared evenly among the ranks of a node; OMP_NUM_THREADS wins.
    if (!std::getenv("OMP_NUM_THREADS"))
      omp_set_num_threads(
          dist::threads_per_local_process(dist::process_dist_env(), omp_get_num_procs()));
    manual_seed(set->seed);
    task = make_task(cfg);

    // Data.
    data = dist ? task->make_data(dist->rank(), dist->world_size()) : task->make_data(0, 1);
    skip_corrupt = set->data.skip_corrupt;
    // An empty split is its data set's fault, not train.batch_size's (nor a
    // val row of metric 0 that becomes `best`).
    for (const bool train : {true, false}) {
      if (train && testing()) continue;
      const TaskLoader& loader = train ? *data.train : *data.val;
      if (loader.size() > 0) continue;
      const std::string name = loader.name();
      throw ConfigError(
          at_key(cfg, "data.dataset") + " = \"" + set->data.dataset + "\": the " +
          (train ? "training" : "validation") + " set" + (name.empty() ? "" : " " + name) +
          " has no images (" + data.summary + ")" +
          (train ? "; images with nothing to train on (no box, no person) are left out" : "") +
          (skip_corrupt ? "; data.skip_corrupt left out those that cannot be read" : ""));
    }
    iters_per_epoch = data.train->num_batches();
    if (testing()) iters_per_epoch = std::max<int64_t>(iters_per_epoch, 1);  // no training
    if (iters_per_epoch == 0 && !testing())
      throw ConfigError(at_key(cfg, "train.batch_size") + ": larger than the training set (" +
                        std::to_string(data.train->size()) + " images) with train.drop_last");
    if (set->solver.max_iters > 0) {
      max_iters = set->solver.max_iters;
    } else {
      const int64_t epochs = set->solver.max_epoch;
      if (epochs > kMaxIterations / iters_per_epoch)
        throw ConfigError(at_key(cfg, "solver.max_epoch") + ": " + std::to_string(epochs) +
                          " epochs of " + std::to_string(iters_per_epoch) +
                          " iterations are more than the " + std::to_string(kMaxIterations) +
                          " (2^40) iterations a run may count");
      max_iters = epochs * iters_per_epoch;
    }

    // Model and optimizer.
    const std::string& name = set->network.model_name;
    model = task->make_model();
    const std::string& pretrained = set->network.pretrained;
    if (!pretrained.empty()) {
      try {
        pretrained_load = load_pretrained(pretrained, *model);
      } catch (const Error& e) {
        throw ConfigError(at_key(cfg, "network.pretrained") + ": " + e.what());
      }
    }
    model->to(device);
    if (dist && !testing()) ddp = dist->wrap(cfg, model);
    optim = make_optimizer(cfg, model->named_parameters());
    max_epochs = (max_iters + iters_per_epoch - 1) / iters_per_epoch;
    lr_policy = std::make_unique<LrPolicy>(LrPolicy::from_config(cfg, iters_per_epoch, max_iters));
    state.model_name = name;
    state.task = set->task;
    state.best_metric = task->best_metric();

    // Output directory.
    ckpt_dir = fs::path(opts.out_dir) / "checkpoints";
    fs::create_directories(testing() ? fs::path(opts.out_dir) : ckpt_dir);
    int64_t stale = 0;  // temp files of a process killed while writing
    if (main_rank()) {
      stale = remove_stale_temp_files(opts.out_dir) + remove_stale_temp_files(ckpt_dir.string());
      write_file_atomic((fs::path(opts.out_dir) / "config.toml").string(), cfg.to_toml());
    }

    // "auto": the newest complete checkpoint of this run directory, if any
    // (an elastic restart continues where the failed attempt last saved).
    std::string resume = set->network.resume;
    if (!opts.results.empty()) {
      TCV_CHECK(testing(), "[Trainer] TrainOptions::results is for Phase::test");
      resume.clear();  // a results file stands for the model's output
    } else if (testing() && (resume.empty() || resume == "auto"))
      throw ConfigError(at_key(cfg, "network.resume") +
                        ": the test phase evaluates a checkpoint; name it (a .safetensors file "
                        "or a run directory: its checkpoints/latest)");
    if (resume == "auto") resume = find_latest_checkpoint(ckpt_dir.string());
    if (!resume.empty()) {
      // Everything about the checkpoint is checked here, before any step.
      try {
        const std::string stem = resolve_checkpoint(resume);
        const TrainerState s = load_trainer_state(stem);
        if (s.model_name != name)
          throw ConfigError(at_key(cfg, "network.resume") + ": checkpoint " + stem +
                            ".safetensors holds a \"" + s.model_name +
                            "\", but network.model_name is \"" + name + "\"");
        if (s.task != state.task || s.best_metric != state.best_metric)
          throw ConfigError(at_key(cfg, "network.resume") + ": checkpoint " + stem +
                            ".safetensors is of task \"" + s.task + "\" (best by " + s.best_metric +
                            "), but this config has task = \"" + state.task + "\" (best by " +
                            state.best_metric + ")");
        state = load_checkpoint(stem, *model, testing() ? nullptr : optim.get());
        tested = stem;
      } catch (const ConfigError&) {
        throw;
      } catch (const Error& e) {
        throw ConfigError(at_key(cfg, "network.resume") + ": " + e.what());
      }
      // The loader's epoch length may differ if batch_size changed; clamp to it.
      state.epoch_iter = std::min(state.epoch_iter, iters_per_epoch);
      elapsed_before = state.elapsed_s;
      default_generator().manual_seed(state.rng_seed);
      default_generator().set_offset(state.rng_offset);
      if (main_rank() && !testing() &&
          truncate_metrics(fs::path(opts.out_dir) / "metrics.jsonl", state.iter))
        evaluated_at = state.iter;
    }
    if (dist)  // ranks that disagree here would issue different collectives
      dist->check_same(
          "training schedule",
          {{"iterations per epoch (data set size / world / train.batch_size)",
            std::to_string(iters_per_epoch)},
           {"iterations in all (solver.max_iters or solver.max_epoch)", std::to_string(max_iters)},
           {"iteration resumed from", std::to_string(state.iter)}});
    metrics.open(main_rank() ? fs::path(opts.out_dir) / "metrics.jsonl" : fs::path("/dev/null"),
                 resume.empty() || testing() ? std::ios::trunc : std::ios::app);
    if (!metrics.good()) TCV_THROW(opts.out_dir, "/metrics.jsonl: cannot open for writing");

    bar = opts.progress == ProgressMode::bar ||
          (opts.progress == ProgressMode::automatic && opts.log && isatty(STDOUT_FILENO));
    if (auto* os = log()) {
      *os << "tcv-train: " << name << " (" << model->num_parameters() << " parameters) on "
          << device.str() << ", " << omp_get_max_threads() << " threads; " << data.summary;
      if (!testing()) *os << ", " << iters_per_epoch << " iters/epoch, " << max_iters << " iters";
      if (dist)
        *os << "; data-parallel over " << world() << " processes (" << dist->group()->backend_name()
            << "): batch " << set->train.batch_size << " per process, global batch "
            << set->train.batch_size * world();
      if (!opts.results.empty())
        *os << "; evaluating the results file " << opts.results;
      else if (testing())
        *os << "; testing " << tested << ".safetensors (epoch " << state.epoch + 1 << ", iter "
            << state.iter << ")";
      else if (!resume.empty())
        *os << "; resumed at epoch " << state.epoch << " iter " << state.iter;
      *os << "\n";
      if (stale > 0)
        *os << "removed " << stale << " temp file" << (stale > 1 ? "s" : "")
            << " left by a process killed while writing\n";
      if (!set->network.pretrained.empty()) {
        *os << "pretrained: " << pretrained_load.loaded << " tensors from "
            << set->network.pretrained;
        if (!pretrained_load.kept.empty()) {
          *os << "; new head keeps its init:";
          for (const auto& k : pretrained_load.kept) *os << " " << k;
        }
        *os << "\n";
      }
      *os << std::flush;
    }
  }

  // ---- the loop ---------------------------------------------------------------------

  bool testing() const { return opts.phase == Phase::test; }
  std::string tested;               // the checkpoint's stem (Phase::test)
  std::string predictions_written;  // the folder the task wrote per-image predictions to

  TrainSummary run() {
    if (testing()) return run_test();
    begin_run();
    model->train();
    while (state.iter < step_cfg.stop_at) {
      start_loader(*data.train, state.epoch, state.epoch_iter);
      while (state.iter < step_cfg.stop_at) {
        const TaskBatch* batch = data.train->next();
        if (!batch) break;
        step(*batch);
        log_step();
        if (every(step_cfg.test_interval)) evaluate();
        if (every(step_cfg.save_iters)) save("latest");
      }
      if (state.epoch_iter < iters_per_epoch) break;  // stopped mid-epoch
      end_epoch();
    }
    return end_run();
  }

  // Whether the iteration just done is a multiple of n (n = 0: never).
  bool every(int64_t n) const { return n > 0 && state.iter % n == 0; }

  void begin_run() {
    t0 = Clock::now();
    summary.start_iter = state.iter;
    StepSettings& s = step_cfg;
    const SolverConfig& so = set->solver;
    s.display = so.display_iter;
    s.test_interval = so.test_interval;
    s.save_iters = so.save_iters;
    s.save_epoch = so.save_epoch;
    s.clip_norm = so.clip_grad_norm;
    if (set->train.conv_algo_set) {
      ops::set_conv_algo(set->train.conv_algo);
      conv_algo.set = true;
    }
    s.amp = set->train.amp != AmpMode::off;
    s.amp_dtype = set->train.amp == AmpMode::f16 ? DType::f16 : DType::bf16;
    if (s.amp && !autocast::supported(device, s.amp_dtype))
      throw ConfigError(at_key(cfg, "train.amp") + ": " +
                        autocast::unsupported_reason(device, s.amp_dtype));
    if (s.amp && s.amp_dtype == DType::f16) s.scaler = std::make_unique<GradScaler>();
    s.stop_at = opts.stop_at_iter > 0 ? std::min(opts.stop_at_iter, max_iters) : max_iters;
    s.nonfinite = so.nonfinite;
    if (s.nonfinite == NonFinite::skip)
      for (const auto& [name, b] : model->named_buffers()) s.buffers.emplace_back(b, b.clone());
    win_t0 = Clock::now();
    last_draw = Clock::now() - std::chrono::seconds(1);
  }

  // One iteration: the learning rate, the task's loss, backward (all-reduced when
  // data-parallel), the non-finite check and the update.
  void step(const TaskBatch& batch) {
    const auto step_t0 = Clock::now();
    StepSettings& s = step_cfg;
    state.lr = lr_policy->lr_at(state.iter);
    optim->set_lr(state.lr);
    if (batch.images() == 0) {  // every image of the batch was skipped as corrupt
      ++state.iter;
      ++state.epoch_iter;
      return;
    }
    if (!s.buffers.empty()) {
      NoGradGuard no_grad;
      for (auto& [b, copy] : s.buffers) copy.copy_(b);
    }
    autocast::Guard amp(s.amp, s.amp_dtype);
    StepModel step_model(*model, ddp.get());
    StepContext ctx{.device = device, .iter = state.iter, .seed = set->seed, .world = world()};
    if (dist)
      ctx.sum_over_ranks = [this](double v) {
        std::vector<double> x{v};
        dist->all_reduce_sum(x);
        return x[0];
      };
    const Tensor loss = task->loss(step_model, batch, ctx);
    optim->zero_grad(/*set_to_none=*/!ddp);  // DDP: grads stay bucket views
    // Data-parallel: a rank's non-finite loss makes every rank's all-reduced
    // gradients non-finite, so that all ranks make the same decision below.
    const Tensor seed = ddp ? nonfinite_seed(loss) : Tensor();
    (s.scaler ? s.scaler->scale(loss) : loss).backward(seed);
    double loss_v = 0;
    bool stepped = false;
    if (s.scaler) {
      // f16: gradients with inf or NaN are the loss scaler's to skip.
      s.scaler->unscale(optim->params());
      loss_v = loss.item();
      if (std::isfinite(loss_v)) {
        if (s.clip_norm > 0) clip_grad_norm(optim->params(), s.clip_norm);
        stepped = s.scaler->step(*optim);
        if (stepped) check_weights_after_update(loss_v);
      } else {
        drop_nonfinite_step(loss_v);
      }
    } else {
      // The loss and every gradient in one fused check (one host sync on a GPU).
      std::vector<Tensor> check = grads_of(optim->params());
      check.push_back(loss.detach());
      const bool finite = all_finite(check);
      loss_v = loss.item();
      if (finite) {
        if (s.clip_norm > 0) clip_grad_norm(optim->params(), s.clip_norm);
        optim->step();
        stepped = true;
        check_weights_after_update(loss_v);
      } else {
        drop_nonfinite_step(loss_v);
      }
    }
    ++state.iter;
    ++state.epoch_iter;
    const int64_t images = batch.images() * world();  // global images
    if (stepped || (s.scaler && std::isfinite(loss_v))) win_loss.update(loss_v, images);
    last_loss = loss_v;
    win_images += images;
    run_images += images;
    run_compute_s += seconds_since(step_t0);
  }

  // A training line every solver.display_iter iterations; the progress bar.
  void log_step() {
    if (every(step_cfg.display)) {
      const double ips = static_cast<double>(win_images) / seconds_since(win_t0);
      Value j = Value::object();
      j["split"] = "train";
      j["epoch"] = state.epoch + 1;  // 1-based, as people count
      j["iter"] = state.iter;
      // null when every step of the window was dropped for inf or NaN
      j["loss"] = win_loss.count() ? Value(win_loss.mean()) : Value();
      j["lr"] = state.lr;
      j["images_per_sec"] = ips;
      j["time"] = elapsed();
      if (step_cfg.nonfinite == NonFinite::skip) j["nonfinite_skipped"] = state.nonfinite_skipped;
      write_metrics(j);
      if (!bar)
        if (auto* os = log())
          *os << "train epoch " << state.epoch + 1 << " iter " << state.iter << "/" << max_iters
              << ": loss " << (win_loss.count() ? fixed(win_loss.mean(), 4) : "--") << " lr "
              << state.lr << " " << fixed(ips, 1) << " img/s (" << hms(elapsed()) << ")\n"
              << std::flush;
      win_loss.reset();
      win_images = 0;
      win_t0 = Clock::now();
    }
    if (bar && seconds_since(last_draw) > 0.1) {
      last_draw = Clock::now();
      draw_bar(win_loss.count() ? win_loss.mean() : last_loss,
               static_cast<double>(run_images) / std::max(run_compute_s, 1e-9), seconds_since(t0),
               state.iter - summary.start_iter);
    }
  }

  // After a complete epoch: its evaluation (solver.test_interval = 0), `latest`
  // and every solver.save_epoch epochs an epoch checkpoint.
  void end_epoch() {
    if (step_cfg.test_interval == 0 && evaluated_at != state.iter) evaluate();
    ++state.epoch;
    state.epoch_iter = 0;
    save("latest");
    if (step_cfg.save_epoch > 0 && state.epoch % step_cfg.save_epoch == 0)
      save_epoch_checkpoint(state.epoch);
  }

  TrainSummary end_run() {
    // An interruption leaves the state as a kill after the last save would, without
    // the final evaluation.
    if (state.iter == max_iters && evaluated_at != state.iter) evaluate();
    save("latest");
    if (bar)
      if (auto* os = log()) *os << "\n" << std::flush;

    summary.epochs = state.epoch;
    summary.iters = state.iter;
    summary.best_metric = state.best_metric;
    summary.best_score = state.best_score;
    summary.wall_s = seconds_since(t0);
    summary.train_images_per_sec =
        run_compute_s > 0 ? static_cast<double>(run_images) / run_compute_s : 0.0;
    summary.skipped = skipped();
    summary.nonfinite_skipped = state.nonfinite_skipped;
    if (auto* os = log(); os && summary.skipped > 0)
      *os << "skipped " << summary.skipped
          << " corrupt images (data.skip_corrupt); the first: " << first_skipped() << "\n";
    if (auto* os = log())
      *os << "done: " << state.epoch << " epochs, " << state.iter << " iters, " << state.best_metric
          << " " << score_text(summary.score) << " ("
          << (state.best_score < 0 ? "no best" : "best " + score_text(state.best_score)) << "), "
          << fixed(summary.wall_s, 1) << " s, " << fixed(summary.train_images_per_sec, 0)
          << " train img/s\n"
          << std::flush;
    if (auto* os = log(); os && ddp) *os << ddp_summary(*ddp) << "\n" << std::flush;
    if (dist) dist->barrier();  // rank 0 hosts the store: leave together
    return summary;
  }

  // The test phase: the checkpoint's evaluation, as a training run's val row
  // (its "split": "test"), logged, written and reported; nothing saved.
  TrainSummary run_test() {
    t0 = Clock::now();
    if (!opts.results.empty()) {
      last_eval = task->evaluate_results(opts.results);
      if (!last_eval)
        throw ConfigError(at_key(cfg, "task") + " = \"" + set->task +
                          "\": --results reads COCO detection or keypoint results, or a folder "
                          "of label PNGs; this task has no results format");
    }
    const Value row = opts.results.empty()
                          ? evaluate_row((fs::path(opts.out_dir) / "predictions").string())
                          : last_eval->row();
    summary.val = row;
    summary.best_metric = state.best_metric;
    summary.score = row.at(state.best_metric).as_double();
    summary.val_loss = row.contains("loss") ? row.at("loss").as_double() : -1;
    summary.epochs = state.epoch;
    summary.iters = summary.start_iter = state.iter;
    summary.skipped = data.val->skipped();
    summary.wall_s = seconds_since(t0);
    Value j = Value::object();
    j["split"] = "test";
    if (opts.results.empty()) {
      j["epoch"] = state.epoch + 1;
      j["iter"] = state.iter;
    }
    for (const auto& [k, v] : row.members()) j[k] = v;
    if (opts.results.empty())
      j["checkpoint"] = tested + ".safetensors";
    else
      j["results"] = opts.results;
    j["time"] = summary.wall_s;
    if (skip_corrupt) j["skipped"] = data.val->skipped();
    write_metrics(j);
    write_report_html();
    std::string written;
    if (opts.results.empty() && main_rank())
      for (const auto& [name, text] : last_eval->results_files()) {
        write_file_atomic((fs::path(opts.out_dir) / name).string(), text);
        written += (written.empty() ? "" : ", ") + (fs::path(opts.out_dir) / name).string();
      }
    if (auto* os = log()) {
      if (opts.results.empty())
        *os << "test  epoch " << state.epoch + 1 << " iter " << state.iter << ": ";
      else
        *os << "test  " << opts.results << ": ";
      *os << last_eval->describe(row) << " (" << hms(summary.wall_s) << ")\n" << last_eval->table();
      if (!predictions_written.empty())
        written += (written.empty() ? "" : ", ") + predictions_written + "/";
      if (!written.empty()) *os << "predictions: " << written << "\n";
      *os << std::flush;
    }
    if (dist) dist->barrier();  // rank 0 hosts the store: leave together
    return summary;
  }

  // ---- evaluation, report, checkpoints ------------------------------------------------

  // Evaluates on the whole val split (each rank its share, then combined); logs a
  // "val" line, rewrites report.html and saves `best`.
  // The task's evaluation of the whole val split (each rank its share, then
  // combined), into last_eval; returns its row.
  Value evaluate_row(const std::string& predictions_dir = "") {
    model->eval();
    std::unique_ptr<TaskEvaluator> ev = task->make_evaluator();
    if (!predictions_dir.empty() && ev->write_predictions_to(predictions_dir))
      predictions_written = predictions_dir;
    {
      NoGradGuard no_grad;
      start_loader(*data.val, 0, 0);
      while (const TaskBatch* b = data.val->next())
        if (b->images() > 0) ev->add(*model, *b, device);  // 0: all skipped as corrupt
    }
    if (dist) combine(*ev, *dist->group());
    model->train();
    last_eval = std::move(ev);
    return last_eval->row();
  }

  void evaluate() {
    const Value row = evaluate_row();
    const double score = row.at(state.best_metric).as_double();
    // A model whose outputs hold inf or NaN has a non-finite val loss, whatever
    // its metric says: it never becomes `best`. No image evaluated (an empty val
    // split, or every image skipped as corrupt) means no score at all.
    const int64_t images = row.contains("images") ? row.at("images").as_int() : 1;
    const double val_loss = row.contains("loss") ? row.at("loss").as_double() : 0.0;
    std::string no_best;
    if (images == 0)
      no_best = "no val images";
    else if (!std::isfinite(val_loss))
      no_best = "the val loss is " + fixed(val_loss, 4) + " (the model's outputs hold inf or NaN)";
    else if (!std::isfinite(score))
      no_best = state.best_metric + " is " + score_text(score);
    state.last_score = no_best.empty() ? score : -1.0;  // -1: none (the trainer state's "none yet")
    summary.val = row;
    summary.score = score;
    summary.val_loss = row.contains("loss") ? row.at("loss").as_double() : -1;
    Value j = Value::object();
    j["split"] = "val";
    j["epoch"] = state.epoch + 1;  // 1-based, as people count
    j["iter"] = state.iter;
    for (const auto& [k, v] : row.members()) j[k] = v;
    j["time"] = elapsed();
    if (skip_corrupt) j["skipped"] = skipped();
    write_metrics(j);
    write_report_html();
    if (auto* os = log()) {
      if (bar) *os << "\r\033[K";
      *os << "val   epoch " << state.epoch + 1 << " iter " << state.iter << ": "
          << last_eval->describe(row);
      if (skip_corrupt) *os << ", " << skipped() << " corrupt images skipped so far";
      if (!no_best.empty()) *os << "; " << no_best << ": not a best";
      *os << " (" << hms(elapsed()) << ")\n" << std::flush;
    }
    evaluated_at = state.iter;
    if (no_best.empty() && score > state.best_score) {
      state.best_score = score;
      save("best");
    }
  }

  void write_report_html() {
    if (!main_rank()) return;
    const fs::path dir(opts.out_dir);
    ReportInputs in;
    in.title = "tcv-train: " + set->network.model_name + " (" + dir.string() + ")";
    in.config_toml = cfg.to_toml();
    in.metrics = read_jsonl((dir / "metrics.jsonl").string());
    if (last_eval) last_eval->fill_report(in);
    write_report((dir / "report.html").string(), in);
  }

  void save(const std::string& name) {
    if (!main_rank()) return;
    state.rng_seed = default_generator().seed();
    state.rng_offset = default_generator().offset();
    state.elapsed_s = elapsed();
    save_checkpoint((ckpt_dir / name).string(), *model, optim.get(), state);
  }

  void save_epoch_checkpoint(int64_t epochs_done) {
    char name[32];
    std::snprintf(name, sizeof(name), "epoch_%04lld", static_cast<long long>(epochs_done));
    save(name);
    const int64_t keep = set->keep_last;
    if (keep == 0) return;
    std::vector<std::string> stems;
    for (const auto& e : fs::directory_iterator(ckpt_dir)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("epoch_", 0) == 0 && e.path().extension() == ".safetensors")
        stems.push_back((ckpt_dir / e.path().stem()).string());
    }
    std::sort(stems.begin(), stems.end());
    for (size_t i = 0; i + keep < stems.size(); ++i) {
      fs::remove(stems[i] + ".safetensors");
      fs::remove(stems[i] + ".json");  // the trainer state of an earlier version's checkpoint
    }
  }

  // A step (the iteration about to be state.iter + 1) whose loss or gradients
  // hold inf or NaN: throws (NonFinite::stop), or drops the step, restoring the
  // buffers its forward changed, and counts it (NonFinite::skip). Nothing has
  // been saved since the step's forward.
  void drop_nonfinite_step(double loss_v) {
    const int64_t iter = state.iter + 1;
    const std::string bad = first_nonfinite(named_grads(optim->params()));
    std::string what = "loss " + fixed(loss_v, 4) + ", ";
    what += bad.empty() ? "gradients finite" : "first parameter with a non-finite gradient: " + bad;
    if (step_cfg.nonfinite == NonFinite::stop)
      TCV_THROW("non-finite training step at iteration ", iter, " (epoch ", state.epoch + 1,
                ", lr ", state.lr, "): ", what,
                ". Stopped before the update; no checkpoint was written from it. Lower "
                "solver.lr.base_lr, look for inf or NaN in the data, or set solver.nonfinite = "
                "\"skip\" to drop such steps");
    {
      NoGradGuard no_grad;
      for (auto& [b, copy] : step_cfg.buffers) b.copy_(copy);
    }
    ++state.nonfinite_skipped;
    const int64_t n = state.nonfinite_skipped;
    if (auto* os = log(); os && (n <= 10 || n % 100 == 0)) {
      if (bar) *os << "\r\033[K";
      *os << "skipped iteration " << iter << " (epoch " << state.epoch + 1 << "): " << what << " ("
          << n << " skipped so far" << (n == 10 ? "; from now on every 100th is shown" : "")
          << ")\n"
          << std::flush;
    }
  }

  // solver.nonfinite = "skip" promises that inf and NaN never reach the weights,
  // yet an update of finite gradients may overflow them (a huge learning rate):
  // then training stops as "stop" does, before anything is saved from it. One
  // fused check of the parameters and buffers after each update, under "skip" only.
  void check_weights_after_update(double loss_v) {
    if (step_cfg.nonfinite != NonFinite::skip) return;
    const nn::StateDict weights = model->state_dict();
    std::vector<Tensor> all;
    all.reserve(weights.size());
    for (const auto& [name, t] : weights) all.push_back(t);
    if (all_finite(all)) return;
    TCV_THROW("non-finite weights after the update of iteration ", state.iter + 1, " (epoch ",
              state.epoch + 1, ", lr ", state.lr, "): loss ", fixed(loss_v, 4),
              ", gradients finite, first tensor holding inf or NaN: ", first_nonfinite(weights),
              ". Stopped as solver.nonfinite = \"stop\" would: \"skip\" drops steps whose loss "
              "or gradients hold inf or NaN, and this update overflowed the weights themselves; "
              "nothing was saved from it. Lower solver.lr.base_lr");
  }

  void draw_bar(double loss, double ips, double run_s, int64_t run_iters) {
    auto* os = log();
    if (!os) return;
    const int width = 24;
    const double frac =
        static_cast<double>(state.epoch_iter) / static_cast<double>(iters_per_epoch);
    const int fill = static_cast<int>(frac * width);
    std::string b(width, ' ');
    for (int i = 0; i < fill; ++i) b[i] = '=';
    if (fill < width) b[fill] = '>';
    const double eta = run_iters > 0 ? run_s / static_cast<double>(run_iters) *
                                           static_cast<double>(max_iters - state.iter)
                                     : NAN;
    *os << "\repoch " << state.epoch + 1 << "/" << max_epochs << " [" << b << "] "
        << state.epoch_iter << "/" << iters_per_epoch << " loss " << fixed(loss, 4) << " "
        << fixed(ips, 0) << " img/s ETA " << hms(eta) << "\033[K" << std::flush;
  }
};

Trainer::Trainer(Config cfg, TrainOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->opts = std::move(opts);
  impl_->setup();
}

Trainer::~Trainer() = default;

TrainSummary Trainer::run() {
  return impl_->run();
}

}  // namespace tcv::train
