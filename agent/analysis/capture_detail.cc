// Capture windows and the steps inside them; see capture_detail.h.
#include "analysis/capture_detail.h"

#include <algorithm>

#include "analysis/step_breakdown.h"
#include "cupti_shim/capture_spec.h"

namespace gpuos {

void CaptureWindowCollector::Add(const v1::Event& event) {
  uint64_t end = event.ts_ns();
  if (event.has_nvtx_range()) end += event.nvtx_range().duration_ns();
  if (event.has_cuda_api()) end += event.cuda_api().duration_ns();
  if (event.has_gpu_kernel()) end += event.gpu_kernel().duration_ns();
  if (event.has_off_cpu()) end += event.off_cpu().duration_ns();
  last_ns_ = std::max(last_ns_, end);
  if (!event.has_capture_window()) return;
  const v1::CaptureWindow& edge = event.capture_window();
  auto it = std::find_if(open_.begin(), open_.end(),
                         [&](const CaptureWindowSpan& w) { return w.pid == event.pid(); });
  if (edge.edge() == v1::CaptureWindow::OPEN) {
    if (it != open_.end()) return;  // already open: a repeated edge
    CaptureWindowSpan window;
    window.pid = event.pid();
    window.first_step = edge.step();
    window.start_ns = event.ts_ns();
    window.reason = edge.reason();
    window.cupti_subscribed = edge.cupti_subscribed();
    open_.push_back(window);
  } else if (edge.edge() == v1::CaptureWindow::CLOSE && it != open_.end()) {
    CaptureWindowSpan window = *it;
    open_.erase(it);
    window.last_step = edge.step();
    window.end_ns = std::max(event.ts_ns(), window.start_ns);
    done_.push_back(window);
  }
}

CaptureInfo CaptureWindowCollector::Finish(const v1::TraceHeader& header, const v1::TraceTrailer* trailer) {
  const uint64_t end_ns =
      trailer != nullptr && trailer->attach_end_ns() != 0 ? trailer->attach_end_ns() : last_ns_;
  CaptureInfo info;
  info.spec = header.capture_spec();
  info.windows = done_;
  for (CaptureWindowSpan window : open_) {
    window.end_ns = std::max(end_ns, window.start_ns);
    window.closed = false;
    info.windows.push_back(window);
  }
  std::sort(info.windows.begin(), info.windows.end(),
            [](const CaptureWindowSpan& a, const CaptureWindowSpan& b) { return a.start_ns < b.start_ns; });
  return info;
}

void MarkCudaDetail(uint32_t pid, std::vector<StepRecord>& steps, CaptureInfo& capture) {
  if (!capture.in_use()) {
    for (StepRecord& s : steps) s.cuda_detail = true;
    return;
  }
  for (StepRecord& s : steps) s.cuda_detail = false;
  for (CaptureWindowSpan& w : capture.windows) {
    if (w.pid != pid) continue;
    StepRecord* first = nullptr;
    StepRecord* last = nullptr;
    for (StepRecord& s : steps) {
      const uint64_t slack = s.duration_ns() / 100;
      const uint64_t inside_start = std::max(s.start_ns, w.start_ns);
      const uint64_t inside_end = std::min(s.end_ns, w.end_ns);
      const uint64_t inside = inside_end > inside_start ? inside_end - inside_start : 0;
      if (s.duration_ns() == 0 || inside + slack < s.duration_ns()) continue;
      s.cuda_detail = true;
      if (first == nullptr) first = &s;
      last = &s;
    }
    if (first == nullptr) continue;
    w.first_step = static_cast<int64_t>(first->index);
    w.last_step = static_cast<int64_t>(last->index);
    if (w.cupti_subscribed && first != last) first->window_start = true;
  }
}

void NoteUncountedSteps(bool marked_steps, bool live_rhythm_steps, CaptureInfo& capture) {
  gpuos_capture::CaptureSpec spec;
  std::string error;
  if (marked_steps || !capture.windows.empty() || !gpuos_capture::ParseCaptureSpec(capture.spec, &spec, &error) ||
      !spec.CountsSteps()) {
    return;
  }
  if (live_rhythm_steps) {
    capture.note = "no window opened: " + capture.spec +
                   " asked for steps that had passed before the shim knew the steps: in a job that marks none "
                   "it counts them from the rhythm of the job's CUDA calls, known from the 17th step on; later "
                   "steps, or every=10s,steps=K, open windows there";
    return;
  }
  capture.note =
      "no window opened: " + capture.spec +
      " counts the steps the job marks (NVTX step ranges, the Python hook's optimizer.step or backward) or, where "
      "it marks none, the steps the shim counts from the rhythm of its CUDA calls (a synchronize or copy once a "
      "step, from the 17th step on); this job marked none (attached, --no-python-hooks, or C++ without NVTX) and "
      "the shim found no such rhythm; every=10s,steps=K or after=60s,for=10s open windows by time there";
}

}  // namespace gpuos
