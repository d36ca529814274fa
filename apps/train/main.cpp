// tessera-train: trains a model on a Tessera data file over MPI ranks (docs/training.md).
//   mpiexec -n 4 tessera-train --model fashion-cnn --data train.h5 --val-data test.h5
//       --grid 1x2x2 --batch 64 --epochs 2 --optimizer adam --lr 1e-3 --save model.h5
// Options come from the command line and from --config FILE (`name = value` lines, the
// same names without dashes); the command line wins.
// Exit status: 0 done; 1 the run failed (data or checkpoint I/O, a non-finite loss, an
//   allocation that failed although the memory plan fitted);
// 2 bad configuration (options, grid, model, shapes, a model too large for the memory a rank
//   may use), found before any training step or allocation;
// 3 the watchdog ended a rank that waited too long for the others.
#include <boost/program_options.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "data/png_writer.hpp"
#include "distarray/hdf5_file.hpp"
#include "distarray/node_memory.hpp"
#include "distarray/runtime.hpp"
#include "layers/conv_backend.hpp"
#include "models/checkpoint_files.hpp"
#include "models/perf_model.hpp"
#include "models/prediction_table.hpp"
#include "models/trainer.hpp"
#include "train/filter_image.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

constexpr int kRunFailed = 1;
constexpr int kBadConfiguration = 2;

struct AppOptions {
  models::TrainerOptions train;
  std::string config;
  std::string overlap = "on";
  std::string overlap_allreduce = "on";
  std::string progress = "auto";
  std::string filters_png;
  std::string memory_limit;
  int predict = 0;             // --predict P: print the performance model's table for P ranks, train nothing
  std::string predict_input;   // CxHxW of one sample (default: --data's)
  std::string predict_machine = "build";
};

po::options_description describe_options(AppOptions& a) {
  models::TrainerOptions& t = a.train;
  po::options_description o("tessera-train: train a model on a tiled, distributed batch\noptions");
  o.add_options()("help,h", "show this help and exit")
      ("config", po::value(&a.config), "read options from FILE (name = value lines); the command line wins")
      ("model", po::value(&t.model)->default_value(t.model), "preset name or sequential spec (docs/models.md)")
      ("data", po::value(&t.data), "training data file, HDF5 (docs/data.md); required")
      ("val-data", po::value(&t.val_data), "evaluation data file, evaluated after training")
      ("predict-out", po::value(&t.predict_out),
       "write the final evaluation's inputs and outputs of every --val-data sample to this HDF5 file "
       "(/inputs, /outputs; denoising or /targets)")
      ("grid", po::value(&t.grid)->default_value(t.grid), "process grid NxHxW (samples x rows x columns), or auto")
      ("batch", po::value(&t.batch)->default_value(t.batch), "global batch size (all ranks together)")
      ("steps", po::value(&t.steps)->default_value(t.steps), "training steps in all (0: use --epochs)")
      ("epochs", po::value(&t.epochs)->default_value(t.epochs), "epochs (0 with --steps 0: one epoch)")
      ("optimizer", po::value(&t.optimizer.kind)->default_value(t.optimizer.kind), "sgd | adam | adamw | lars")
      ("lr", po::value(&t.optimizer.lr)->default_value(t.optimizer.lr), "learning rate (peak, after warm-up)")
      ("lr-base-batch", po::value(&t.lr_base_batch)->default_value(t.lr_base_batch),
       "linear scaling rule: --lr is tuned for this batch and scaled by batch/this (0: off)")
      ("momentum", po::value(&t.optimizer.momentum)->default_value(t.optimizer.momentum), "momentum (sgd, lars)")
      ("weight-decay", po::value(&t.optimizer.weight_decay)->default_value(t.optimizer.weight_decay),
       "weight decay (L2 for sgd/adam/lars, decoupled for adamw)")
      ("warmup", po::value(&t.optimizer.warmup)->default_value(t.optimizer.warmup),
       "steps of linear learning-rate warm-up from 0")
      ("seed", po::value(&t.seed)->default_value(t.seed), "seed of the initial weights and the sample order")
      ("init-from", po::value(&t.init_from), "start from the weights of this checkpoint (not its optimizer state)")
      ("save", po::value(&t.save), "write the final checkpoint here (checked writable before training)")
      ("resume", po::value(&t.resume), "continue the run saved in this checkpoint, on any grid")
      ("checkpoint-every", po::value(&t.checkpoint_every)->default_value(t.checkpoint_every),
       "also save to --save every N steps (0: only at the end)")
      ("eval-every", po::value(&t.eval_every)->default_value(t.eval_every),
       "also evaluate on --val-data every N steps (0: only at the end)")
      ("metrics", po::value(&t.metrics), "append one JSON line per step (and evaluation) to this file")
      ("noise", po::value(&t.noise)->default_value(t.noise),
       "train a denoiser on unlabelled images: input + N(0, noise^2), target the clean image (0: off)")
      ("objective", po::value(&t.objective)->default_value(t.objective),
       "supervised (labels, targets or --noise) | tica: reconstruction TICA on the images (docs/train-app.md)")
      ("tica-lambda", po::value(&t.tica_lambda)->default_value(t.tica_lambda), "TICA: weight of the sparsity term")
      ("tica-mode", po::value(&t.tica_mode)->default_value(t.tica_mode),
       "TICA: greedy (the steps split over the stages, one at a time) | joint (every stage at once)")
      ("tica-stage-steps", po::value(&t.tica_stage_steps)->default_value(t.tica_stage_steps),
       "TICA greedy: steps per stage, the last stage taking the rest (0: --steps split evenly)")
      ("precision", po::value(&t.precision)->default_value(t.precision), "fp32 | bf16")
      ("memory-limit", po::value(&a.memory_limit),
       "bytes each rank may allocate, e.g. 6G (default: the node's available memory, or the GPU's free memory, "
       "shared by its ranks)")
      ("halo-transport", po::value(&t.halo.transport)->default_value(t.halo.transport),
       "auto | mpi | mpi-staged | nccl")
      ("overlap", po::value(&a.overlap)->default_value(a.overlap),
       "on | off: overlap halo exchanges with interior work")
      ("overlap-allreduce", po::value(&a.overlap_allreduce)->default_value(a.overlap_allreduce),
       "on | off: reduce gradients in buckets while backward runs (off: one fused allreduce after it)")
      ("watchdog", po::value(&t.watchdog.floor)->default_value(t.watchdog.floor),
       "seconds without progress after which a rank ends the job (at least; 10x the slowest step); 0: off")
      ("filters-png", po::value(&a.filters_png), "after training, draw layer 0's filters from --save into this PNG")
      ("progress", po::value(&a.progress)->default_value(a.progress), "auto | on | off: a progress line on stderr")
      ("verbose", po::bool_switch(&t.verbose), "print the runtime, the model layer by layer and each layer's path")
      ("predict", po::value(&a.predict)->default_value(a.predict),
       "print the performance model's step prediction of every grid of P ranks (per layout) and exit (0: train)")
      ("predict-input", po::value(&a.predict_input), "--predict: one sample's CxHxW (default: --data's)")
      ("predict-machine", po::value(&a.predict_machine)->default_value(a.predict_machine),
       "--predict: build (this build's: CPU cores or H100s) | cpu | h100");
  return o;
}

// Parses the command line and --config into `a`; throws po::error or std::invalid_argument.
bool parse(int argc, char** argv, AppOptions& a, const po::options_description& desc) {
  po::variables_map vm;
  const po::parsed_options parsed = po::command_line_parser(argc, argv).options(desc).run();
  const std::vector<std::string> stray = po::collect_unrecognized(parsed.options, po::include_positional);
  if (!stray.empty())
    throw std::invalid_argument("unexpected argument '" + stray.front() + "': every option is --name value");
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return false;
  }
  if (vm.count("config")) {
    const std::string path = vm["config"].as<std::string>();
    // A directory opens as a stream that reads nothing: it would pass as an empty config.
    if (std::filesystem::is_directory(path)) throw std::invalid_argument("config file '" + path + "' is a directory");
    std::ifstream file(path);
    if (!file) throw std::invalid_argument("cannot read config file '" + path + "'");
    const po::parsed_options from_file = po::parse_config_file(file, desc);
    // Boost accepts every described option in a file; these two would be read and ignored.
    for (const po::option& o : from_file.options)
      if (o.string_key == "config" || o.string_key == "help")
        throw std::invalid_argument("config file '" + path + "': '" + o.string_key +
                                    "' works on the command line only");
    po::store(from_file, vm);  // values already stored (the command line) win
  }
  po::notify(vm);
  // A path option given as "" would mean "not given", silently: --save "" would train and
  // keep nothing.
  for (const char* name : {"data", "val-data", "save", "metrics", "resume", "init-from", "predict-out", "filters-png"})
    if (vm.count(name) && !vm[name].defaulted() && vm[name].as<std::string>().empty())
      throw std::invalid_argument(std::string("--") + name + " needs a path, got ''");
  if (a.predict == 0 && (vm.count("predict-input") || !vm["predict-machine"].defaulted()))
    throw std::invalid_argument("--predict-input and --predict-machine apply to --predict P alone");
  if (a.overlap != "on" && a.overlap != "off")
    throw std::invalid_argument("--overlap must be on or off, got '" + a.overlap + "'");
  a.train.halo.overlap = a.overlap == "on" ? layers::Overlap::on : layers::Overlap::off;
  if (a.overlap_allreduce != "on" && a.overlap_allreduce != "off")
    throw std::invalid_argument("--overlap-allreduce must be on or off, got '" + a.overlap_allreduce + "'");
  a.train.overlap_allreduce = a.overlap_allreduce == "on";
  if (a.progress != "auto" && a.progress != "on" && a.progress != "off")
    throw std::invalid_argument("--progress must be auto, on or off, got '" + a.progress + "'");
  a.train.progress = a.progress == "on" || (a.progress == "auto" && isatty(STDERR_FILENO) && !a.train.verbose);
  if (a.train.watchdog.floor < 0) throw std::invalid_argument("--watchdog must be 0 (off) or more seconds");
  if (!a.memory_limit.empty()) a.train.memory_limit = parse_byte_size(a.memory_limit, "--memory-limit");
  if (!a.filters_png.empty() && a.train.save.empty())
    throw std::invalid_argument("--filters-png draws from the saved checkpoint: give --save too");
  if (!a.filters_png.empty()) {
    std::vector<models::NamedPath> outputs = models::output_files(a.train);
    outputs.push_back({"--filters-png", a.filters_png});
    const std::string clash = models::path_clash(models::input_files(a.train), outputs, models::kOutputsOverInputs);
    if (!clash.empty()) throw std::invalid_argument(clash);
  }
  return true;
}

void print(const std::string& line) { std::cout << line << std::endl; }

// --predict: the performance model's table (models/prediction_table.hpp) on rank 0.
int predict(const Runtime& runtime, const AppOptions& a) {
  if (a.predict < 1) throw std::invalid_argument("--predict needs a rank count of at least 1");
  if (a.predict_machine != "build" && a.predict_machine != "cpu" && a.predict_machine != "h100")
    throw std::invalid_argument("--predict-machine must be build, cpu or h100, got '" + a.predict_machine + "'");
  Shape4 input{a.train.batch, 0, 0, 0};
  if (!a.predict_input.empty()) {
    const GridDims chw = parse_grid(a.predict_input);  // the same NxHxW grammar: three counts
    input = {a.train.batch, chw[0], chw[1], chw[2]};
  } else {
    if (a.train.data.empty()) throw std::invalid_argument("--predict needs --data or --predict-input CxHxW");
    const Hdf5File file(a.train.data, Hdf5File::Mode::read, runtime.world());
    const Dims images = file.shape("/images");
    if (images.size() != 4) throw std::invalid_argument("--data: /images is not (N, C, H, W)");
    input = {a.train.batch, images[1], images[2], images[3]};
  }
  if (runtime.rank() != 0) return 0;
  const models::Machine machine = a.predict_machine == "cpu"    ? models::Machine::cpu_core()
                                  : a.predict_machine == "h100" ? models::Machine::h100_node()
                                                                : models::Machine::for_this_build(a.predict);
  models::PerfModel perf(a.train.model, input, machine);
  perf.set_overlap(a.train.halo.overlap == layers::Overlap::on);
  perf.set_precision(a.train.precision);
  std::cout << models::prediction_table(perf, a.predict) << std::flush;
  return 0;
}

// What rank 0 held at its peak against the header's plan: the growth over what the
// process held before the model was built (libraries, MPI), and the convolution backend's
// scratch, which the plan leaves out (the backend sizes it on each layer's first call).
void print_memory_used(const std::optional<ResidentMemory>& before) {
  const std::optional<ResidentMemory> after = resident_memory();
  const auto scratch = static_cast<std::int64_t>(layers::conv_scratch_bytes());
  if (!before || !after) return;
  std::printf("memory on rank 0: peak resident %s, %s more than before the model was built; convolution scratch %s\n",
              format_bytes(after->peak).c_str(), format_bytes(after->peak - before->now).c_str(),
              format_bytes(scratch).c_str());
}

int run(const Runtime& runtime, const AppOptions& a) {
  if (a.predict != 0) return predict(runtime, a);
  // Drawn after training: an unwritable path must fail before it, not after.
  if (!a.filters_png.empty()) models::check_output_writable(a.filters_png, runtime.world(), "--filters-png file");
  const std::optional<ResidentMemory> before = resident_memory();
  const models::TrainingSummary s = models::train(a.train, runtime.world(), print);
  if (runtime.rank() != 0) return 0;
  std::printf("trained %lld steps (%lld in this run), last loss %.5f, %.1f images/s\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.steps - s.first_step), s.last_loss,
              s.images_per_second);
  print_memory_used(before);
  if (s.evaluation && std::isfinite(s.evaluation->accuracy))
    std::printf("test accuracy: %.2f%% on %lld samples (loss %.5f)\n", 100 * s.evaluation->accuracy,
                static_cast<long long>(s.evaluation->samples), s.evaluation->loss);
  else if (s.evaluation)
    std::printf("test loss: %.5f on %lld samples\n", s.evaluation->loss, static_cast<long long>(s.evaluation->samples));
  if (!a.filters_png.empty()) {
    data::write_png(train::render_first_layer_filters(a.train.save), a.filters_png);
    std::printf("filters: %s\n", a.filters_png.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  AppOptions options;
  const po::options_description desc = describe_options(options);
  try {
    if (!parse(argc, argv, options, desc)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-train: error: %s (try --help)\n", e.what());
    return kBadConfiguration;
  }
  try {
    Runtime runtime(argc, argv, RuntimeOptions{options.train.verbose});
    // Failures are collective (every rank throws the same message): rank 0 says it once.
    auto fail = [&](const std::exception& e, int status) {
      std::fflush(stdout);
      if (runtime.rank() == 0) std::fprintf(stderr, "tessera-train: error: %s\n", e.what());
      return runtime.finish_with(status);
    };
    try {
      return runtime.finish_with(run(runtime, options));
    } catch (const models::OutOfMemory& e) {
      // Possibly this rank alone: the others may wait in a collective, so end them all.
      std::fflush(stdout);
      std::fprintf(stderr, "tessera-train: error: rank %d: %s\n", runtime.rank(), e.what());
      std::fflush(stderr);
      MPI_Abort(runtime.world(), kRunFailed);
      return kRunFailed;
    } catch (const std::invalid_argument& e) {
      return fail(e, kBadConfiguration);
    } catch (const std::exception& e) {
      return fail(e, kRunFailed);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-train: error: %s\n", e.what());
    return kBadConfiguration;
  }
}
