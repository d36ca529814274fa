#include "models/path_clash.hpp"

#include <algorithm>

#include "distarray/same_file.hpp"

namespace tessera::models {

std::string path_clash(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                       const std::vector<std::pair<std::string, std::string>>& allowed) {
  auto may_share = [&](const NamedPath& out, const NamedPath& in) {
    return std::find(allowed.begin(), allowed.end(), std::pair(out.option, in.option)) != allowed.end();
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    for (const NamedPath& in : inputs)
      if (!may_share(out, in) && same_file(out.path, in.path))
        return out.option + " '" + out.path + "' names the same file as " + in.option + " '" + in.path +
               "': writing it would destroy that input";
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(out.path, outputs[j].path))
        return out.option + " '" + out.path + "' names the same file as " + outputs[j].option + " '" +
               outputs[j].path + "': give each output a file of its own";
  }
  return "";
}

}  // namespace tessera::models
