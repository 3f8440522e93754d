#pragma once
// Folders of a test binary run's own, for what a test must not share with other runs (caches).
#include <cstdlib>
#include <string>

namespace resident::test {

/// A new folder of this user's alone under /tmp, named prefix-XXXXXX (mkdtemp), with "/" + leaf
/// appended: each run gets folders of its own (a cache's counts then belong to that run).
inline std::string private_folder(const char* prefix, const char* leaf) {
  std::string pattern = std::string("/tmp/") + prefix + "-XXXXXX";
  const char* d = ::mkdtemp(pattern.data());
  return std::string(d ? d : "/tmp") + "/" + leaf;
}

}  // namespace resident::test
