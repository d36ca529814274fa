#pragma once
// PredictionFile: what tessera-train --predict-out writes during the final evaluation — for
// every sample of the evaluation file, what the model saw and what it answered, in global
// layout (the same file whatever the grid), so that a program of one's own can score the
// answers (scripts/unet-example.sh computes PSNR from it):
//   /inputs  (N, C, H, W)    float32: the model's input (with --noise, the noisy image)
//   /outputs (N, C', H', W') float32: the model's output
// A bf16 run's are widened to float32 (exact), so a reader sees one format for both.
// N is the evaluation file's sample count, a partial last batch included. Written to a
// temporary name and renamed when complete, as checkpoints are. Collective over `comm`.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace tessera {
class Hdf5File;
}

namespace tessera::models {

class PredictionFile {
 public:
  PredictionFile(const std::string& path, std::int64_t samples, MPI_Comm comm);
  ~PredictionFile();  // an unfinished file is removed
  PredictionFile(const PredictionFile&) = delete;
  PredictionFile& operator=(const PredictionFile&) = delete;

  // rows: the file rows of the batch, consecutive, padding (-1) at the end; only the real
  // rows are written. input and output: the model's, distributed over the batch. T: float
  // or bf16.
  template <class T>
  void write(const std::vector<std::int64_t>& rows, const layers::Tensor<T>& input, const layers::Tensor<T>& output);
  // Closes the file and gives it its name.
  void finish();

 private:
  std::string path_, temporary_;
  std::int64_t samples_;
  MPI_Comm comm_;
  std::unique_ptr<Hdf5File> file_;
};

}  // namespace tessera::models
