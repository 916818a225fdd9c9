// TraceFileImporter: any trace file liveprof reads, chosen by its name:
// `.xplane.pb` / `.xplane.pb.gz` (XPlane, xplane.h); a CUPTI recording, by
// its header whatever its name (cupti_recording_file.h); else Chrome trace
// JSON and Kineto's (plain or gzip, chrome_trace.h). One name table for both, so
// callers see the same events and definitions whichever file they gave.
#ifndef LIVEPROF_IMPORT_TRACE_FILE_H_
#define LIVEPROF_IMPORT_TRACE_FILE_H_

#include <string>

#include "import/chrome_trace.h"
#include "import/cupti_recording_file.h"
#include "import/xplane.h"

namespace liveprof {

class TraceFileImporter {
 public:
  // As ChromeTraceImporter::ImportFile, for either format.
  bool ImportFile(const std::string& path, const ChromeTraceImporter::Sink& sink, ImportReport* report,
                  std::string* error, const ImportProgressFn& progress = {}) {
    if (IsXPlanePath(path)) return ImportXPlaneFile(path, &names_, sink, report, error, progress);
#if defined(LIVEPROF_HAVE_CUPTI)  // (a build without the CUDA toolkit has no record parser)
    if (IsCuptiRecordingFile(path)) return ImportCuptiRecordingFile(path, &names_, sink, report, error, progress);
#endif
    return chrome_.ImportFile(path, sink, report, error, progress);
  }
  // Whether ImportFile reads `path` as Chrome trace JSON.
  static bool IsChromeTrace(const std::string& path) {
    if (IsXPlanePath(path)) return false;
#if defined(LIVEPROF_HAVE_CUPTI)
    if (IsCuptiRecordingFile(path)) return false;
#endif
    return true;
  }
  // The Chrome trace importer (ChromeTraceImporter::Keep).
  ChromeTraceImporter& chrome() { return chrome_; }
  // The strings the definitions point to.
  const NameTable& names() const { return names_; }

 private:
  NameTable names_;
  ChromeTraceImporter chrome_{&names_};
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_TRACE_FILE_H_
