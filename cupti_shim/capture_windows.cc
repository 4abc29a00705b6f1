// Capture window decisions; see capture_windows.h.
#include "capture_windows.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace gpuos_capture {
namespace {

// ASCII only, without the C library's locale tables: these run on every
// NVTX range of a traced job, where a cache miss is what a range costs.
char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (LowerAscii(text[i]) != prefix[i]) return false;
  }
  return true;
}

bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

// ^(train(ing)?[ _-]?)?(step|iter(ation)?|batch|ProfilerStep#?)\s*[#_:=-]?\s*\d*$,
// case-insensitive (kDefaultStepRegex of agent/analysis/step_options.h).
bool IsStepRangeName(std::string_view name) {
  for (std::string_view prefix : {"training", "train"}) {
    if (StartsWithNoCase(name, prefix)) {
      name.remove_prefix(prefix.size());
      if (!name.empty() && (name[0] == ' ' || name[0] == '_' || name[0] == '-')) name.remove_prefix(1);
      break;
    }
  }
  std::string_view rest;
  bool matched = false, profiler = false;
  for (std::string_view word : {"profilerstep", "iteration", "iter", "step", "batch"}) {
    if (StartsWithNoCase(name, word)) {
      rest = name.substr(word.size());
      matched = true;
      profiler = word == "profilerstep";
      break;
    }
  }
  if (!matched) return false;
  size_t i = 0;
  if (profiler && i < rest.size() && rest[i] == '#') ++i;  // ProfilerStep#
  while (i < rest.size() && IsSpace(rest[i])) ++i;
  if (i < rest.size() && std::string_view("#_:=-").find(rest[i]) != std::string_view::npos) ++i;
  while (i < rest.size() && IsSpace(rest[i])) ++i;
  while (i < rest.size() && IsDigit(rest[i])) ++i;
  return i == rest.size();
}

int64_t StepNumber(std::string_view name) {
  while (!name.empty() && IsSpace(name.back())) name.remove_suffix(1);
  size_t digits = 0;
  while (digits < name.size() && IsDigit(name[name.size() - 1 - digits])) ++digits;
  if (digits == 0 || digits > 18) return -1;
  int64_t value = 0;
  for (char c : name.substr(name.size() - digits)) value = value * 10 + (c - '0');
  return value;
}

bool CaptureWindows::StepWanted(uint64_t index) const {
  return spec_.WantsStep(index) || demand_left_ > 0 || periodic_left_ > 0;
}

CaptureEdge CaptureWindows::Change(bool was_open, const std::string& reason) {
  CaptureEdge edge;
  if (was_open == open()) return edge;
  edge.kind = open() ? CaptureEdge::kOpen : CaptureEdge::kClose;
  edge.step = current_;
  edge.reason = reason;
  return edge;
}

CaptureEdge CaptureWindows::StepBegins(int64_t index) {
  const bool was_open = open();
  current_ = index >= 0 ? index : current_ + 1;
  in_step_ = true;
  steps_seen_ = true;
  if (step_window_due_) {
    step_window_due_ = false;
    periodic_left_ = spec_.count;
  }
  const std::string* reason = &spec_.text;  // copied only into an edge
  if (demand_pending_ > 0) {
    demand_left_ = demand_pending_;
    demand_pending_ = 0;
  }
  if (demand_left_ > 0 && !spec_.WantsStep(static_cast<uint64_t>(current_))) reason = &demand_reason_;
  if (StepWanted(static_cast<uint64_t>(current_))) by_steps_ = true;
  return Change(was_open, *reason);
}

CaptureEdge CaptureWindows::StepEnds() {
  const bool was_open = open();
  if (!in_step_) return CaptureEdge{};
  in_step_ = false;
  if (demand_left_ > 0) --demand_left_;
  if (periodic_left_ > 0) --periodic_left_;
  // A request made during a step counts from the next one.
  const bool next_wanted =
      demand_pending_ > 0 || step_window_due_ || StepWanted(static_cast<uint64_t>(current_ + 1));
  if (by_steps_ && !next_wanted) by_steps_ = false;
  return Change(was_open, spec_.text);
}

CaptureEdge CaptureWindows::RangeBegins(std::string_view name) {
  if (spec_.kind != CaptureSpec::kNvtx || name != spec_.nvtx_name) return CaptureEdge{};
  const bool was_open = open();
  ++range_depth_;
  by_range_ = true;
  return Change(was_open, spec_.text);
}

CaptureEdge CaptureWindows::RangeEnds(std::string_view name) {
  if (spec_.kind != CaptureSpec::kNvtx || name != spec_.nvtx_name || range_depth_ == 0) return CaptureEdge{};
  const bool was_open = open();
  if (--range_depth_ == 0) by_range_ = false;
  return Change(was_open, spec_.text);
}

CaptureEdge CaptureWindows::Tick(uint64_t elapsed_ns) {
  if (spec_.kind == CaptureSpec::kPeriodic) return PeriodicTick(elapsed_ns);
  if (spec_.kind != CaptureSpec::kTime || time_done_) return CaptureEdge{};
  const bool was_open = open();
  if (elapsed_ns >= spec_.after_ns + spec_.for_ns) {
    by_time_ = false;
    time_done_ = true;
  } else if (elapsed_ns >= spec_.after_ns) {
    by_time_ = true;
  }
  return Change(was_open, spec_.text);
}

// At each period's start the next step to begin opens a window of K steps.
// A window of time instead: for every=P,for=D; and for every=P,steps=K where
// no step mark came by the second period, or the last period's window never
// opened (the marks stopped).
CaptureEdge CaptureWindows::PeriodicTick(uint64_t elapsed_ns) {
  const bool was_open = open();
  std::string reason = spec_.text;
  if (by_time_ && elapsed_ns >= time_close_ns_) {
    by_time_ = false;
    reason = time_reason_;
  }
  if (first_due_ || elapsed_ns >= next_due_ns_) {
    const bool by_steps = spec_.count > 0 && !step_window_due_ && (steps_seen_ || first_due_);
    if (by_steps) {
      step_window_due_ = true;
    } else {
      step_window_due_ = false;
      by_time_ = true;
      const uint64_t span = spec_.count > 0 ? kUnmarkedWindowNs : spec_.for_ns;
      time_close_ns_ = elapsed_ns + span;
      time_reason_ = spec_.count > 0 ? spec_.text + " (no step marks: " + std::to_string(span / 1'000'000) + " ms)"
                                     : spec_.text;
      reason = time_reason_;
    }
    first_due_ = false;
    next_due_ns_ = elapsed_ns + spec_.period_ns;
  }
  return Change(was_open, reason);
}

uint64_t CaptureWindows::NextTickNs(uint64_t elapsed_ns) const {
  if (spec_.kind == CaptureSpec::kPeriodic) {
    if (first_due_) return elapsed_ns;
    return by_time_ ? std::min(time_close_ns_, next_due_ns_) : next_due_ns_;
  }
  if (spec_.kind != CaptureSpec::kTime || time_done_) return UINT64_MAX;
  return elapsed_ns < spec_.after_ns ? spec_.after_ns : spec_.after_ns + spec_.for_ns;
}

WindowGap CaptureWindows::NextWindowGap(uint64_t elapsed_ns) const {
  WindowGap gap;
  if (demand_pending_ > 0 || demand_left_ > 0) {
    gap.kind = WindowGap::kSteps;  // a request: the next step is wanted
    return gap;
  }
  const uint64_t next = static_cast<uint64_t>(current_ + 1);
  switch (spec_.kind) {
    case CaptureSpec::kSteps:
      if (next > spec_.last_step) {
        gap.kind = WindowGap::kNone;
      } else {
        gap.kind = WindowGap::kSteps;
        gap.steps = next < spec_.first_step ? spec_.first_step - next : 0;
      }
      break;
    case CaptureSpec::kEvery: {
      gap.kind = WindowGap::kSteps;
      const uint64_t phase = spec_.every > 0 ? next % spec_.every : 0;
      gap.steps = phase < spec_.count ? 0 : spec_.every - phase;
      break;
    }
    case CaptureSpec::kOnDemand:
      gap.kind = WindowGap::kNone;
      break;
    case CaptureSpec::kTime:
      gap.kind = time_done_ ? WindowGap::kNone : WindowGap::kUnknown;
      break;
    case CaptureSpec::kNvtx:
      gap.kind = WindowGap::kUnknown;
      break;
    case CaptureSpec::kPeriodic:
      if (step_window_due_ || periodic_left_ > 0 || first_due_) {
        gap.kind = WindowGap::kSteps;  // the next step opens one
      } else {
        gap.kind = WindowGap::kTime;
        gap.ns = next_due_ns_ > elapsed_ns ? next_due_ns_ - elapsed_ns : 0;
      }
      break;
  }
  return gap;
}

bool ParseFinalizeGap(std::string_view text, FinalizeGapPolicy* policy, std::string* error) {
  *policy = FinalizeGapPolicy();
  if (text.empty()) text = kDefaultFinalizeGap;
  policy->text = std::string(text);
  if (text == "off" || text == "0") return true;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!item.empty() && IsSpace(item.front())) item.remove_prefix(1);
    while (!item.empty() && IsSpace(item.back())) item.remove_suffix(1);
    std::string_view digits = item;
    if (digits.size() > 5 && digits.substr(digits.size() - 5) == "steps") digits.remove_suffix(5);
    bool all_digits = !digits.empty() && digits.size() <= 12;
    uint64_t steps = 0;
    for (char c : digits) {
      all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
      if (all_digits) steps = steps * 10 + static_cast<uint64_t>(c - '0');
    }
    uint64_t ns = 0;
    if (all_digits && steps > 0) {
      policy->min_steps = steps;
    } else if (!all_digits && ParseCaptureDuration(item, &ns) && ns > 0) {
      policy->min_ns = ns;
    } else {
      *error = "GPUOS_CAPTURE_FINALIZE_GAP=" + policy->text + ": \"" + std::string(item) +
               "\" is neither a number of steps nor a duration (e.g. 500,10s; or off)";
      *policy = FinalizeGapPolicy();
      return false;
    }
  }
  policy->enabled = true;
  return true;
}

bool GapIsFar(const WindowGap& gap, const FinalizeGapPolicy& policy, uint64_t step_ns) {
  if (!policy.enabled) return false;
  switch (gap.kind) {
    case WindowGap::kNone:
      return true;
    case WindowGap::kUnknown:
      return false;
    case WindowGap::kSteps:
      break;
    case WindowGap::kTime:
      if (policy.min_ns > 0) return gap.ns >= policy.min_ns;
      return policy.min_steps > 0 && step_ns > 0 && gap.ns / step_ns >= policy.min_steps;
  }
  if (gap.steps == 0) return false;
  if (policy.min_steps > 0 && gap.steps >= policy.min_steps) return true;
  return policy.min_ns > 0 && step_ns > 0 && gap.steps >= (policy.min_ns + step_ns - 1) / step_ns;
}

void CaptureWindows::RequestSteps(uint64_t n) {
  demand_pending_ = n;
  demand_reason_ = "ctl capture " + std::to_string(n);
}

}  // namespace gpuos_capture
