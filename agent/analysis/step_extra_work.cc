// Mark-based steps holding extra GPU work; see step_extra_work.h.
#include "analysis/step_extra_work.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

namespace gpuos {
namespace {

constexpr size_t kMinSteps = 5;
constexpr double kMaxWorkRatio = 1.5;
constexpr size_t kMinForeignTokens = 16;
constexpr double kForeignShare = 0.05;
constexpr double kMaxExtraShare = 0.25;

}  // namespace

size_t MarkExtraWorkSteps(std::vector<StepWindow>& steps, const std::vector<SequenceToken>& tokens) {
  const size_t n = steps.size();
  if (n < kMinSteps || tokens.empty()) return 0;
  // Which step each token falls in (kNone: between steps or outside).
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> step_of(tokens.size(), kNone);
  std::vector<size_t> count(n, 0);
  size_t s = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint64_t ts = tokens[i].start_ns;
    while (s < n && steps[s].end_ns <= ts) ++s;
    if (s == n) break;
    if (ts < steps[s].start_ns) continue;
    step_of[i] = s;
    ++count[s];
  }
  std::vector<size_t> sorted = count;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.end());
  const size_t median = sorted[n / 2];
  if (median == 0) return 0;

  // Symbols seen in at least half of the steps are the steady step's.
  size_t symbols = 0;
  for (const SequenceToken& t : tokens) symbols = std::max<size_t>(symbols, t.symbol + 1);
  std::vector<uint32_t> steps_with(symbols, 0);
  std::vector<size_t> last_step(symbols, kNone);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (step_of[i] == kNone || last_step[tokens[i].symbol] == step_of[i]) continue;
    last_step[tokens[i].symbol] = step_of[i];
    ++steps_with[tokens[i].symbol];
  }
  std::vector<size_t> foreign(n, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (step_of[i] != kNone && 2 * steps_with[tokens[i].symbol] < n) ++foreign[step_of[i]];
  }
  const size_t foreign_limit =
      std::max<size_t>(kMinForeignTokens, static_cast<size_t>(kForeignShare * static_cast<double>(median)));
  auto extra = [&](size_t k) {
    return count[k] > kMaxWorkRatio * static_cast<double>(median) || foreign[k] >= foreign_limit;
  };
  // An evaluation pass or checkpoint is occasional: when many steps differ,
  // the work varies from step to step (dynamic shapes) and no step can be
  // told apart as extra.
  size_t candidates = 0;
  for (size_t k = 0; k < n; ++k) candidates += extra(k);
  if (candidates > n * kMaxExtraShare) return 0;
  size_t marked = 0;
  for (size_t k = 0; k < n; ++k) {
    StepWindow& w = steps[k];
    if (w.warmup || !w.left_out.empty() || !extra(k)) continue;
    w.warmup = true;
    w.left_out = absl::StrFormat(
        "extra work: %d GPU operations, the median step has %d, %d of them of kinds most steps lack (an "
        "evaluation pass or checkpoint?)",
        count[k], median, foreign[k]);
    ++marked;
  }
  return marked;
}

}  // namespace gpuos
