#pragma once
// Whether two paths name one file, so that a program can refuse an output path that names
// one of its inputs: writing it would destroy the input before (or while) it is read.

#include <string>

namespace tessera {

// True when `a` and `b` name the same file: the same inode when both exist (hard and
// symbolic links, "./x" and "x"), else the same normalised absolute path (symbolic links
// of the directories above resolved). False when either is empty.
bool same_file(const std::string& a, const std::string& b);

}  // namespace tessera
