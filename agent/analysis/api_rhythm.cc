// Choosing the API call that marks steps; see api_rhythm.h for the rule.
#include "analysis/api_rhythm.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/ms_text.h"
#include "absl/strings/string_view.h"
#include "analysis/cuda_api_class.h"
#include "cupti_shim/interval_regularity.h"

namespace gpuos {
namespace {

// Names keep their times until this many calls, whatever their spacing.
constexpr uint64_t kDenseCheckCalls = 4096;

// Among equally frequent, equally regular names: the call that waits for
// the GPU ends a step most reliably; a copy (the batch in, the loss out)
// next.
int ClassRank(const std::string& name) {
  switch (ClassifyCudaApi(name)) {
    case CudaApiClass::kSync: return 0;
    case CudaApiClass::kMemcpy: return 1;
    default: return 2;
  }
}

bool Preferred(const RhythmCandidate& a, const RhythmCandidate& b) {
  if (a.regular() != b.regular()) return a.regular();
  if (a.calls != b.calls) return a.calls > b.calls;
  if (a.regular() && a.cv != b.cv) return a.cv < b.cv;
  const int ra = ClassRank(a.name), rb = ClassRank(b.name);
  if (ra != rb) return ra < rb;
  return a.name < b.name;
}

}  // namespace

RhythmCandidate MeasureRhythm(std::string name, std::vector<uint64_t> ends, const StepOptions& options) {
  RhythmCandidate c;
  c.name = std::move(name);
  c.calls = ends.size();
  std::sort(ends.begin(), ends.end());
  c.times = std::move(ends);
  if (c.calls < 2 || c.calls < options.rhythm_min_calls) {
    c.why_not = absl::StrFormat("%d call%s < %d", c.calls, c.calls == 1 ? "" : "s", options.rhythm_min_calls);
    return c;
  }
  std::vector<uint64_t> intervals(c.calls - 1);
  for (size_t i = 1; i < c.times.size(); ++i) intervals[i - 1] = c.times[i] - c.times[i - 1];
  const gpuos_capture::IntervalRegularity r =
      gpuos_capture::MeasureIntervals(std::move(intervals), options.rhythm_excused_fraction);
  c.intervals = r.intervals;
  c.excused = r.excused;
  c.mean_interval_ns = r.mean_ns;
  c.cv = r.cv;

  if (c.mean_interval_ns < static_cast<double>(options.rhythm_min_interval_ns)) {
    c.verdict = RhythmVerdict::kTooDense;
    c.why_not = absl::StrFormat("mean interval %s < %s", MsText(c.mean_interval_ns),
                                MsText(static_cast<double>(options.rhythm_min_interval_ns)));
  } else if (!(c.cv <= options.rhythm_max_cv)) {
    c.verdict = RhythmVerdict::kIrregular;
    c.why_not = absl::StrFormat("CV %.2f > %.2f", c.cv, options.rhythm_max_cv);
  } else {
    c.verdict = RhythmVerdict::kRegular;
  }
  return c;
}

void ApiRhythm::Add(std::string_view name, uint64_t end_ns) {
  ++calls_;
  name = StripCudaApiSuffixes(name);
  auto it = by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == by_name_.end()) it = by_name_.emplace(std::string(name), Times()).first;
  Times& t = it->second;
  ++t.calls;
  t.min_ns = std::min(t.min_ns, end_ns);
  t.max_ns = std::max(t.max_ns, end_ns);
  if (t.dense) return;
  t.ends.push_back(end_ns);
  // At 4096, 8192, 16384... calls: is this a per-kernel name?
  if (t.calls >= kDenseCheckCalls && (t.calls & (t.calls - 1)) == 0 &&
      (t.max_ns - t.min_ns) / (t.calls - 1) < options_.rhythm_min_interval_ns) {
    t.dense = true;
    std::vector<uint64_t>().swap(t.ends);
  }
}

RhythmChoice ApiRhythm::Choose() const {
  RhythmChoice choice;
  for (const auto& [name, t] : by_name_) {
    if (!t.dense) {
      // Times are copied back for the chosen name only: one name's at a
      // time, not every name's at once.
      choice.candidates.push_back(MeasureRhythm(name, t.ends, options_));
      std::vector<uint64_t>().swap(choice.candidates.back().times);
      continue;
    }
    RhythmCandidate c;
    c.name = name;
    c.calls = t.calls;
    c.intervals = t.calls - 1;
    c.mean_interval_ns = static_cast<double>(t.max_ns - t.min_ns) / static_cast<double>(t.calls - 1);
    c.cv = INFINITY;
    c.verdict = RhythmVerdict::kTooDense;
    c.why_not = absl::StrFormat("thousands of calls less than %s apart",
                                MsText(static_cast<double>(options_.rhythm_min_interval_ns)));
    choice.candidates.push_back(std::move(c));
  }
  std::sort(choice.candidates.begin(), choice.candidates.end(), Preferred);
  if (choice.found()) {
    RhythmCandidate& anchor = choice.candidates.front();
    anchor.times = by_name_.at(anchor.name).ends;
    std::sort(anchor.times.begin(), anchor.times.end());
  }
  return choice;
}

const RhythmCandidate* RhythmChoice::closest_irregular() const {
  const RhythmCandidate* best = nullptr;
  // Names with enough calls and spacing, whose only fault is irregularity.
  for (const RhythmCandidate& c : candidates) {
    if (c.verdict != RhythmVerdict::kIrregular) continue;
    if (best == nullptr || c.cv < best->cv) best = &c;
  }
  if (best != nullptr) return best;
  for (const RhythmCandidate& c : candidates) {
    if (!c.regular() && (best == nullptr || c.calls > best->calls)) best = &c;
  }
  return best;
}

}  // namespace gpuos
