#include "distarray/node_memory.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tessera_config.hpp"

#if TESSERA_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::optional<std::int64_t> read_number(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) return std::nullopt;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return std::nullopt;  // out of range: no limit worth the name
  }
}

std::optional<std::int64_t> mem_available(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// cgroup v1 reports "no limit" as a huge number rounded to the page size.
constexpr std::int64_t kNoLimit = std::int64_t{1} << 60;

struct CgroupFiles {
  fs::path dir;   // the hierarchy's mount point
  std::string limit, usage;
};

// The tightest (limit − usage) over this process's cgroup directory and its ancestors in
// one hierarchy. Inside a container the hierarchy's root is often the process's own
// cgroup, so the mount point itself counts too.
std::optional<std::int64_t> cgroup_headroom(const CgroupFiles& h, const std::string& own_path) {
  std::optional<std::int64_t> best;
  fs::path rel = fs::path(own_path).relative_path();
  for (;;) {
    const fs::path dir = h.dir / rel;
    const auto limit = read_number(dir / h.limit);
    const auto usage = read_number(dir / h.usage);
    if (limit && *limit < kNoLimit) {
      const std::int64_t headroom = std::max<std::int64_t>(0, *limit - usage.value_or(0));
      best = best ? std::min(*best, headroom) : headroom;
    }
    if (rel.empty()) break;
    rel = rel.parent_path();
  }
  return best;
}

// v2 ("0::/path") and v1 ("N:memory:/path" or "N:...,memory,...:/path") entries of
// /proc/self/cgroup.
std::optional<std::int64_t> cgroup_available(const fs::path& root) {
  std::ifstream in(root / "proc/self/cgroup");
  std::optional<std::int64_t> best;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    std::optional<std::int64_t> headroom;
    if (line.compare(0, first, "0") == 0 && controllers.empty())
      headroom = cgroup_headroom({root / "sys/fs/cgroup", "memory.max", "memory.current"}, path);
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      headroom = cgroup_headroom({root / "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"}, path);
    if (headroom) best = best ? std::min(*best, *headroom) : headroom;
  }
  return best;
}

// The ranks of `comm` on this node that share `colour` (a GPU index, or 0 for the host).
int ranks_sharing(MPI_Comm comm, int colour) {
  MPI_Comm node, shared;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_split(node, colour, 0, &shared);
  int count = 1;
  MPI_Comm_size(shared, &count);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&node);
  return count;
}

}  // namespace

std::optional<ResidentMemory> resident_memory(const fs::path& root) {
  std::ifstream in(root / "proc/self/status");
  std::optional<std::int64_t> now, peak;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") now = kib * 1024;
    if (key == "VmHWM:") peak = kib * 1024;
  }
  if (!now || !peak) return std::nullopt;
  return ResidentMemory{*now, *peak};
}

std::optional<MemoryShare> host_memory_available(const fs::path& root) {
  const auto available = mem_available(root);
  if (!available) return std::nullopt;
  const auto cgroup = cgroup_available(root);
  if (cgroup && *cgroup < *available) return MemoryShare{*cgroup, "the memory cgroup's limit less its usage"};
  return MemoryShare{*available, "MemAvailable"};
}

std::optional<MemoryShare> rank_memory_share(MPI_Comm comm) {
#if TESSERA_ENABLE_CUDA
  int device = 0;
  std::size_t free = 0, total = 0;
  const bool known = cudaGetDevice(&device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess;
  const int sharing = ranks_sharing(comm, known ? device : -1);
  if (!known) return std::nullopt;
  return MemoryShare{static_cast<std::int64_t>(free) / sharing,
                     "GPU " + std::to_string(device) + "'s free memory (cudaMemGetInfo) / " + std::to_string(sharing) +
                         " ranks on it"};
#else
  const int sharing = ranks_sharing(comm, 0);
  const auto host = host_memory_available();
  if (!host) return std::nullopt;
  return MemoryShare{host->bytes / sharing, host->source + " / " + std::to_string(sharing) + " ranks on this node"};
#endif
}

std::int64_t parse_byte_size(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return std::invalid_argument(what + " must be a size such as 512M, 8G or 1500000000 (bytes), got '" + text + "'");
  };
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::pair<std::string, double>> units{{"", 1},           {"B", 1},
                                                          {"K", 0x1p10},     {"KB", 0x1p10},  {"KIB", 0x1p10},
                                                          {"M", 0x1p20},     {"MB", 0x1p20},  {"MIB", 0x1p20},
                                                          {"G", 0x1p30},     {"GB", 0x1p30},  {"GIB", 0x1p30},
                                                          {"T", 0x1p40},     {"TB", 0x1p40},  {"TIB", 0x1p40}};
  const auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == unit; });
  if (it == units.end() || !std::isfinite(number) || number <= 0) throw bad();
  const double bytes = number * it->second;
  if (bytes >= 0x1p62) throw bad();
  return static_cast<std::int64_t>(bytes);
}

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(value) >= 1024 && u < 5) value /= 1024, ++u;
  char text[32];
  if (u == 0) std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(text, sizeof text, value < 10 ? "%.2f %s" : value < 100 ? "%.1f %s" : "%.0f %s", value, units[u]);
  return text;
}

}  // namespace tessera
