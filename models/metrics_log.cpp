#include "models/metrics_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tessera::models {
namespace {

// JSON has no NaN or Infinity: such a loss is written as null.
std::string number(double x) {
  if (!std::isfinite(x)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

// TICA's terms and stage, present only for that objective.
std::string tica_fields(const StepMetrics& m) {
  if (!std::isfinite(m.reconstruction)) return {};
  return ", \"reconstruction\": " + number(m.reconstruction) + ", \"sparsity\": " + number(m.sparsity) +
         (m.stage >= 0 ? ", \"stage\": " + std::to_string(m.stage) : std::string());
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  return text;
}

// Empty when `path` can be opened for writing, without changing an existing file: opened
// without truncation if it exists, else created and removed again.
std::string writability_problem(const std::string& path) {
  struct stat info {};
  const bool exists = ::stat(path.c_str(), &info) == 0;
  if (exists && S_ISDIR(info.st_mode)) return "it is a directory";
  const int fd = exists ? ::open(path.c_str(), O_WRONLY) : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  if (!exists) ::unlink(path.c_str());
  return "";
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool rank0, bool append) : append_(append) {
  if (!rank0 || path.empty()) return;
  const std::string problem = writability_problem(path);
  if (!problem.empty()) throw std::runtime_error("cannot write metrics file '" + path + "': " + problem);
  path_ = path;
}

void MetricsLog::open() {
  if (path_.empty() || file_) return;
  file_ = std::fopen(path_.c_str(), append_ ? "a" : "w");
  if (!file_) throw std::runtime_error("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::string& line) {
  if (!file_) return;
  ++lines_;
  errno = 0;
  const bool written = std::fputs(line.c_str(), file_) >= 0 && std::fputc('\n', file_) != EOF &&
                       std::fflush(file_) == 0;  // flushed: a crash later must not lose the lines before it
  if (!written && failure_.empty())
    failure_ = "writing metrics file '" + path_ + "' failed at its line " + std::to_string(lines_) + ": " +
               (errno ? std::strerror(errno) : "write error");
}

void MetricsLog::step(const StepMetrics& m) {
  write("{\"step\": " + std::to_string(m.step) + ", \"epoch\": " + std::to_string(m.epoch) +
        ", \"loss\": " + number(m.loss) + ", \"accuracy\": " + number(m.accuracy) + ", \"lr\": " + number(m.lr) +
        ", \"images_per_s\": " + number(m.images_per_second) + ", \"step_s\": " + number(m.seconds) +
        ", \"data_s\": " + number(m.data_seconds) + ", \"halo_s\": " + number(m.halo_seconds) +
        ", \"allreduce_s\": " + number(m.reduce_seconds) + ", \"compute_s\": " +
        number(m.seconds - m.data_seconds - m.halo_seconds - m.reduce_seconds) + tica_fields(m) + "}");
}

void MetricsLog::evaluation(std::int64_t step, std::int64_t samples, double loss, double accuracy,
                            double reconstruction) {
  write("{\"eval\": true, \"step\": " + std::to_string(step) + ", \"samples\": " + std::to_string(samples) +
        ", \"loss\": " + number(loss) + ", \"accuracy\": " + number(accuracy) +
        (std::isfinite(reconstruction) ? ", \"reconstruction\": " + number(reconstruction) : std::string()) + "}");
}

ProgressLine::ProgressLine(bool enabled, std::int64_t total_steps) : enabled_(enabled), total_(total_steps) {}

void ProgressLine::update(const StepMetrics& m, double seconds_per_step) {
  if (!enabled_) return;
  const double t = now_seconds();
  if (last_draw_ >= 0 && t - last_draw_ < 0.5 && m.step != total_) return;
  last_draw_ = t;
  std::fprintf(stderr, "\r\033[Kstep %lld/%lld (epoch %lld)  loss %.4f  %.0f img/s  ETA %s",
               static_cast<long long>(m.step), static_cast<long long>(total_), static_cast<long long>(m.epoch + 1),
               m.loss, m.images_per_second,
               duration_text(seconds_per_step * static_cast<double>(total_ - m.step)).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::finish() {
  if (drawn_) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  drawn_ = false;
}

}  // namespace tessera::models
