// Text and JSON renderings of a run comparison; see report/compare_report.h.
#include "export/report/compare_report.h"

#include <cmath>
#include <functional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "export/report/json_writer.h"
#include "export/report/text_table.h"
#include "export/report/trace_identity.h"

namespace gpuos {
namespace {

// A GPU-idle cause gets a row when some run spends this share of its step in it.
constexpr double kIdleRowMinPct = 0.5;

class TextCompare {
 public:
  TextCompare(const Comparison& c, std::ostream& out) : c_(c), out_(out) {
    for (const RunFacts& r : c.runs) {
      if (r.analyzed()) {
        base_ = &r;
        break;
      }
    }
  }

  void Write() {
    out_ << "gpuos-trace compare: " << c_.runs.size() << " run" << (c_.runs.size() == 1 ? "" : "s")
         << (base_ ? absl::StrCat("; deltas against ", Printable(base_->name)) : std::string()) << "\n\n";
    for (const RunFacts& r : c_.runs) {
      out_ << "  " << Printable(r.name) << ": " << Printable(r.path);
      if (!r.argv.empty()) out_ << "\n      " << RunCommandText(r);
      if (!r.warning.empty()) out_ << "\n      WARNING: " << Printable(r.warning);
      out_ << "\n";
    }
    out_ << "\n";
    Table();
    if (!c_.deltas.empty()) {
      out_ << "\nWhat changed the step (the stage with the largest change per step):\n";
      for (const RunDelta& d : c_.deltas) out_ << "  " << Printable(d.line) << "\n";
    }
    if (c_.knee) {
      const Knee& k = *c_.knee;
      out_ << "\nKnee (threshold " << absl::StrFormat("%.0f%%", k.threshold * 100) << "): ";
      out_ << (k.found ? Printable(k.at) : std::string("none")) << "\n  " << Printable(k.note) << "\n";
      if (k.found) {
        if (k.grew.empty()) out_ << "  nothing measured grew by 10% or more from there to the last run\n";
        for (const Knee::Growth& g : k.grew) {
          out_ << absl::StrFormat("  grew: %s %.2f -> %.2f\n", g.what, g.at_knee, g.at_last);
        }
      }
    }
    out_ << "\nDiagnosis:\n";
    for (const RunFacts& r : c_.runs) {
      out_ << "  " << Printable(r.name) << ": " << Printable(r.failed.empty() ? r.headline : r.failed) << "\n";
    }
  }

 private:
  using Value = std::function<double(const RunFacts&)>;
  enum class Delta { kNone, kPercent, kPoints };

  void Row(std::vector<CompareRow>& t, const std::string& title, const Value& value, int decimals, Delta delta) {
    std::vector<std::string> cells = {title};
    for (const RunFacts& r : c_.runs) {
      if (!r.analyzed()) {
        cells.push_back("-");
        continue;
      }
      const double v = value(r);
      std::string cell = absl::StrFormat("%.*f", decimals, v);
      if (base_ && &r != base_ && delta != Delta::kNone) {
        const double b = value(*base_);
        if (delta == Delta::kPoints) {
          cell += absl::StrFormat(" (%+.1f)", v - b);
        } else if (b != 0) {
          cell += absl::StrFormat(" (%+.0f%%)", 100.0 * (v - b) / std::fabs(b));
        }
      }
      cells.push_back(cell);
    }
    t.push_back({false, std::move(cells)});
  }

  void TextRow(std::vector<CompareRow>& t, const std::string& title,
               const std::function<std::string(const RunFacts&)>& text) {
    std::vector<std::string> cells = {title};
    for (const RunFacts& r : c_.runs) cells.push_back(text(r));
    t.push_back({false, std::move(cells)});
  }

  void Table() {
    std::vector<TextTable::Column> columns = {{"", TextTable::Align::kLeft}};
    for (const RunFacts& r : c_.runs) columns.push_back({Printable(r.name), TextTable::Align::kRight});
    TextTable table(columns);
    for (const CompareRow& row : Rows()) {
      if (row.rule) {
        table.AddRule();
        continue;
      }
      std::vector<std::string> cells;
      for (const std::string& cell : row.cells) cells.push_back(Printable(cell));
      table.AddRow(cells);
    }
    table.Render(out_, "  ");
    out_ << "  " << kWholeTraceNote << "\n";
  }

 public:
  std::vector<CompareRow> Rows() {
    std::vector<CompareRow> t;
    bool any_failed = false;
    for (const RunFacts& r : c_.runs) any_failed |= !r.analyzed();
    if (any_failed) {
      TextRow(t, "status", [](const RunFacts& r) {
        if (!r.failed.empty()) return r.failed;
        return r.analyzed() ? std::string("ok") : std::string("no steps found");
      });
    }
    TextRow(t, "steps (measured/found)",
            [](const RunFacts& r) { return r.failed.empty() ? absl::StrCat(r.measured_steps, "/", r.steps) : "-"; });
    Row(t, "steps/s", [](const RunFacts& r) { return r.steps_per_s; }, 2, Delta::kPercent);
    bool any_samples = false;
    for (const RunFacts& r : c_.runs) any_samples |= r.samples_per_s.has_value();
    if (any_samples) {
      TextRow(t, "samples/s", [](const RunFacts& r) {
        if (!r.analyzed() || !r.samples_per_s) return std::string("-");
        return absl::StrFormat("%.1f (batch %d)", *r.samples_per_s, *r.batch_size);
      });
    }
    Row(t, "step mean ms", [](const RunFacts& r) { return r.step_mean_ns / 1e6; }, 3, Delta::kPercent);
    Row(t, "step p50 ms", [](const RunFacts& r) { return r.step_p50_ns / 1e6; }, 3, Delta::kPercent);
    Row(t, "step p95 ms", [](const RunFacts& r) { return r.step_p95_ns / 1e6; }, 3, Delta::kPercent);
    t.push_back({true, {}});
    for (size_t s = 0; s < kStageCount; ++s) {
      Row(t, absl::StrCat(StageName(static_cast<Stage>(s)), " %"), [s](const RunFacts& r) { return r.stage_pct[s]; },
          1, Delta::kPoints);
    }
    t.push_back({true, {}});
    Row(t, "GPU idle %", [](const RunFacts& r) { return r.gpu_idle_total_pct; }, 1, Delta::kPoints);
    for (size_t c = 0; c < kIdleCauseCount; ++c) {
      bool shown = false;
      for (const RunFacts& r : c_.runs) shown |= r.analyzed() && r.gpu_idle_pct[c] >= kIdleRowMinPct;
      if (!shown) continue;
      Row(t, absl::StrCat("  idle: ", IdleCauseName(static_cast<IdleCause>(c)), " %"),
          [c](const RunFacts& r) { return r.gpu_idle_pct[c]; }, 1, Delta::kPoints);
    }
    t.push_back({true, {}});
    Row(t, "switches/step driving", [](const RunFacts& r) { return r.os.driving.switches; }, 1, Delta::kPercent);
    Row(t, "switches/step workers", [](const RunFacts& r) { return r.os.workers.switches; }, 1, Delta::kPercent);
    Row(t, "switches/step others", [](const RunFacts& r) { return r.os.others.switches; }, 1, Delta::kPercent);
    Row(t, "run-queue ms/step (all)",
        [](const RunFacts& r) {
          return (r.os.driving.runqueue_ns + r.os.workers.runqueue_ns + r.os.others.runqueue_ns) / 1e6;
        },
        3, Delta::kPercent);
    Row(t, "page faults/step driving", [](const RunFacts& r) { return r.os.page_faults; }, 1, Delta::kPercent);
    Row(t, "page faults/step workers*", [](const RunFacts& r) { return r.os.worker_page_faults; }, 1,
        Delta::kPercent);
    Row(t, "mmap calls/step", [](const RunFacts& r) { return r.os.mmap_calls; }, 2, Delta::kPercent);
    Row(t, "mmap ms/step", [](const RunFacts& r) { return r.os.mmap_ns / 1e6; }, 3, Delta::kPercent);
    Row(t, "munmap calls/step", [](const RunFacts& r) { return r.os.munmap_calls; }, 2, Delta::kPercent);
    Row(t, "munmap ms/step", [](const RunFacts& r) { return r.os.munmap_ns / 1e6; }, 3, Delta::kPercent);
    Row(t, "futex waits/step*", [](const RunFacts& r) { return r.os.futex_waits; }, 1, Delta::kPercent);
    Row(t, "futex wait ms/step*", [](const RunFacts& r) { return r.os.futex_wait_ns / 1e6; }, 3,
        Delta::kPercent);
    for (size_t i = 0; i < 3; ++i) {
      TextRow(t, absl::StrCat("syscall #", i + 1, " ms/step*"), [i](const RunFacts& r) {
        if (!r.failed.empty() || i >= r.top_syscalls.size()) return std::string("-");
        return absl::StrFormat("%s %.3f", r.top_syscalls[i].name, r.top_syscalls[i].ns / 1e6);
      });
    }
    t.push_back({true, {}});
    Row(t, "kernels/step", [](const RunFacts& r) { return r.kernels_per_step; }, 1, Delta::kPercent);
    TextRow(t, "launch->start p50 us*", [](const RunFacts& r) {
      if (!r.failed.empty() || r.launch_delay_p50_ns == 0) return std::string("-");
      return absl::StrFormat("%.1f", r.launch_delay_p50_ns / 1e3);
    });
    TextRow(t, "bottleneck", [](const RunFacts& r) { return r.failed.empty() ? r.bottleneck : std::string("-"); });
    return t;
  }

 private:

  const Comparison& c_;
  std::ostream& out_;
  const RunFacts* base_ = nullptr;
};

void Switches(JsonWriter& json, const char* key, const RoleSwitches& s) {
  json.Key(key);
  json.BeginObject();
  json.Field("switches", s.switches);
  json.Field("involuntary", s.involuntary);
  json.Field("runqueue_ns", s.runqueue_ns);
  json.EndObject();
}

// The run's OS costs per step, and a few whole-trace ones.
void OsPerStepJson(JsonWriter& json, const RunFacts& r) {
  json.Key("os_per_step");
  json.BeginObject();
  Switches(json, "driving", r.os.driving);
  Switches(json, "workers", r.os.workers);
  Switches(json, "others", r.os.others);
  json.Field("page_faults", r.os.page_faults);
  json.Field("mmap_calls", r.os.mmap_calls);
  json.Field("mmap_ns", r.os.mmap_ns);
  json.Field("munmap_calls", r.os.munmap_calls);
  json.Field("munmap_ns", r.os.munmap_ns);
  json.Key("whole_trace");
  json.BeginObject();
  json.Field("futex_waits", r.os.futex_waits);
  json.Field("futex_wait_ns", r.os.futex_wait_ns);
  json.Field("worker_page_faults", r.os.worker_page_faults);
  json.Key("top_syscalls");
  json.BeginArray();
  for (const SyscallPerStep& s : r.top_syscalls) {
    json.BeginObject();
    json.Field("name", s.name);
    json.Field("calls", s.calls);
    json.Field("ns", s.ns);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  json.EndObject();
}

void RunJson(JsonWriter& json, const RunFacts& r) {
  json.BeginObject();
  json.Field("name", r.name);
  json.Field("path", r.path);
  json.Field("command", RunCommandText(r));
  json.Key("warning");
  if (r.warning.empty()) json.Null();
  else json.String(r.warning);
  json.Key("failed");
  if (r.failed.empty()) json.Null();
  else json.String(r.failed);
  if (!r.failed.empty()) {
    json.EndObject();
    return;
  }
  json.Field("steps", static_cast<uint64_t>(r.steps));
  json.Field("measured_steps", static_cast<uint64_t>(r.measured_steps));
  json.Field("step_source", r.step_source);
  json.Field("steps_per_s", r.steps_per_s);
  json.Key("batch_size");
  if (r.batch_size) json.Uint(*r.batch_size);
  else json.Null();
  json.Field("batch_size_source", r.batch_size_source);
  json.Key("samples_per_s");
  if (r.samples_per_s) json.Double(*r.samples_per_s);
  else json.Null();
  json.Key("step_ns");
  json.BeginObject();
  json.Field("mean", r.step_mean_ns);
  json.Field("p50", r.step_p50_ns);
  json.Field("p95", r.step_p95_ns);
  json.EndObject();
  json.Key("stages");
  json.BeginObject();
  for (size_t s = 0; s < kStageCount; ++s) json.Field(StageKey(static_cast<Stage>(s)), r.stage_pct[s]);
  json.EndObject();
  json.Key("stage_ns_per_step");
  json.BeginObject();
  for (size_t s = 0; s < kStageCount; ++s) json.Field(StageKey(static_cast<Stage>(s)), r.stage_ns[s]);
  json.EndObject();
  json.Key("gpu_idle");
  json.BeginObject();
  for (size_t c = 0; c < kIdleCauseCount; ++c) json.Field(IdleCauseKey(static_cast<IdleCause>(c)), r.gpu_idle_pct[c]);
  json.EndObject();
  json.Field("gpu_idle_pct", r.gpu_idle_total_pct);
  OsPerStepJson(json, r);
  json.Field("kernels_per_step", r.kernels_per_step);
  json.Key("launch_to_start_ns");
  json.BeginObject();
  json.Field("p50", r.launch_delay_p50_ns);
  json.Field("p95", r.launch_delay_p95_ns);
  json.EndObject();
  json.Key("diagnosis");
  json.BeginObject();
  json.Field("bottleneck", r.bottleneck);
  json.Field("headline", r.headline);
  json.Key("gain_pct");
  if (r.gain_pct) json.Double(*r.gain_pct);
  else json.Null();
  json.EndObject();
  json.EndObject();
}

}  // namespace

std::string RunCommandText(const RunFacts& run) {
  v1::TraceHeader header;
  for (const std::string& arg : run.argv) header.add_command_line(arg);
  return CommandLine(header);
}

void WriteCompareText(const Comparison& comparison, std::ostream& out) { TextCompare(comparison, out).Write(); }

std::vector<CompareRow> CompareTableRows(const Comparison& comparison) {
  std::ostringstream unused;
  return TextCompare(comparison, unused).Rows();
}

void WriteCompareJson(const Comparison& comparison, std::ostream& out) {
  JsonWriter json(out);
  json.BeginObject();
  json.Key("runs");
  json.BeginArray();
  for (const RunFacts& r : comparison.runs) RunJson(json, r);
  json.EndArray();
  json.Key("deltas");
  json.BeginArray();
  for (const RunDelta& d : comparison.deltas) {
    json.BeginObject();
    json.Field("name", d.name);
    json.Field("baseline", d.baseline);
    json.Field("step_mean_ns", d.step_mean_ns);
    json.Field("step_mean_pct", d.step_mean_pct);
    json.Field("steps_per_s_pct", d.steps_per_s_pct);
    json.Key("stage_ns_per_step");
    json.BeginObject();
    for (size_t s = 0; s < kStageCount; ++s) json.Field(StageKey(static_cast<Stage>(s)), d.stage_ns[s]);
    json.EndObject();
    json.Key("explaining_stage");
    if (d.explaining_stage) json.String(StageKey(*d.explaining_stage));
    else json.Null();
    json.Field("explaining_share_pct", d.explaining_share_pct);
    json.Field("line", d.line);
    json.EndObject();
  }
  json.EndArray();
  json.Key("knee");
  if (!comparison.knee) {
    json.Null();
  } else {
    const Knee& k = *comparison.knee;
    json.BeginObject();
    json.Field("found", k.found);
    json.Key("at");
    if (k.found) json.String(k.at);
    else json.Null();
    json.Field("threshold_pct", k.threshold * 100);
    json.Field("next_improvement_pct", k.next_improvement * 100);
    json.Field("note", k.note);
    json.Key("grew");
    json.BeginArray();
    for (const Knee::Growth& g : k.grew) {
      json.BeginObject();
      json.Field("what", g.what);
      json.Field("at_knee", g.at_knee);
      json.Field("at_last", g.at_last);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  }
  json.EndObject();
  out << "\n";
}

}  // namespace gpuos
