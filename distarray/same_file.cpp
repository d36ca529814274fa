#include "distarray/same_file.hpp"

#include <filesystem>
#include <system_error>

namespace tessera {

bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  // One does not exist yet: an output about to be created. Only the paths can tell.
  const fs::path pa = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path pb = fs::weakly_canonical(b, ec);
  return !ec && pa == pb;
}

}  // namespace tessera
