// The trainer's run (models/trainer_run.hpp): building it, the loop, a supervised step and
// evaluation; and train(), which picks the precision.
#include "distarray/cuda_launch_check.hpp"
#include "models/trainer.hpp"

#include <Kokkos_Core.hpp>

#include <limits>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "distarray/node_memory.hpp"
#include "distarray/process_grid.hpp"
#include "halo/wait_clock.hpp"
#include "layers/backend_info.hpp"
#include "layers/wide_staging.hpp"
#include "layers/loss/classification.hpp"
#include "layers/loss/mse.hpp"
#include "models/auto_grid.hpp"
#include "models/checkpoint_files.hpp"
#include "models/input_noise.hpp"
#include "models/memory_plan.hpp"
#include "models/metrics_log.hpp"
#include "models/peer_probe.hpp"
#include "models/prediction_file.hpp"
#include "models/presets.hpp"
#include "models/rank_agreement.hpp"
#include "models/sample_order.hpp"
#include "models/sequential.hpp"
#include "models/tica.hpp"
#include "models/trainer_run.hpp"
#include "models/training_set.hpp"
#include "models/training_step.hpp"

namespace tessera::models {
namespace trainer_internal {
namespace {

std::string shape_text(const Shape4& s) {
  return std::to_string(s[N]) + "x" + std::to_string(s[C]) + "x" + std::to_string(s[H]) + "x" + std::to_string(s[W]);
}

// --grid auto: the performance model (models/auto_grid.hpp, docs/performance.md) predicts
// a step of this model, batch and sample shape on every factorization of the rank count
// and picks the fastest — arithmetic only, so every rank picks the same grid. Rank 0 says
// which grid and why, since the choice changes what a step costs.
GridDims grid_dims(const TrainerOptions& o, MPI_Comm comm, const Line& say) {
  if (o.grid != "auto") return parse_grid(o.grid);
  const AutoGrid choice = choose_auto_grid(o.model, o.data, o.batch, o.halo, o.precision, comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0 && !choice.reason.empty()) say(choice.reason);
  return choice.dims;
}

// TICA's objective reads the model's activations between its passes (models/graph.hpp).
Passes passes_for(const TrainerOptions& o) {
  return o.objective == "tica" ? Passes::training_with_activations_kept : Passes::training;
}

template <class T>
std::optional<TicaObjectiveOf<T>> make_tica(const TrainerOptions& o, Sequential<T>& model, const ProcessGrid& grid) {
  if (o.objective != "tica") return std::nullopt;
  return std::optional<TicaObjectiveOf<T>>(std::in_place, model, grid, o.seed,
                                           TicaSettings{o.tica_lambda, parse_tica_mode(o.tica_mode), o.tica_stage_steps});
}

OptimizerSettings scaled(OptimizerSettings s, const TrainerOptions& o) {
  if (o.lr_base_batch > 0) s.lr = layers::linear_scaling(s.lr, o.batch, o.lr_base_batch);
  return s;
}

}  // namespace

template <class T>
Run<T>::Run(const TrainerOptions& o, MPI_Comm comm, const Line& say, MemoryFigures& memory)
    : o_(o),
      say_(say),
      grid_(comm, grid_dims(o, comm, say)),
      rank0_(grid_.rank() == 0),
      data_(o.data, grid_.comm()),
      spec_(resolve_model(o.model, data_.batch_shape(o.batch))),
      memory_(check_memory_fits(memory)),
      model_(spec_, data_.batch_shape(o.batch), grid_, o.seed, LayerRegistry::global(), passes_for(o)),
      tica_(make_tica(o, model_, grid_)),
      settings_(scaled(o.optimizer, o)),
      optimizer_(make_optimizer(settings_, parameters(), grid_)),
      training_step_(model_, grid_, *optimizer_, o.overlap_allreduce),
      seed_(o.seed) {
  if constexpr (!kFp32) images_.emplace(grid_, model_.shape(0), HaloWidths{}, "tessera::images_fp32");
  if (o.noise > 0) check_denoising(data_);
  if (tica_) data_.check_samples(model_.shape(0));
  else data_.check_model(model_.shape(0), model_.shape(model_.size()));
  if (o.noise == 0 && !tica_ && data_.supervision() == Supervision::none)
    throw std::invalid_argument("data file '" + o.data +
                                "' has neither /labels nor /targets to train against (--noise trains a denoiser on it)");
  if (!o.val_data.empty()) {
    val_.emplace(o.val_data, grid_.comm());
    if (o.noise > 0) check_denoising(*val_);
    if (tica_) val_->check_samples(model_.shape(0));
    else val_->check_model(model_.shape(0), model_.shape(model_.size()));
    if (o.noise == 0 && !tica_ && val_->supervision() != data_.supervision())
      throw std::invalid_argument("validation file '" + o.val_data + "' is not supervised like '" + o.data +
                                  "' (labels vs targets)");
  }
  if (!o.save.empty()) check_output_writable(o.save, grid_.comm());
  if (!o.predict_out.empty()) {
    if (o.noise == 0 && data_.supervision() != Supervision::targets)
      throw std::invalid_argument("--predict-out writes image-shaped answers: it needs --noise or data with /targets");
    check_output_writable(o.predict_out, grid_.comm(), "--predict-out file");
  }
  model_.set_halo_config(o.halo);
  if (tica_) tica_->set_halo_config(o.halo);
  if (!tica_ && (data_.supervision() == Supervision::targets || o.noise > 0))
    targets_.emplace(model_.output_grid(), model_.shape(model_.size()), HaloWidths{}, "tessera::targets");
}

template <class T>
TrainingSummary Run<T>::go() {
  TrainingSummary summary;
  summary.parameters = model_.parameter_count();
  restore(summary);
  SampleOrder order(data_.samples(), o_.batch, seed_);
  const std::int64_t total = total_steps(o_, order.batches_per_epoch());
  if (!o_.resume.empty() && total <= summary.first_step)
    throw std::invalid_argument("checkpoint '" + o_.resume + "' is already at step " +
                                std::to_string(summary.first_step) + " and this run ends at step " +
                                std::to_string(total) +
                                ": nothing to train (--steps counts the steps already taken)");
  if (rank0_ && !o_.resume.empty())
    say_("resumed from " + o_.resume + " at step " + std::to_string(summary.first_step));
  total_ = total;
  std::string open_error;
  std::optional<MetricsLog> metrics;
  record_failure(open_error, [&] { metrics.emplace(o_.metrics, rank0_, !o_.resume.empty()); });
  // Before any step: an unwritable --metrics is a bad configuration (status 2).
  if (const std::string error = agreed_error(grid_.comm(), open_error); !error.empty())
    throw std::invalid_argument(error);
  if (rank0_) say_(header(order, total));

  ProgressLine progress(o_.progress && rank0_, total);
  std::optional<PeerProbe> peers;  // outlives the watchdog, whose thread may ask it
  std::optional<Watchdog> watchdog;
  if (o_.watchdog.floor > 0) {
    watchdog.emplace("tessera-train", grid_.rank(), o_.watchdog);
    peers.emplace(grid_.comm());
    watchdog->set_diagnosis([&peers] { return peers->diagnose(); });
  }
  const Beat beat = [&](std::int64_t step, const char* what) {
    if (watchdog) watchdog->beat("step " + std::to_string(step) + ": " + what);
  };

  double images = 0, busy = 0;
  summary.steps = summary.first_step;
  for (std::int64_t s = summary.first_step + 1; s <= total; ++s) {
    StepMetrics m = step(order, s, beat);
    images += static_cast<double>(o_.batch);
    busy += m.seconds;
    summary.steps = s;
    summary.last_loss = m.loss;
    if (watchdog) watchdog->step_done(m.seconds);
    if (s == summary.first_step + 1) {  // opened only now: a run that fails earlier leaves the file as it was
      std::string error;
      record_failure(error, [&] { metrics->open(); });
      throw_if_any(grid_.comm(), error);
    }
    metrics->step(m);
    progress.update(m, busy / static_cast<double>(s - summary.first_step));
    if (o_.checkpoint_every > 0 && s % o_.checkpoint_every == 0 && s != total) {
      beat(s, "writing a checkpoint");
      save(o_.save, s);
    }
    if (o_.eval_every > 0 && s % o_.eval_every == 0 && s != total) {
      progress.finish();
      report(evaluate(*val_, s, beat), s, *metrics);
    }
  }
  progress.finish();
  summary.images_per_second = busy > 0 ? images / busy : 0;
  if (!o_.save.empty()) {
    beat(summary.steps, "writing the checkpoint");
    save(o_.save, summary.steps);
    if (rank0_) say_("checkpoint: " + o_.save + " (step " + std::to_string(summary.steps) + ")");
  }
  if (val_) {
    std::optional<PredictionFile> predictions;
    if (!o_.predict_out.empty()) predictions.emplace(o_.predict_out, val_->samples(), grid_.comm());
    summary.evaluation = evaluate(*val_, summary.steps, beat, predictions ? &*predictions : nullptr);
    if (predictions) {
      predictions->finish();
      if (rank0_) say_("predictions: " + o_.predict_out + " (" + std::to_string(val_->samples()) + " samples)");
    }
    report(*summary.evaluation, summary.steps, *metrics);
  }
  // Lost metrics are a failed run (status 1), reported once the weights are saved.
  throw_if_any(grid_.comm(), metrics->failure());
  return summary;
}

template <class T>
StepMetrics Run<T>::step(SampleOrder& order, std::int64_t s, const Beat& beat) {
  StepMetrics m;
  m.step = s;
  m.epoch = order.epoch_of(s);
  const double t0 = now(), halo0 = halo::exposed_wait_seconds();
  beat(s, "reading the batch");
  const std::vector<std::int64_t> rows = order.rows(s);
  read_images(data_, rows);
  if (tica_) return tica_step(m, s, t0, halo0, beat);
  std::optional<TrainingSet::LabelView> labels;
  if (o_.noise > 0) corrupt_input(s);
  else if (data_.supervision() == Supervision::labels) labels = data_.read_labels(rows, model_.output().owned_box());
  else data_.read_targets(rows, *targets_);
  m.data_seconds = now() - t0;

  beat(s, "forward");
  const layers::Tensor<T>& out = model_.forward(model_.input());
  if (labels) {
    const layers::ClassificationStats stats = layers::classification_stats(out, *labels, model_.output_gradient());
    m.loss = stats.loss, m.accuracy = stats.accuracy;
  } else {
    m.loss = regression_loss(out, &model_.output_gradient());
    m.accuracy = std::nan("");
  }
  if (!std::isfinite(m.loss)) throw TrainingStopped(non_finite(m.loss, s));

  beat(s, "backward");
  training_step_.backward();
  beat(s, "gradient allreduce");
  m.reduce_seconds = training_step_.reduce();
  beat(s, "optimizer");
  training_step_.update();
  return finish_timing(m, t0, halo0);
}

// The end of every step, after the optimizer: the rate used and the step's times.
template <class T>
StepMetrics& Run<T>::finish_timing(StepMetrics& m, double t0, double halo0) const {
  m.lr = optimizer_->lr();
  fence_all_checked();
  m.seconds = now() - t0;
  m.halo_seconds = halo::exposed_wait_seconds() - halo0;
  m.images_per_second = static_cast<double>(o_.batch) / m.seconds;
  return m;
}

// An fp32 model reads the batch in place; a bf16 one reads it in fp32 (the files hold
// uint8 or float32) and rounds it into the model's input once.
template <class T>
void Run<T>::read_images(const TrainingSet& set, const std::vector<std::int64_t>& rows) {
  if constexpr (kFp32) {
    set.read_images(rows, model_.input());
  } else {
    set.read_images(rows, *images_);
    if (o_.noise == 0) round_images_into_input();  // a denoiser's batch is rounded after its noise (corrupt_input)
  }
}

// bf16: the fp32 batch rounded once into the model's input.
template <class T>
void Run<T>::round_images_into_input() {
  layers::WideStaging<typename layers::Tensor<T>::memory_space>::copy(images_->owned(), model_.input().owned());
}

// MSE against the fp32 targets (regression, denoising), in fp32 arithmetic in both precisions.
template <class T>
double Run<T>::regression_loss(const layers::Tensor<T>& out, const layers::Tensor<T>* gradient) {
  return gradient ? layers::mse_loss(out, targets_->owned(), *gradient) : layers::mse_loss(out, targets_->owned());
}

// Every sample of `set` once, in file order, with the weights as they are; batch norm
// uses its running statistics. The last batch is padded with rows that count for nothing.
// `predictions`: also write every sample's input and output there, a partial last batch's too.
template <class T>
Evaluation Run<T>::evaluate(const TrainingSet& set, std::int64_t at_step, const Beat& beat,
                            PredictionFile* predictions) {
  if (tica_) return tica_evaluate(set, at_step, beat);
  model_.set_training(false);
  Evaluation e;
  double loss_sum = 0, correct = 0;
  for (const std::vector<std::int64_t>& rows : evaluation_batches(set.samples(), o_.batch)) {
    beat(at_step, "evaluating");
    const bool full = rows.back() >= 0, regression = o_.noise > 0 || set.supervision() == Supervision::targets;
    if (regression && !full && !predictions) continue;  // MSE has no ignored cells
    read_images(set, rows);
    if (o_.noise > 0) corrupt_input(0);  // the same noise at every evaluation
    const layers::Tensor<T>& out = model_.forward(model_.input());
    if (predictions) predictions->write(rows, model_.input(), out);
    if (regression && !full) continue;
    if (!regression) {
      const layers::ClassificationStats stats =
          layers::classification_stats(out, set.read_labels(rows, out.owned_box()));
      loss_sum += stats.loss * stats.cells, correct += stats.accuracy * stats.cells;
      e.samples += static_cast<std::int64_t>(stats.cells);
    } else {
      if (o_.noise == 0) set.read_targets(rows, *targets_);
      loss_sum += regression_loss(out, nullptr) * static_cast<double>(o_.batch);
      e.samples += o_.batch;
    }
  }
  model_.set_training(true);
  if (e.samples > 0) e.loss = loss_sum / static_cast<double>(e.samples), e.accuracy = correct / static_cast<double>(e.samples);
  if (o_.noise > 0 || set.supervision() == Supervision::targets) e.accuracy = std::nan("");
  return e;
}

// Denoising: the clean batch is the target, the model sees it with noise keyed by the
// step (step 0: evaluation). bf16: the clean fp32 batch is the target, and the noise is
// added to it in fp32 before the one rounding into the input (the same noise as fp32's).
template <class T>
void Run<T>::corrupt_input(std::int64_t step) {
  if constexpr (kFp32) {
    Kokkos::deep_copy(targets_->owned(), model_.input().owned());
    add_gaussian_noise(model_.input(), o_.noise, seed_, step);
  } else {
    Kokkos::deep_copy(targets_->owned(), images_->owned());
    add_gaussian_noise(*images_, o_.noise, seed_, step);
    round_images_into_input();
  }
}

template <class T>
void Run<T>::check_denoising(const TrainingSet& set) const {
  if (set.supervision() != Supervision::none)
    throw std::invalid_argument("--noise trains a denoiser on images alone, but '" + set.path() +
                                "' has labels or targets");
  if (!(model_.shape(0) == model_.shape(model_.size())))
    throw std::invalid_argument("--noise needs a model whose output is shaped as its input (a denoiser), not " +
                                shape_text(model_.shape(model_.size())));
}

template <class T>
void Run<T>::report(const Evaluation& e, std::int64_t step, MetricsLog& metrics) {
  metrics.evaluation(step, e.samples, e.loss, e.accuracy, e.reconstruction);
  if (!rank0_) return;
  std::ostringstream line;
  line << "evaluation at step " << step << " on " << e.samples << " samples of " << o_.val_data << ": loss "
       << e.loss;
  if (std::isfinite(e.accuracy)) line << ", accuracy " << 100 * e.accuracy << "%";
  if (std::isfinite(e.reconstruction)) line << ", reconstruction " << e.reconstruction;
  say_(line.str());
}

// The model's parameters and, for TICA, the decoders': what the optimizer updates and a
// checkpoint holds.
template <class T>
NamedParameters<T> Run<T>::named_parameters() {
  NamedParameters<T> all = model_.params();
  if (tica_)
    for (const auto& p : tica_->decoder_params()) all.push_back(p);
  return all;
}

template <class T>
std::vector<layers::Parameter<T>*> Run<T>::parameters() {
  std::vector<layers::Parameter<T>*> all;
  for (const auto& p : named_parameters()) all.push_back(p.second);
  return all;
}

// Plans what this rank will allocate (model, optimizer state, targets, the data's tile
// cache) and refuses a run that does not fit before allocating any of it. The tile cache
// only saves reading time: it is dropped when the rest fits without it.
template <class T>
MemoryFigures& Run<T>::check_memory_fits(MemoryFigures& memory) {
  const Shape4 input = data_.batch_shape(o_.batch);
  memory.plan = Sequential<T>::memory_plan(spec_, input, grid_, LayerRegistry::global(), passes_for(o_));
  const MemoryItem output = memory.plan.items().back();  // the output activation (no halo; Graph::memory_plan)
  // Optimizer state and TICA's decoders are fp32 per parameter element, whatever T is.
  const std::int64_t parameter_bytes = memory.plan.parameter_elements() * std::int64_t(sizeof(float));
  const std::vector<std::string> buffers = make_optimizer(settings_for_plan(), {}, grid_)->buffer_names();
  if (!buffers.empty())
    memory.plan.add(o_.optimizer.kind + " state (" + std::to_string(buffers.size()) + " per parameter)", "",
                    static_cast<std::int64_t>(buffers.size()) * parameter_bytes);
  if (o_.objective != "tica" && (o_.noise > 0 || data_.supervision() == Supervision::targets)) {
    memory.plan.add("the targets (fp32)", output.shape, output.bytes / std::int64_t(sizeof(T)) * 4);
  }
  if (o_.objective == "tica") {
    // At most as many elements as the model's parameters; in bf16 a value of 2 bytes
    // besides the fp32 master and gradient, as every bf16 parameter.
    memory.plan.add("TICA decoders' masters and gradients (at most as large as the parameters)", "", 2 * parameter_bytes);
    if constexpr (!kFp32)
      memory.plan.add("TICA decoders' bf16 values", "", memory.plan.parameter_elements() * std::int64_t(sizeof(T)),
                      MemoryUse::other, "bf16");
  }
  const Distribution images(input, grid_.dims());
  if constexpr (!kFp32) memory.plan.add("the batch as read, in fp32 (rounded into the bf16 input)", "", images.owned_box(grid_.rank()).size() * 4);
  MemoryPlan with_cache = memory.plan;
  if (const std::int64_t cache = data_.tile_cache_bytes(images); cache > 0)
    with_cache.add("the data's tile cache", "", cache);
  memory.budget = memory_budget(grid_.comm(), o_.memory_limit > 0 ? std::optional(o_.memory_limit) : std::nullopt);
  const std::int64_t room = memory.budget ? memory.budget->bytes : std::numeric_limits<std::int64_t>::max();
  int cache_fits = with_cache.total() <= room ? 1 : 0;  // every rank must decide alike
  MPI_Allreduce(MPI_IN_PLACE, &cache_fits, 1, MPI_INT, MPI_MIN, grid_.comm());
  if (cache_fits) memory.plan = with_cache;
  else data_.disable_tile_cache();
  check_memory(memory.plan, memory.budget, grid_.comm());
  return memory;
}

template <class T>
OptimizerSettings Run<T>::settings_for_plan() const {
  return scaled(o_.optimizer, o_);
}

template <class T>
std::string Run<T>::non_finite(double loss, std::int64_t step) const {
  std::string text = std::string("loss is ") + (std::isnan(loss) ? "nan" : "inf") + " at step " +
                     std::to_string(step) + "; stopped before updating the weights; ";
  return text + last_good();
}

template <class T>
std::string Run<T>::header(const SampleOrder& order, std::int64_t total) {
  std::ostringstream out;
  out << "tessera-train: " << grid_.size() << " ranks, grid " << format_grid(grid_.dims()) << ", model "
      << o_.model << " (" << model_.parameter_count() << " parameters), global batch " << o_.batch << ", "
      << order.batches_per_epoch() << " steps per epoch, " << total << " steps, " << optimizer_->kind() << " "
      << describe(settings_);
  // Per rank (rank 0's share): what decides whether a model-parallel run fits.
  out << "; precision " << o_.precision;
  out << "; per rank: parameters+gradients " << model_.local_parameter_bytes() << " bytes, activations+gradients "
      << model_.local_activation_bytes() << " bytes; planned " << format_bytes(memory_.plan.total());
  std::string split;
  for (const auto& [precision, bytes] : memory_.plan.by_precision())
    split += (split.empty() ? "" : ", ") + format_bytes(bytes) + " " + precision;
  out << " (" << split << ")";
  if (memory_.budget) out << " of the " << format_bytes(memory_.budget->bytes) << " it may use (" << memory_.budget->source << ")";
  if (tica_) out << "; objective: " << tica_->describe();
  if (o_.verbose) {
    const layers::BackendInfo backend = layers::backend_info();
    out << "\nbackend: " << backend.library << ", ISA " << backend.isa << "\n" << model_.describe();
  }
  return out.str();
}

template class Run<float>;
template class Run<bf16>;

namespace {

template <class T>
TrainingSummary run(const TrainerOptions& options, MPI_Comm comm, const Line& on_rank0_line, MemoryFigures& memory) {
  Run<T> run(options, comm, on_rank0_line, memory);
  // Once the model is built (a refused one says why without this): bf16 without bf16
  // hardware still runs, slower than fp32, which a user should hear before the steps.
  if constexpr (std::is_same_v<T, bf16>) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const std::string warning = layers::bf16_speed_warning(layers::backend_info());
    if (rank == 0 && !warning.empty()) on_rank0_line(warning);
  }
  return run.go();
}

}  // namespace
}  // namespace trainer_internal

TrainingSummary train(const TrainerOptions& options, MPI_Comm comm, const trainer_internal::Line& on_rank0_line) {
  trainer_internal::check_options(options);
  // With the watchdog on, a lost peer ends the job with one line naming it, whoever notices.
  if (options.watchdog.floor > 0) end_on_mpi_failure(comm, "tessera-train");
  trainer_internal::MemoryFigures memory;
  try {
    if (options.precision == "bf16") return trainer_internal::run<bf16>(options, comm, on_rank0_line, memory);
    return trainer_internal::run<float>(options, comm, on_rank0_line, memory);
  } catch (const std::exception& e) {
    const std::optional<std::string> failed = failed_allocation(e);
    if (!failed) throw;
    throw OutOfMemory(allocation_failure(*failed, memory.plan, memory.budget));
  }
}

}  // namespace tessera::models
