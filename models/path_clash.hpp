#pragma once
// Refusing an output path that names an input or another output: a --metrics or --save
// given the path of --data would destroy the training file, two outputs on one path
// would overwrite each other. Checked before any work, by inode where the file exists.

#include <string>
#include <utility>
#include <vector>

namespace tessera::models {

struct NamedPath {
  std::string option;  // "--save"
  std::string path;    // empty: not given
};

// One line naming both options when an output names the same file as an input or an
// earlier output, else "". `allowed` lists (output, input) option pairs that may share a
// file (--save over --resume: the checkpoint is read whole before any save replaces it).
std::string path_clash(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                       const std::vector<std::pair<std::string, std::string>>& allowed = {});

}  // namespace tessera::models
