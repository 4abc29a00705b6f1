// Parsing --capture specs; see capture_spec.h.
#include "capture_spec.h"

#include <cctype>
#include <string>

namespace gpuos_capture {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A decimal number that fits in 63 bits, nothing else.
bool ParseCount(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *value = v;
  return true;
}

// Splits "key=value" pairs separated by commas into at most two pairs.
struct Pair {
  std::string_view key, value;
};
int SplitPairs(std::string_view text, Pair out[2]) {
  int n = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || n == 2) return -1;
    out[n++] = {Trim(item.substr(0, eq)), Trim(item.substr(eq + 1))};
  }
  return n;
}

bool Fail(std::string_view text, const std::string& why, std::string* error) {
  *error = "--capture " + std::string(text) + ": " + why +
           " (expected steps=A..B, every=N,steps=K, every=10s,steps=K, every=10s,for=200ms, nvtx=NAME, "
           "after=60s,for=10s or on-demand)";
  return false;
}

// every=DURATION with steps=K or for=DURATION, into *out (kPeriodic).
bool ParsePeriodic(std::string_view text, const Pair& every, const Pair* steps, const Pair* for_, CaptureSpec* out,
                   std::string* error) {
  if (!ParseCaptureDuration(every.value, &out->period_ns) || out->period_ns == 0) {
    return Fail(text, "every= needs a whole number of steps or a duration above 0 (200, 10s)", error);
  }
  if (steps != nullptr) {
    if (!ParseCount(steps->value, &out->count) || out->count == 0) {
      return Fail(text, "with every=DURATION, steps= needs a whole number above 0", error);
    }
  } else if (for_ != nullptr) {
    if (!ParseCaptureDuration(for_->value, &out->for_ns) || out->for_ns == 0) {
      return Fail(text, "for=" + std::string(for_->value) + " is not a duration above 0 (200ms)", error);
    }
    if (out->for_ns >= out->period_ns) return Fail(text, "for= is not shorter than every=", error);
  } else {
    return Fail(text, "every=DURATION needs steps=K or for=DURATION", error);
  }
  out->kind = CaptureSpec::kPeriodic;
  return true;
}

}  // namespace

bool CaptureSpec::WantsStep(uint64_t index) const {
  switch (kind) {
    case kSteps:
      return index >= first_step && index <= last_step;
    case kEvery:
      return every > 0 && index % every < count;
    default:
      return false;
  }
}

bool ParseCaptureDuration(std::string_view text, uint64_t* ns) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t value = 0;
  if (!ParseCount(text.substr(0, digits), &value)) return false;
  const std::string_view unit = text.substr(digits);
  uint64_t scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us") scale = 1'000;
  if (unit == "ms") scale = 1'000'000;
  if (unit == "s") scale = 1'000'000'000;
  if (unit == "m") scale = 60'000'000'000;
  if (unit == "h") scale = 3'600'000'000'000;
  if (scale == 0 || value > UINT64_MAX / scale / 4) return false;
  *ns = value * scale;
  return true;
}

bool ParseCaptureSpec(std::string_view raw, CaptureSpec* spec, std::string* error) {
  const std::string_view text = Trim(raw);
  CaptureSpec out;
  out.text = std::string(text);
  if (text.empty()) return Fail(text, "empty spec", error);
  if (text == "on-demand") {
    out.kind = CaptureSpec::kOnDemand;
    *spec = out;
    return true;
  }
  Pair pairs[2];
  const int n = SplitPairs(text, pairs);
  if (n <= 0) return Fail(text, "not a list of key=value", error);
  auto find = [&](std::string_view key) -> const Pair* {
    for (int i = 0; i < n; ++i) {
      if (pairs[i].key == key) return &pairs[i];
    }
    return nullptr;
  };
  const Pair* steps = find("steps");
  const Pair* every = find("every");
  const Pair* nvtx = find("nvtx");
  const Pair* after = find("after");
  const Pair* for_ = find("for");
  const int known = (steps != nullptr) + (every != nullptr) + (nvtx != nullptr) + (after != nullptr) +
                    (for_ != nullptr);
  if (known != n || (n == 2 && pairs[0].key == pairs[1].key)) {
    return Fail(text, "unknown or repeated key", error);
  }
  if (nvtx != nullptr) {
    if (n != 1) return Fail(text, "nvtx=NAME goes alone", error);
    if (nvtx->value.empty()) return Fail(text, "nvtx= needs a range name", error);
    out.kind = CaptureSpec::kNvtx;
    out.nvtx_name = std::string(nvtx->value);
  } else if (every != nullptr && !ParseCount(every->value, &out.every)) {
    if (!ParsePeriodic(text, *every, steps, for_, &out, error)) return false;
  } else if (after != nullptr || for_ != nullptr) {
    if (after == nullptr || for_ == nullptr) return Fail(text, "a time window needs both after= and for=", error);
    if (!ParseCaptureDuration(after->value, &out.after_ns)) {
      return Fail(text, "after=" + std::string(after->value) + " is not a duration (60s, 500ms, 2m)", error);
    }
    if (!ParseCaptureDuration(for_->value, &out.for_ns) || out.for_ns == 0) {
      return Fail(text, "for=" + std::string(for_->value) + " is not a duration above 0 (10s, 500ms)", error);
    }
    out.kind = CaptureSpec::kTime;
  } else if (every != nullptr) {
    if (steps == nullptr) return Fail(text, "every=N needs steps=K (K steps in every N)", error);
    if (!ParseCount(every->value, &out.every) || out.every == 0) {
      return Fail(text, "every= needs a whole number above 0", error);
    }
    if (!ParseCount(steps->value, &out.count) || out.count == 0) {
      return Fail(text, "with every=N, steps= needs a whole number above 0", error);
    }
    if (out.count > out.every) return Fail(text, "steps=K is more than every=N", error);
    out.kind = CaptureSpec::kEvery;
  } else {
    const size_t dots = steps->value.find("..");
    if (dots == std::string_view::npos) return Fail(text, "steps= needs a range A..B", error);
    if (!ParseCount(steps->value.substr(0, dots), &out.first_step) ||
        !ParseCount(steps->value.substr(dots + 2), &out.last_step)) {
      return Fail(text, "steps=A..B needs two whole numbers", error);
    }
    if (out.last_step < out.first_step) return Fail(text, "the last step is before the first", error);
    out.kind = CaptureSpec::kSteps;
  }
  *spec = out;
  return true;
}

}  // namespace gpuos_capture
