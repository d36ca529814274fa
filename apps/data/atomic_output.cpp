#include "data/atomic_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace tessera::data {

AtomicOutput::AtomicOutput(const std::string& path)
    : path_(path), temporary_(path + ".tmp-" + std::to_string(::getpid())) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("cannot write '" + path + "': it is a directory");
  // O_EXCL: never adopt (and later delete) a file this process did not create.
  const int fd = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  ::close(fd);
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) std::remove(temporary_.c_str());
}

void AtomicOutput::commit() {
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("cannot rename '" + temporary_ + "' to '" + path_ + "': " + std::strerror(errno));
  committed_ = true;
}

}  // namespace tessera::data
