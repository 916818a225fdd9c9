// CUPTI recordings as trace files (producers/cupti_recording.h has the
// format): recognised by their header, plain or gzip, whatever the file is
// called, and read through the CUPTI producer's own parser, so `liveprof
// analyze FILE` and `liveprof replay FILE` show what the live producer
// would have shown of that run. Times are the recording's host clock
// (CLOCK_MONOTONIC of its machine), mapped from CUPTI's by its clock pairs.
#ifndef LIVEPROF_IMPORT_CUPTI_RECORDING_FILE_H_
#define LIVEPROF_IMPORT_CUPTI_RECORDING_FILE_H_

#include <string>

#include "import/chrome_trace.h"
#include "import/progress.h"
#include "stream/name_table.h"

namespace liveprof {

struct CuptiRecording;

// True if `path` holds a recording (its first bytes, inflated if gzip).
bool IsCuptiRecordingFile(const std::string& path);

// Reads the whole recording at `path` (plain or gzip). False with *error
// naming the file and what is wrong where.
bool ReadCuptiRecordingFile(const std::string& path, CuptiRecording* out, std::string* error);

// Imports the recording at `path`: its events (every record the parser
// turns into one) and their definitions go to `sink`, the names to `names`.
// The report counts records by kind (report->phases: "CONCURRENT_KERNEL"...)
// and what was skipped or refused, by reason (report->dropped). A recording
// from another CUPTI major version than this build's is refused: its
// records have other layouts. False with *error on an unreadable,
// truncated or corrupt file; a buffer whose records stop making sense ends
// that buffer's walk, counted, and the rest is read.
bool ImportCuptiRecordingFile(const std::string& path, NameTable* names, const ChromeTraceImporter::Sink& sink,
                              ImportReport* report, std::string* error, const ImportProgressFn& progress = {});

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_CUPTI_RECORDING_FILE_H_
