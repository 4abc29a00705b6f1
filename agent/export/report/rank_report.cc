// Per-rank table and straggler; see rank_report.h.
#include "export/report/rank_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "export/report/format.h"
#include "export/report/step_columns.h"
#include "export/report/step_report.h"
#include "export/report/text_table.h"

namespace gpuos {
namespace {

uint64_t DataWait(const RankSummary& r) {
  return r.steps.measured_total.stages[static_cast<size_t>(Stage::kDataLoading)];
}

void OptionalInt(JsonWriter& json, std::string_view key, bool has, int64_t value) {
  json.Key(key);
  if (has) {
    json.Int(value);
  } else {
    json.Null();
  }
}

// Every step's communication (warm-up and left-out steps included).
void WriteStepCommJson(const RankSummary& r, JsonWriter& json) {
  json.Key("step_comm");
  json.BeginArray();
  for (size_t i = 0; i < r.steps.steps.size() && i < r.comm.steps.size(); ++i) {
    const StepRecord& s = r.steps.steps[i];
    json.BeginObject();
    json.Field("index", s.index);
    json.Field("start_ns", s.start_ns);
    json.Field("duration_ns", s.duration_ns());
    json.Field("warmup", s.warmup);
    json.Field("left_out", s.left_out);
    json.Field("comm_ns", r.comm.steps[i].comm_ns);
    json.Field("exposed_comm_ns", r.comm.steps[i].exposed_ns);
    json.EndObject();
  }
  json.EndArray();
}

void WriteRankJson(const RankSummary& r, JsonWriter& json) {
  json.BeginObject();
  OptionalInt(json, "rank", r.info.has_rank(), r.info.rank());
  OptionalInt(json, "local_rank", r.info.has_local_rank(), r.info.local_rank());
  OptionalInt(json, "world_size", r.info.has_world_size(), r.info.world_size());
  OptionalInt(json, "local_world_size", r.info.has_local_world_size(), r.info.local_world_size());
  OptionalInt(json, "group_rank", r.info.has_group_rank(), r.info.group_rank());
  json.Field("host", r.info.host());
  json.Field("pid", r.pid);
  OptionalInt(json, "gpu", r.gpu.has_value(), r.gpu.value_or(0));
  json.Key("cuda_visible_devices");
  if (r.info.has_cuda_visible_devices()) {
    json.String(r.info.cuda_visible_devices());
  } else {
    json.Null();
  }
  json.Field("master_addr", r.info.master_addr());
  json.Field("master_port", r.info.master_port());
  json.Key("pids");
  json.BeginArray();
  for (uint32_t p : r.pids) json.Uint(p);
  json.EndArray();
  json.Field("driving_tid", r.steps.tid);
  json.Field("step_source", StepSourceName(r.steps.source));
  AttachCoverageJson(r.steps, json);
  json.Field("steps", static_cast<uint64_t>(r.steps.measured_steps));
  StatsJson("step_ns", r.steps.duration_ns, json);
  // Every measured step, with CUDA detail or not (capture windows): the
  // per-step figures above and below are over the steps with detail.
  json.Field("all_steps", static_cast<uint64_t>(r.steps.all_steps));
  StatsJson("all_step_ns", r.steps.all_steps_duration_ns, json);
  json.Field("comm_ns", r.PerStep(r.comm_ns));
  json.Field("exposed_comm_ns", r.PerStep(r.exposed_comm_ns));
  json.Field("overlapped_comm_ns", r.PerStep(r.comm_ns - r.exposed_comm_ns));
  json.Field("data_wait_ns", r.PerStep(DataWait(r)));
  json.Key("gpu_idle_ns");
  if (r.has_gpu_work) {
    json.Double(r.PerStep(r.steps.measured_total.gpu.idle_ns));
  } else {
    json.Null();
  }
  // The rank's stages per step, and its exposed communication beside them
  // (CPU and GPU: it overlaps them, lying within communication, the idle
  // stages and the rank's waits).
  json.Key("stage_ns");
  json.BeginObject();
  for (size_t i = 0; i < kStageCount; ++i) {
    json.Field(StageKey(static_cast<Stage>(i)), r.PerStep(r.steps.measured_total.stages[i]));
  }
  json.Field("exposed_communication", r.PerStep(r.exposed_comm_ns));
  json.EndObject();
  WriteStepCommJson(r, json);
  json.Key("comm_threads");
  json.BeginArray();
  for (uint32_t t : r.comm.comm_threads) json.Uint(t);
  json.EndArray();
  json.Field("bottleneck", BottleneckKey(r.diagnosis.primary.bottleneck));
  json.Field("headline", r.diagnosis.headline);
  json.EndObject();
}

void WriteStragglerJson(const std::optional<Straggler>& straggler, JsonWriter& json) {
  json.Key("straggler");
  if (!straggler) {
    json.Null();
    return;
  }
  const Straggler& s = *straggler;
  json.BeginObject();
  json.Field("rank", s.rank);
  json.Field("pid", s.pid);
  json.Field("cause", s.cause);
  json.Field("cause_detail", s.cause_detail);
  json.Field("cost_ns_per_step", s.cost_ns_per_step);
  json.Field("excess_ns_per_step", s.excess_ns_per_step);
  json.Field("bottleneck", s.bottleneck);
  json.EndObject();
}

// The per-unit table of ranks or, without them, of the training processes.
void AddUnitTable(const std::vector<RankSummary>& units, bool ranks, bool windows, uint32_t report_pid,
                  UnitTableView& view) {
  // Attached: the share of the attach window each unit's steps hold.
  const bool attached = !units.empty() && units.front().steps.attach_start_ns != 0;
  if (ranks) view.columns = {{"rank"}, {"local"}, {"world"}, {"host", TextTable::Align::kLeft}};
  for (TextTable::Column c : std::vector<TextTable::Column>{
           {"pid"}, {"gpu"}, {"steps"}, {"step ms"}, {"p50"}, {"p95"}, {"data"}, {"comm"}, {"exposed"}, {"GPU idle"},
           {"bottleneck", TextTable::Align::kLeft}}) {
    view.columns.push_back(c);
  }
  if (attached) view.columns.push_back({"window %"});
  for (const RankSummary& r : units) {
    const auto num = [](bool has, int32_t v) { return has ? std::to_string(v) : std::string("-"); };
    const DistributionStats& d = windows ? r.steps.all_steps_duration_ns : r.steps.duration_ns;
    const std::string steps = windows ? absl::StrCat(r.steps.measured_steps, "/", r.steps.all_steps)
                                      : std::to_string(r.steps.measured_steps);
    std::vector<std::string> row;
    if (ranks) {
      row = {num(r.info.has_rank(), r.info.rank()), num(r.info.has_local_rank(), r.info.local_rank()),
             num(r.info.has_world_size(), r.info.world_size()), r.info.host()};
    }
    for (std::string& cell : std::vector<std::string>{
             std::to_string(r.pid) + (r.pid == report_pid ? "*" : ""), r.gpu ? std::to_string(*r.gpu) : "-", steps,
             FormatMs3(d.mean), FormatMs3(d.p50), FormatMs3(d.p95), FormatMs3(r.PerStep(DataWait(r))),
             FormatMs3(r.PerStep(r.comm_ns)), FormatMs3(r.PerStep(r.exposed_comm_ns)),
             r.has_gpu_work ? FormatMs3(r.PerStep(r.steps.measured_total.gpu.idle_ns)) : "-",
             BottleneckKey(r.diagnosis.primary.bottleneck)}) {
      row.push_back(std::move(cell));
    }
    if (attached) {
      const std::optional<AttachCoverage> c = r.steps.Coverage();
      row.push_back(c ? FormatPct1(c->Share()) : "-");
    }
    view.rows.push_back(std::move(row));
  }
}

bool AnyWindows(const std::vector<RankSummary>& units) {
  bool windows = false;
  for (const RankSummary& r : units) windows |= GpuSideOverFewerSteps(r.steps);
  return windows;
}

const char kWindowsLegend[] =
    "; capture windows: steps = with CUDA detail/all, step ms over all steps, the rest over the steps with detail";

// What the table's "window %" column means, where it has one.
const char* AttachLegend(const std::vector<RankSummary>& units) {
  return !units.empty() && units.front().steps.attach_start_ns != 0
             ? "; window %: the share of the attach window its steps hold (the rest is in no figure)"
             : "";
}

// The analysis's note, then a line for each unit without steps.
void AddNoStepsNotes(const RankAnalysis& a, const std::vector<RankSummary>& units, bool ranks, UnitTableView& view) {
  if (!a.note.empty()) view.notes.push_back("note: " + a.note);
  for (const RankSummary& r : units) {
    if (r.steps.measured_steps > 0) continue;
    const std::string who = ranks ? absl::StrFormat("rank %d (pid %u)", r.rank(), r.pid) : absl::StrFormat("pid %u", r.pid);
    view.notes.push_back(absl::StrCat(who, ": no steps: ", r.steps.note));
  }
}

UnitTableView TrainingProcessesView(const RankAnalysis& a, uint32_t report_pid) {
  UnitTableView view;
  const bool windows = AnyWindows(a.training_processes);
  view.heading = "Training processes";
  view.legend = absl::StrCat(a.training_processes.size(),
                             ", each with a training loop of its own; the trace names no ranks; ms per measured "
                             "step, means; * = the process of the step report above, the only one it covers",
                             windows ? kWindowsLegend : "", AttachLegend(a.training_processes));
  AddUnitTable(a.training_processes, /*ranks=*/false, windows, report_pid, view);
  if (a.training_processes_communicate) {
    view.notes.push_back(
        "they ran collectives: ranks of a distributed job started without torchrun's variables "
        "(torch.multiprocessing.spawn), which the trace names only when recorded with the Python hook "
        "(gpuos-trace -- python ...); no straggler is judged");
  } else {
    view.notes.push_back(
        "no collectives between them: independent loops (hogwild workers, trials or models trained side by "
        "side); no straggler is judged");
  }
  AddNoStepsNotes(a, a.training_processes, /*ranks=*/false, view);
  return view;
}

UnitTableView RanksView(const RankAnalysis& a, uint32_t report_pid) {
  UnitTableView view;
  // With capture windows, a window's few steps say little of a rank's
  // step time: that is over every step, the rest over the steps with detail.
  const bool windows = AnyWindows(a.ranks);
  view.heading = "Ranks";
  view.legend = absl::StrCat(a.ranks.size(),
                             "; ms per measured step, means; comm: time in collectives, exposed: not overlapped by "
                             "compute; * = the process of the step report above",
                             windows ? kWindowsLegend : "", AttachLegend(a.ranks));
  AddUnitTable(a.ranks, /*ranks=*/true, windows, report_pid, view);
  if (a.straggler) {
    const Straggler& s = *a.straggler;
    view.notes.push_back(absl::StrFormat("straggler: rank %d (pid %u): the others waited %.3f ms per step for it; "
                                         "cause: %s (%s)",
                                         s.rank, s.pid, s.cost_ns_per_step / 1e6, s.cause, s.cause_detail));
  } else if (!a.straggler_not_judged.empty()) {
    view.notes.push_back("straggler: not judged (" + a.straggler_not_judged + ")");
  } else if (!a.straggler_turns.empty()) {
    view.notes.push_back("straggler: none (" + a.straggler_turns + ")");
  } else {
    view.notes.push_back(absl::StrFormat(
        "straggler: none (the ranks did not wait for one rank in collectives by more than max(%.1f ms, %.0f%% of a "
        "step))",
        kStragglerMinNs / 1e6, kStragglerMinShare * 100));
  }
  AddNoStepsNotes(a, a.ranks, /*ranks=*/true, view);
  return view;
}

}  // namespace

std::optional<UnitTableView> RankTableView(const RankAnalysis& a, uint32_t report_pid) {
  if (!a.ranks.empty()) return RanksView(a, report_pid);
  if (!a.training_processes.empty()) return TrainingProcessesView(a, report_pid);
  return std::nullopt;
}

void WriteRankTextReport(const RankAnalysis& a, std::ostream& out, uint32_t report_pid) {
  const std::optional<UnitTableView> view = RankTableView(a, report_pid);
  if (!view) return;
  out << "\n" << view->heading << " (" << view->legend << ")\n";
  TextTable table(view->columns);
  for (const std::vector<std::string>& row : view->rows) table.AddRow(row);
  table.Render(out, "  ");
  for (const std::string& note : view->notes) out << "  " << note << "\n";
}

void WriteRankJsonMembers(const RankAnalysis& a, JsonWriter& json) {
  json.Key("ranks");
  json.BeginArray();
  for (const RankSummary& r : a.ranks) WriteRankJson(r, json);
  json.EndArray();
  json.Key("training_processes");
  json.BeginArray();
  for (const RankSummary& r : a.training_processes) WriteRankJson(r, json);
  json.EndArray();
  json.Field("training_processes_communicate", a.training_processes_communicate);
  json.Field("ranks_note", a.note);
  WriteStragglerJson(a.straggler, json);
  json.Field("straggler_not_judged", a.straggler_not_judged);
  json.Field("straggler_turns", a.straggler_turns);
}

}  // namespace gpuos
