// ExportTrace: see perfetto/perfetto_export.h.
#include "export/perfetto/perfetto_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analysis/capture_detail.h"
#include "export/chrome_json/chrome_json_writer.h"
#include "export/timeline/event_mapper.h"
#include "export/timeline/flow_table.h"
#include "export/timeline/record_sorter.h"
#include "export/timeline/string_table.h"
#include "export/timeline/timeline_emitter.h"
#include "export/perfetto/perfetto_trace_writer.h"
#include "export/timeline/track_table.h"
#include "stream/trace_reader.h"

namespace gpuos {
namespace {

std::string TempDir(const ExportOptions& options) {
  if (!options.temp_dir.empty()) return options.temp_dir;
  const char* env = getenv("TMPDIR");
  return env != nullptr && env[0] != '\0' ? env : "/tmp";
}

// Removes the partial outputs of a failed export.
class PartialFiles {
 public:
  ~PartialFiles() {
    for (const std::string& path : paths_) unlink(path.c_str());
  }
  void Add(const std::string& path) { paths_.push_back(path); }
  absl::Status Commit(const std::vector<std::pair<std::string, std::string>>& renames) {
    for (const auto& [from, to] : renames) {
      if (rename(from.c_str(), to.c_str()) != 0) {
        return absl::InternalError(absl::StrCat("cannot rename ", from, " to ", to, ": ",
                                                strerror(errno)));
      }
    }
    paths_.clear();
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> paths_;
};

// A merged trace's hosts, named on the process tracks.
void SetMergedHosts(const v1::TraceHeader& header, TrackTable& tracks) {
  std::vector<std::string> hosts;
  // Two traces of one host (or hosts without names) stay told apart.
  absl::flat_hash_map<std::string, int> seen;
  for (const v1::MergedHost& host : header.merged().hosts()) {
    const int n = ++seen[host.hostname()];
    hosts.push_back(n == 1 ? host.hostname() : absl::StrCat(host.hostname(), " #", n));
  }
  tracks.SetHosts(std::move(hosts), header.merged().pid_stride());
}

// Pass 1: every event of the trace, the steps, capture windows and an attach window, mapped
// to records on their tracks and handed to the sorter.  The input's own
// damage goes to summary.input_status; mapping errors are returned.
absl::Status MapEvents(TraceReader& reader, const ExportOptions& options, EventMapper& mapper,
                       ExportSummary& summary) {
  absl::Status map_status;
  uint64_t last_event_ns = 0;
  uint64_t attach_end_ns = 0;
  CaptureWindowCollector capture_windows;
  summary.input_status = ForEachEvent(
      reader,
      [&](const v1::Event& event) {
        last_event_ns = std::max(last_event_ns, event.ts_ns());
        capture_windows.Add(event);
        if (map_status.ok()) map_status = mapper.Add(event);
      },
      [&](const v1::TraceTrailer& trailer) { attach_end_ns = trailer.attach_end_ns(); });
  if (!map_status.ok()) return map_status;
  for (const StepSpan& step : options.steps) {
    absl::Status status = mapper.AddStep(step);
    if (!status.ok()) return status;
  }
  for (const CaptureWindowSpan& window : capture_windows.Finish(reader.header()).windows) {
    absl::Status status =
        mapper.AddCaptureWindow(window.pid, window.start_ns, window.end_ns, window.reason, window.cupti_subscribed);
    if (!status.ok()) return status;
  }
  if (reader.header().has_attach()) {
    // Without a clean end, the window closes at the last event.
    const uint64_t start = reader.header().attach().start_ns();
    absl::Status status = mapper.AddAttachWindow(start, attach_end_ns ? attach_end_ns : std::max(last_event_ns, start));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportSummary> ExportTrace(const std::string& in_path, const std::string& out_path,
                                          const ExportOptions& options) {
  if (options.counter_bucket_ns < 1000) {
    return absl::InvalidArgumentError("the counter bucket must be at least 1us");
  }
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(in_path);
  if (!reader.ok()) return reader.status();
  const v1::TraceHeader& header = (*reader)->header();

  ExportSummary summary;
  TrackTable tracks;
  StringTable strings;
  FlowTable flows;
  RecordSorter sorter(TempDir(options), options.sort_buffer_bytes);
  EventMapper mapper(header, &tracks, &strings, &flows, &sorter);
  if (header.has_merged()) SetMergedHosts(header, tracks);

  // Pass 1.
  absl::Status status = MapEvents(**reader, options, mapper, summary);
  if (!status.ok()) return status;
  summary.events_read = mapper.events();
  flows.Seal();
  tracks.Seal();
  status = sorter.StartMerge();
  if (!status.ok()) return status;

  // Pass 2.
  PartialFiles partial;
  std::vector<std::pair<std::string, std::string>> renames;
  const std::string perfetto_tmp = absl::StrCat(out_path, ".partial");
  absl::StatusOr<std::unique_ptr<PerfettoTraceWriter>> perfetto =
      PerfettoTraceWriter::Create(perfetto_tmp);
  if (!perfetto.ok()) return perfetto.status();
  partial.Add(perfetto_tmp);
  renames.emplace_back(perfetto_tmp, out_path);
  std::vector<TimelineSink*> sinks = {perfetto->get()};
  std::unique_ptr<ChromeJsonWriter> json;
  if (!options.chrome_json_path.empty()) {
    const std::string json_tmp = absl::StrCat(options.chrome_json_path, ".partial");
    absl::StatusOr<std::unique_ptr<ChromeJsonWriter>> created = ChromeJsonWriter::Create(json_tmp);
    if (!created.ok()) return created.status();
    json = std::move(*created);
    partial.Add(json_tmp);
    renames.emplace_back(json_tmp, options.chrome_json_path);
    sinks.push_back(json.get());
  }

  RecordDescriber describer(header, strings);
  TimelineEmitter emitter(&tracks, &flows, &describer, options.counter_bucket_ns, sinks);
  TimelineRecord record;
  while (sorter.Next(&record)) emitter.Add(record);
  if (!sorter.status().ok()) return sorter.status();
  emitter.Finish();
  for (TimelineSink* sink : sinks) {
    status = sink->Finish();
    if (!status.ok()) return status;
  }
  status = partial.Commit(renames);
  if (!status.ok()) return status;

  summary.records_sorted = sorter.records();
  summary.sort_runs_spilled = sorter.runs_spilled();
  summary.sort_bytes_spilled = sorter.bytes_spilled();
  summary.tracks = tracks.size();
  summary.overflow_lanes = emitter.stats().overflow_lanes;
  summary.slices = emitter.stats().slices;
  summary.instants = emitter.stats().instants;
  summary.counter_values = emitter.stats().counter_values;
  summary.flows = flows.flows();
  summary.perfetto_packets = (*perfetto)->packets();
  summary.perfetto_bytes = (*perfetto)->bytes();
  if (json) summary.chrome_json_events = json->events();
  return summary;
}

absl::Status ExportPerfetto(const std::string& in_path, const std::string& out_path,
                            const ExportOptions& options) {
  absl::StatusOr<ExportSummary> summary = ExportTrace(in_path, out_path, options);
  if (!summary.ok()) return summary.status();
  return summary->input_status;
}

}  // namespace gpuos
