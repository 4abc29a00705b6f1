// Process and trace-wide kinds: see timeline/kinds/process_kinds.h.
#include "export/timeline/kinds/process_kinds.h"

#include "absl/strings/str_cat.h"

namespace gpuos {
namespace {

uint64_t Length(uint64_t start_ns, uint64_t end_ns) { return end_ns > start_ns ? end_ns - start_ns : 0; }

}  // namespace

absl::Status ExecKind::Map(const v1::Event& event, MapContext& context) {
  const v1::Exec& exec = event.exec();
  const uint32_t pid = event.pid();
  TrackTable& tracks = context.tracks();
  tracks.SetProcessName(pid, exec.comm());
  // exec makes the calling thread the process's main thread.
  tracks.SetThreadName(pid, pid, exec.comm());
  if (pid != context.header().root_pid() || context.header().command_line_size() == 0) {
    tracks.SetProcessCmdline(pid, {exec.filename()});
  }
  return context.Emit<ExecKind>(MapContext::At(event, 0), tracks.Process(pid), context.FixedName(kKind, 0),
                                {context.strings().Intern(exec.filename())});
}

void ExecKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.String("filename", args.Name(p.filename));
}

absl::Status ProcessExitKind::Map(const v1::Event& event, MapContext& context) {
  return context.Emit<ProcessExitKind>(MapContext::At(event, 0), context.tracks().Process(event.pid()),
                                       context.FixedName(kKind, 0), {event.process_exit().wait_status()});
}

void ProcessExitKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  if ((p.wait_status & 0x7f) == 0) {
    args.Int("exit_code", (p.wait_status >> 8) & 0xff);
  } else {
    args.Int("signal", p.wait_status & 0x7f);
  }
}

absl::Status StepKind::Add(const StepSpan& step, MapContext& context) {
  return context.Emit<StepKind>(MapContext::Span(step.start_ns, Length(step.start_ns, step.end_ns), step.pid),
                                context.tracks().Steps(step.pid),
                                context.strings().Intern(absl::StrCat("step ", step.index)),
                                {static_cast<int64_t>(step.index)});
}

void StepKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) { args.Int("index", p.index); }

absl::Status AttachWindowKind::Add(uint64_t start_ns, uint64_t end_ns, MapContext& context) {
  return context.Emit<AttachWindowKind>(MapContext::Span(start_ns, Length(start_ns, end_ns), 0),
                                        context.tracks().AttachWindow(), context.FixedName(kKind, 0), {});
}

void AttachWindowKind::Describe(const Payload&, const TimelineRecord&, ArgList& args) {
  const v1::AttachInfo& attach = args.header().attach();
  std::string& target_pids = args.Scratch();
  for (uint32_t pid : attach.target_pids()) {
    absl::StrAppend(&target_pids, target_pids.empty() ? "" : ",", pid);
  }
  args.String("target_pids", target_pids);
  args.Bool("gpu_procs", attach.gpu_procs());
  if (attach.requested_duration_ns() != 0) args.Uint("requested_duration_ns", attach.requested_duration_ns());
}

absl::Status CaptureWindowKind::Add(uint32_t pid, uint64_t start_ns, uint64_t end_ns, const std::string& reason,
                                    bool cupti_subscribed, MapContext& context) {
  return context.Emit<CaptureWindowKind>(MapContext::Span(start_ns, Length(start_ns, end_ns), pid),
                                         context.tracks().ProcessChild(pid, TrackKind::kCaptureWindows),
                                         context.strings().Intern(absl::StrCat("capture: ", reason)),
                                         {cupti_subscribed});
}

void CaptureWindowKind::Describe(const Payload& p, const TimelineRecord&, ArgList& args) {
  args.Bool("cupti_subscribed", p.cupti_subscribed);
}

}  // namespace gpuos
