#pragma once
// What rank 0 tells about each step: a JSON line to the --metrics file (always, when one
// is given) and a progress line redrawn on stderr (when attached to a terminal).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera::models {

struct StepMetrics {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double loss = 0;
  double accuracy = 0;  // of the batch, before the update (labelled data)
  double lr = 0;
  double seconds = 0;         // wall time of the step
  double data_seconds = 0;    // reading the batch
  double halo_seconds = 0;    // exposed halo exchange (blocked in Exchange::finish)
  double reduce_seconds = 0;  // gradient allreduce
  double images_per_second = 0;
  // Reconstruction TICA (models/tica.hpp): the two terms of the loss and the greedy stage
  // trained (-1: every stage); NaN for other objectives, and then left out of the line.
  double reconstruction = std::nan("");
  double sparsity = std::nan("");
  std::int64_t stage = -1;
};

class MetricsLog {
 public:
  // Rank 0 checks that `path` can be written, leaving an existing file as it is; other
  // ranks and an empty path write nothing. Throws std::runtime_error when it cannot be.
  MetricsLog(const std::string& path, bool rank0, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Opens the file (append: a resumed run continues it; else replaced), once the first
  // step has finished: a run that fails before that leaves an existing file as it was.
  // Throws std::runtime_error when it cannot be opened.
  void open();
  void step(const StepMetrics& m);
  // {"eval": true, "step": ..., "samples": ..., "loss": ..., "accuracy": ...} (and
  // "reconstruction" when it is finite: TICA)
  void evaluation(std::int64_t step, std::int64_t samples, double loss, double accuracy,
                  double reconstruction = std::nan(""));
  // The first write that failed (a full disk), as one line; empty while every line got
  // out. Only rank 0 writes, so the trainer asks at a point every rank reaches (the end
  // of the run) rather than let rank 0 throw alone in a step.
  const std::string& failure() const { return failure_; }

 private:
  void write(const std::string& line);
  std::string path_;  // empty: nothing to write on this rank
  bool append_ = false;
  std::FILE* file_ = nullptr;
  std::int64_t lines_ = 0;
  std::string failure_;
};

// The progress line: "step 120/1000 (epoch 2)  loss 0.4123  1830 img/s  ETA 1m32s",
// redrawn at most twice a second; cleared by finish().
class ProgressLine {
 public:
  ProgressLine(bool enabled, std::int64_t total_steps);
  void update(const StepMetrics& m, double seconds_per_step);
  void finish();

 private:
  bool enabled_;
  std::int64_t total_;
  double last_draw_ = -1;
  bool drawn_ = false;
};

}  // namespace tessera::models
