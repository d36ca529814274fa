// The trainer's checkpoints: the weights of --init-from, the whole state of --resume, and
// the saves of --save (models/checkpoint.hpp).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/checkpoint_content.hpp"
#include "models/model_buffers.hpp"
#include "models/trainer_run.hpp"

namespace tessera::models::trainer_internal {

template <class T>
void Run<T>::restore(TrainingSummary& summary) {
  if (!o_.init_from.empty()) {
    ModelBuffers buffers(model_);
    CheckpointContent content = checkpoint_content(model_.params());
    buffers.add_to(content);
    load_checkpoint(o_.init_from, grid_, content, LoadScope::weights_only);
    buffers.restore();
    refresh_values();
    if (rank0_) say_("weights from " + o_.init_from);
  }
  if (o_.resume.empty()) return;
  const auto check_model = [&](const CheckpointMeta& meta) {
    if (meta.model_spec != spec_)
      throw std::invalid_argument("checkpoint '" + o_.resume + "' was written by model \"" + meta.model_spec +
                                  "\", not \"" + spec_ + "\"");
  };
  // The model first, from the metadata alone (no tensor is read): a checkpoint of another
  // model is that (status 2), not the first tensor whose shape happens to differ.
  const CheckpointMeta written = load_checkpoint(o_.resume, grid_, CheckpointContent{}, LoadScope::weights_only);
  if (!written.model_spec.empty()) check_model(written);
  ModelBuffers buffers(model_);
  CheckpointContent content = checkpoint_content(named_parameters(), optimizer_.get());
  buffers.add_to(content);
  const CheckpointMeta meta = load_checkpoint(o_.resume, grid_, content);
  buffers.restore();
  refresh_values();
  check_model(meta);
  optimizer_->set_steps(meta.step);
  summary.first_step = meta.step;
  seed_ = static_cast<std::uint64_t>(meta.seed);  // the sample order of the run being continued
  last_saved_ = {o_.resume, meta.step};
}

template <class T>
void Run<T>::save(const std::string& path, std::int64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.model_spec = spec_;
  meta.seed = static_cast<std::int64_t>(seed_);
  meta.rng_state = "sample order: SplitMix64 Fisher-Yates per epoch (models/sample_order.hpp), seed " +
                   std::to_string(seed_) + ", next step " + std::to_string(step + 1);
  meta.optimizer_options = describe(settings_);
  CheckpointContent content = checkpoint_content(named_parameters(), optimizer_.get(), meta);
  ModelBuffers buffers(model_);
  buffers.add_to(content);
  try {
    save_checkpoint(path, grid_, content);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; the weights after step " + std::to_string(step) +
                             " were not saved; " + last_good());
  }
  last_saved_ = {path, step};
}

// A checkpoint loads the fp32 masters: the model's (bf16) copies follow.
template <class T>
void Run<T>::refresh_values() {
  for (layers::Parameter<T>* p : parameters()) p->refresh_value();
}

// Only a save that passed every check (finite values included) sets last_saved_.
template <class T>
std::string Run<T>::last_good() const {
  if (last_saved_.second >= 0)
    return "the last good checkpoint is '" + last_saved_.first + "' (step " +
           std::to_string(last_saved_.second) + ")";
  return o_.save.empty() ? "no checkpoint was asked for (--save)" : "no checkpoint was written yet";
}

template void Run<float>::restore(TrainingSummary&);
template void Run<float>::save(const std::string&, std::int64_t);
template void Run<float>::refresh_values();
template std::string Run<float>::last_good() const;
template void Run<bf16>::restore(TrainingSummary&);
template void Run<bf16>::save(const std::string&, std::int64_t);
template void Run<bf16>::refresh_values();
template std::string Run<bf16>::last_good() const;

}  // namespace tessera::models::trainer_internal
