// Where the liveprof command finds its own files: in the build tree
// (<build>/bin/liveprof, the package in <build>/python, the dashboard in the
// source tree's static/), or installed by pip inside the Python package
// liveprof (<package>/bin/liveprof beside <package>/static, <package>/bootstrap
// and <package>/libliveprof.so: setup.py, docs/python.md).
#ifndef LIVEPROF_APP_PATHS_H_
#define LIVEPROF_APP_PATHS_H_

#include <string>

namespace liveprof {

// The folder this executable is in (/proc/self/exe, links resolved), or "".
std::string ExecutableDir();

// The dashboard's files, --static's default: <exe>/../static when it holds
// index.html (installed: the package's copy), else the source tree's static/
// the build was made from.
std::string DefaultStaticDir();

}  // namespace liveprof

#endif  // LIVEPROF_APP_PATHS_H_
