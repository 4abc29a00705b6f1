// gpuos-trace's command line; see options.h.
#include "cli/options.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bpf/syscalls.h"
#include "cupti_shim/capture_spec.h"

namespace gpuos {

namespace {

// A slot is about 13 KiB of kernel memory (bpf/syscalls.h).
constexpr uint32_t kMaxSyscallSlots = GPUOS_MAX_SYSCALL_SLOTS;

absl::Status Usage(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

bool IsFlag(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

// Splits "--name=value"; returns false when there is no '='.
bool SplitInline(const std::string& arg, std::string* name, std::string* value) {
  size_t eq = arg.find('=');
  if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
  *name = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return true;
}

// Reads a flag's value from "--flag=value" or the next argument.
absl::StatusOr<std::string> TakeValue(const std::vector<std::string>& args, size_t* i,
                                      const std::string& name, const std::string* inline_value) {
  if (inline_value) return *inline_value;
  if (*i + 1 >= args.size()) return Usage(absl::StrFormat("option %s needs a value", name));
  return args[++*i];
}

// One record option as read from the command line: its name, and where its
// value comes from ("--name=value" or the next argument).
struct RecordFlag {
  const std::vector<std::string>& args;
  size_t* i;
  std::string name;
  const std::string* inline_value;  // null: no "=value"

  absl::StatusOr<std::string> Value() const { return TakeValue(args, i, name, inline_value); }
};

// The record options come in groups; each group's parser returns true when
// `flag` is one of its options (set in `rec`), false when it is not, or the
// option's one-line error.

// "256M" or "10m" (ten minutes; "10M" is ten MiB).
absl::Status ParseFlightRecorderBound(const std::string& v, RecordOptions& rec) {
  const bool minutes = !v.empty() && v.back() == 'm';
  auto bytes = minutes ? absl::StatusOr<uint64_t>(Usage("")) : ParseByteSize(v);
  if (bytes.ok()) {
    if (*bytes < 65536) return Usage(absl::StrFormat("--flight-recorder %s: must be at least 64K", v));
    rec.flight_bytes = *bytes;
  } else if (auto ns = ParseDuration(v); ns.ok()) {
    if (*ns < 1'000'000'000) return Usage(absl::StrFormat("--flight-recorder %s: must be at least 1s", v));
    rec.flight_span_ns = *ns;
  } else {
    return Usage(absl::StrFormat("--flight-recorder %s: expected a size (256M, 2G) or a duration (30s, 10m)", v));
  }
  return absl::OkStatus();
}

// Where the events go and how much of them is kept.
absl::StatusOr<bool> ParseOutputFlag(const RecordFlag& flag, RecordOptions& rec) {
  const std::string& name = flag.name;
  if (name != "-o" && name != "--output" && name != "--buffer-size" && name != "--max-size" &&
      name != "--flight-recorder" && name != "--flight-trigger") {
    return false;
  }
  auto v = flag.Value();
  if (!v.ok()) return v.status();
  if (name == "-o" || name == "--output") {
    if (v->empty()) return Usage("option --output needs a file name");
    rec.output_path = *v;
  } else if (name == "--buffer-size") {
    auto bytes = ParseByteSize(*v);
    if (!bytes.ok()) return bytes.status();
    if (*bytes < 4096 || (*bytes & (*bytes - 1)) != 0 || *bytes > (1ull << 31)) {
      return Usage(absl::StrFormat("--buffer-size %s: must be a power of two between 4K and 2G", *v));
    }
    rec.ring_buffer_bytes = *bytes;
  } else if (name == "--max-size") {
    auto bytes = ParseByteSize(*v);
    if (!bytes.ok()) return bytes.status();
    if (*bytes < 65536) return Usage(absl::StrFormat("--max-size %s: must be at least 64K", *v));
    rec.max_file_bytes = *bytes;
  } else if (name == "--flight-recorder") {
    if (absl::Status s = ParseFlightRecorderBound(*v, rec); !s.ok()) return s;
  } else {  // --flight-trigger
    auto factor = ParseSlowStepTrigger(*v);
    if (!factor.ok()) return factor.status();
    rec.flight_slow_step_factor = *factor;
  }
  return true;
}

// How the kernel side records.
absl::StatusOr<bool> ParseKernelFlag(const RecordFlag& flag, RecordOptions& rec) {
  const std::string& name = flag.name;
  if (name != "--fault-window" && name != "--syscall-slots" && name != "--btf") return false;
  auto v = flag.Value();
  if (!v.ok()) return v.status();
  if (name == "--fault-window") {
    auto ns = ParseDuration(*v);
    if (!ns.ok()) return ns.status();
    if (*ns == 0) return Usage("--fault-window must be longer than 0");
    rec.fault_window_ns = *ns;
  } else if (name == "--syscall-slots") {
    uint32_t slots = 0;
    if (!absl::SimpleAtoi(*v, &slots) || slots > kMaxSyscallSlots) {
      return Usage(absl::StrFormat("--syscall-slots %s: expected a number from 0 to %d", *v, kMaxSyscallSlots));
    }
    rec.syscall_slots = slots;
  } else {  // --btf
    rec.btf_path = *v;
  }
  return true;
}

// --capture SPEC or --always-on (its preset), once.
absl::Status ParseCaptureFlag(const RecordFlag& flag, RecordOptions& rec) {
  std::string text = gpuos_capture::kAlwaysOnSpec;
  if (flag.name == "--capture") {
    auto v = flag.Value();
    if (!v.ok()) return v.status();
    text = *v;
  } else if (flag.inline_value != nullptr) {
    return Usage("--always-on takes no value");
  }
  if (!rec.capture_spec.empty()) return Usage("give one of --capture and --always-on, once");
  gpuos_capture::CaptureSpec spec;
  std::string error;
  if (!gpuos_capture::ParseCaptureSpec(text, &spec, &error)) return Usage(error);
  rec.capture_spec = spec.text;
  return absl::OkStatus();
}

// The CUDA side: the shim, what it records and when.
absl::StatusOr<bool> ParseCudaFlag(const RecordFlag& flag, RecordOptions& rec) {
  const std::string& name = flag.name;
  if (name == "--no-cuda") {
    rec.cuda = false;
  } else if (name == "--no-python-hooks") {
    rec.python_hooks = false;
  } else if (name == "--cuda-records") {
    auto v = flag.Value();
    if (!v.ok()) return v.status();
    auto kinds = ParseCudaRecordKinds(*v);
    if (!kinds.ok()) return kinds.status();
    rec.cuda_records = *kinds;
  } else if (name == "--capture" || name == "--always-on") {
    if (absl::Status s = ParseCaptureFlag(flag, rec); !s.ok()) return s;
  } else if (name == "--shim") {
    auto v = flag.Value();
    if (!v.ok()) return v.status();
    rec.shim_path = *v;
  } else {
    return false;
  }
  return true;
}

// Which job: a command run as whom, a prepared one, or running processes.
absl::StatusOr<bool> ParseJobFlag(const RecordFlag& flag, RecordOptions& rec) {
  const std::string& name = flag.name;
  if (name == "--run-as-root") {
    rec.run_as_root = true;
  } else if (name == "--pid") {
    auto v = flag.Value();
    if (!v.ok()) return v.status();
    int pid = 0;
    if (!absl::SimpleAtoi(*v, &pid) || pid <= 0) return Usage(absl::StrFormat("--pid %s: expected a process id", *v));
    if (std::find(rec.attach_pids.begin(), rec.attach_pids.end(), pid) == rec.attach_pids.end()) {
      rec.attach_pids.push_back(pid);
    }
  } else if (name == "--gpu-procs") {
    rec.gpu_procs = true;
  } else if (name == "--duration") {
    auto v = flag.Value();
    if (!v.ok()) return v.status();
    auto ns = ParseDuration(*v);
    if (!ns.ok()) return ns.status();
    if (*ns == 0) return Usage("--duration must be longer than 0");
    rec.duration_ns = *ns;
  } else if (name == "--no-inject") {
    rec.inject = false;
  } else if (name == "--prepare") {
    rec.prepare = true;
  } else {
    return false;
  }
  return true;
}

// Options that do not go together, and a launch without a command.
absl::Status CheckRecordCombination(const RecordOptions& rec) {
  if (rec.attaching()) {
    if (!rec.command.empty()) return Usage("give either --pid/--gpu-procs or a command to launch, not both");
    if (rec.prepare) return Usage("--prepare starts a command; it does not go with --pid/--gpu-procs");
    if (!rec.cuda_records.empty()) {
      // The shim reads its choice from its environment, set at the start.
      return Usage("--cuda-records goes with a launched command or --prepare, not with --pid/--gpu-procs");
    }
  } else {
    if (rec.duration_ns) return Usage("--duration goes with --pid or --gpu-procs (attach mode)");
    if (!rec.cuda && !rec.cuda_records.empty()) {
      return Usage("--cuda-records chooses CUDA records; it does not go with --no-cuda");
    }
    if (!rec.inject) return Usage("--no-inject goes with --pid or --gpu-procs (attach mode)");
    if (rec.command.empty()) {
      return Usage(rec.prepare ? "--prepare needs a command (gpuos-trace --prepare -- COMMAND [ARGS...])"
                               : "no command to trace (usage: gpuos-trace [options] -- COMMAND [ARGS...])");
    }
  }
  if (!rec.cuda && !rec.capture_spec.empty()) {
    return Usage("--capture/--always-on choose when CUDA detail is recorded; they do not go with --no-cuda");
  }
  if (rec.flight_slow_step_factor > 0 && !rec.flight_recorder()) {
    return Usage("--flight-trigger goes with --flight-recorder");
  }
  if (rec.flight_recorder() && rec.max_file_bytes != 0) {
    return Usage("--max-size and --flight-recorder do not go together: the flight recorder's SIZE bounds it");
  }
  if (rec.flight_recorder() && rec.prepare) return Usage("--flight-recorder records; it does not go with --prepare");
  return absl::OkStatus();
}

// One option of the record command; false when it is none of them.
absl::StatusOr<bool> ParseRecordFlag(const RecordFlag& flag, RecordOptions& rec) {
  if (flag.name == "-q" || flag.name == "--quiet") {
    rec.quiet = true;
    return true;
  }
  if (flag.name == "-v" || flag.name == "--verbose") {
    rec.verbose = true;
    return true;
  }
  for (auto* group : {&ParseOutputFlag, &ParseKernelFlag, &ParseCudaFlag, &ParseJobFlag}) {
    auto taken = group(flag, rec);
    if (!taken.ok() || *taken) return taken;
  }
  return false;
}

absl::StatusOr<ParsedCommandLine> ParseRecord(const std::vector<std::string>& args, size_t i,
                                              const std::string& now_suffix) {
  ParsedCommandLine parsed;
  parsed.kind = ParsedCommandLine::Kind::kRecord;
  RecordOptions& rec = parsed.record;
  rec.tracer_argv = args;
  for (; i < args.size(); ++i) {
    const std::string arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!IsFlag(arg)) break;  // the command starts here
    std::string name = arg, inline_value;
    const bool has_inline = SplitInline(arg, &name, &inline_value);
    if (name == "-h" || name == "--help" || name == "--version") {
      parsed.kind = name == "--version" ? ParsedCommandLine::Kind::kVersion : ParsedCommandLine::Kind::kHelp;
      return parsed;
    }
    auto taken = ParseRecordFlag(RecordFlag{args, &i, name, has_inline ? &inline_value : nullptr}, rec);
    if (!taken.ok()) return taken.status();
    if (!*taken) return Usage(absl::StrFormat("unknown option %s (see gpuos-trace --help)", arg));
  }
  rec.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  if (absl::Status s = CheckRecordCombination(rec); !s.ok()) return s;
  if (rec.output_path.empty()) rec.output_path = "gpuos-trace-" + now_suffix + ".gpuos";
  return parsed;
}

absl::StatusOr<ParsedCommandLine> ParseReport(const std::vector<std::string>& args, size_t i) {
  ParsedCommandLine parsed;
  parsed.kind = ParsedCommandLine::Kind::kReport;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg, inline_value;
    bool has_inline = SplitInline(arg, &name, &inline_value);
    if (name == "--format") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      if (*v == "text") {
        parsed.report.format = ReportFormat::kText;
      } else if (*v == "json") {
        parsed.report.format = ReportFormat::kJson;
      } else {
        return Usage(absl::StrFormat("--format %s: expected text or json", *v));
      }
    } else if (name == "--step-regex" || name == "--data-range-regex") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      (name == "--step-regex" ? parsed.report.steps.step_regex : parsed.report.steps.data_range_regex) = *v;
    } else if (name == "--warmup-steps") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      if (!absl::SimpleAtoi(*v, &parsed.report.steps.warmup_steps)) {
        return Usage(absl::StrFormat("--warmup-steps %s: expected a whole number", *v));
      }
    } else if (name == "--html") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      if (v->empty()) return Usage("--html needs a file name");
      parsed.report.html_path = *v;
    } else if (name == "-h" || name == "--help") {
      parsed.kind = ParsedCommandLine::Kind::kHelp;
      return parsed;
    } else if (IsFlag(arg)) {
      return Usage(absl::StrFormat("unknown report option %s", arg));
    } else if (parsed.report.path.empty()) {
      parsed.report.path = arg;
    } else {
      return Usage(absl::StrFormat("report takes one trace file, got a second: %s", arg));
    }
  }
  if (parsed.report.path.empty()) return Usage("report needs a trace file (gpuos-trace report FILE)");
  return parsed;
}

absl::StatusOr<ParsedCommandLine> ParseExport(const std::vector<std::string>& args, size_t i) {
  ParsedCommandLine parsed;
  parsed.kind = ParsedCommandLine::Kind::kExport;
  ExportCommand& ex = parsed.export_;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg, inline_value;
    bool has_inline = SplitInline(arg, &name, &inline_value);
    const std::string* iv = has_inline ? &inline_value : nullptr;
    if (name == "-o" || name == "--output") {
      auto v = TakeValue(args, &i, name, iv);
      if (!v.ok()) return v.status();
      ex.output = *v;
    } else if (name == "--format") {
      auto v = TakeValue(args, &i, name, iv);
      if (!v.ok()) return v.status();
      if (*v == "json") {
        ex.chrome_json = true;
      } else if (*v != "perfetto") {
        return Usage(absl::StrFormat("--format %s: expected perfetto or json", *v));
      }
    } else if (name == "--step-regex") {
      auto v = TakeValue(args, &i, name, iv);
      if (!v.ok()) return v.status();
      ex.steps.step_regex = *v;
    } else if (name == "-h" || name == "--help") {
      parsed.kind = ParsedCommandLine::Kind::kHelp;
      return parsed;
    } else if (IsFlag(arg)) {
      return Usage(absl::StrFormat("unknown export option %s", arg));
    } else if (ex.path.empty()) {
      ex.path = arg;
    } else {
      return Usage(absl::StrFormat("export takes one trace file, got a second: %s", arg));
    }
  }
  if (ex.path.empty()) return Usage("export needs a trace file (gpuos-trace export FILE -o OUT.pftrace)");
  if (ex.output.empty()) {
    std::string base = ex.path;
    if (base.size() > 6 && base.compare(base.size() - 6, 6, ".gpuos") == 0) base.resize(base.size() - 6);
    ex.output = base + ".pftrace";
  }
  return parsed;
}

absl::StatusOr<ParsedCommandLine> ParseCtl(const std::vector<std::string>& args, size_t i) {
  ParsedCommandLine parsed;
  parsed.kind = ParsedCommandLine::Kind::kCtl;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg, inline_value;
    bool has_inline = SplitInline(arg, &name, &inline_value);
    if (name == "--pid") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      if (!absl::SimpleAtoi(*v, &parsed.ctl.pid) || parsed.ctl.pid <= 0) {
        return Usage(absl::StrFormat("--pid %s: expected a process id", *v));
      }
    } else if (name == "-h" || name == "--help") {
      parsed.kind = ParsedCommandLine::Kind::kHelp;
      return parsed;
    } else if (IsFlag(arg)) {
      return Usage(absl::StrFormat("unknown ctl option %s", arg));
    } else if (parsed.ctl.action.empty()) {
      parsed.ctl.action = arg;
    } else if (parsed.ctl.action == "capture" && parsed.ctl.capture_steps == 0) {
      if (!absl::SimpleAtoi(arg, &parsed.ctl.capture_steps) || parsed.ctl.capture_steps == 0 ||
          parsed.ctl.capture_steps > 1'000'000'000) {
        return Usage(absl::StrFormat("ctl capture %s: expected a number of steps above 0", arg));
      }
    } else {
      return Usage(absl::StrFormat("ctl takes one action, got a second: %s", arg));
    }
  }
  if (parsed.ctl.pid == 0) return Usage("ctl needs --pid PID (gpuos-trace ctl --pid PID dump)");
  if (parsed.ctl.action == "capture") {
    if (parsed.ctl.capture_steps == 0) {
      return Usage("ctl capture needs a number of steps above 0 (gpuos-trace ctl --pid PID capture 20)");
    }
  } else if (parsed.ctl.capture_steps != 0 || parsed.ctl.action != "dump") {
    return Usage(parsed.ctl.action.empty() ? std::string("ctl needs an action: dump or capture N")
                                           : absl::StrFormat("unknown ctl action %s (expected dump or capture N)",
                                                             parsed.ctl.action));
  }
  return parsed;
}

absl::StatusOr<ParsedCommandLine> ParseMerge(const std::vector<std::string>& args, size_t i) {
  ParsedCommandLine parsed;
  parsed.kind = ParsedCommandLine::Kind::kMerge;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg, inline_value;
    bool has_inline = SplitInline(arg, &name, &inline_value);
    if (name == "-o" || name == "--output") {
      auto v = TakeValue(args, &i, name, has_inline ? &inline_value : nullptr);
      if (!v.ok()) return v.status();
      if (v->empty()) return Usage("merge: -o needs a file name");
      parsed.merge.output = *v;
    } else if (name == "-h" || name == "--help") {
      parsed.kind = ParsedCommandLine::Kind::kHelp;
      return parsed;
    } else if (IsFlag(arg)) {
      return Usage(absl::StrFormat("unknown merge option %s", arg));
    } else {
      parsed.merge.inputs.push_back(arg);
    }
  }
  if (parsed.merge.output.empty()) return Usage("merge needs -o JOB.gpuos (gpuos-trace merge A.gpuos B.gpuos -o JOB.gpuos)");
  if (parsed.merge.inputs.size() < 2) {
    return Usage(absl::StrFormat("merge needs at least two traces to join (got %d)", parsed.merge.inputs.size()));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<double> ParseSlowStepTrigger(const std::string& text) {
  constexpr char kPrefix[] = "slow-step=";
  std::string value = text;
  if (value.rfind(kPrefix, 0) != 0) {
    return Usage(absl::StrFormat("--flight-trigger %s: expected slow-step=Nx (e.g. slow-step=3x)", text));
  }
  value = value.substr(sizeof(kPrefix) - 1);
  if (!value.empty() && (value.back() == 'x' || value.back() == 'X')) value.pop_back();
  double factor = 0;
  if (!absl::SimpleAtod(value, &factor) || !(factor > 1.0) || factor > 1e6) {
    return Usage(absl::StrFormat("--flight-trigger %s: the factor must be a number above 1 (e.g. slow-step=3x)", text));
  }
  return factor;
}

absl::StatusOr<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                                   const std::string& now_suffix) {
  // args[0] is the program name.
  if (args.size() < 2) return Usage("nothing to do (see gpuos-trace --help)");
  const std::string& first = args[1];
  if (first == "report") return ParseReport(args, 2);
  if (first == "export") return ParseExport(args, 2);
  if (first == "dump") {
    // Same single-file argument rules as report, no options.
    auto parsed = ParseReport(args, 2);
    if (parsed.ok() && parsed->kind == ParsedCommandLine::Kind::kReport) {
      if (parsed->report.format != ReportFormat::kText) return Usage("dump takes no --format");
      if (!parsed->report.html_path.empty()) return Usage("dump takes no --html");
      parsed->kind = ParsedCommandLine::Kind::kDump;
    }
    return parsed;
  }
  if (first == "ctl") return ParseCtl(args, 2);
  if (first == "compare" || first == "sweep") {
    ParsedCommandLine parsed;
    if (first == "compare") {
      auto compare = ParseCompare(args, 2);
      if (!compare.ok()) return compare.status();
      parsed.kind = ParsedCommandLine::Kind::kCompare;
      parsed.compare = *std::move(compare);
    } else {
      auto sweep = ParseSweep(args, 2, now_suffix);
      if (!sweep.ok()) return sweep.status();
      parsed.kind = ParsedCommandLine::Kind::kSweep;
      parsed.sweep = *std::move(sweep);
    }
    return parsed;
  }
  if (first == "merge") return ParseMerge(args, 2);
  if (first == "record") return ParseRecord(args, 2, now_suffix);
  return ParseRecord(args, 1, now_suffix);
}

absl::StatusOr<std::string> ParseCudaRecordKinds(const std::string& text) {
  static const std::vector<std::string> kKnown = {"kernel", "memcpy", "memset", "sync", "runtime", "driver"};
  std::vector<std::string> kinds = absl::StrSplit(text, ',');
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (std::find(kKnown.begin(), kKnown.end(), kinds[k]) == kKnown.end()) {
      return Usage(absl::StrFormat(
          "--cuda-records %s: unknown kind '%s' (expected a comma list of kernel, memcpy, memset, "
          "sync, runtime, driver)", text, kinds[k]));
    }
    if (std::find(kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(k), kinds[k]) !=
        kinds.begin() + static_cast<std::ptrdiff_t>(k)) {
      return Usage(absl::StrFormat("--cuda-records %s: '%s' is listed twice", text, kinds[k]));
    }
  }
  if (std::find(kinds.begin(), kinds.end(), "kernel") == kinds.end() &&
      std::find(kinds.begin(), kinds.end(), "memcpy") == kinds.end()) {
    return Usage(absl::StrFormat(
        "--cuda-records %s: needs kernel or memcpy (without either nothing is recorded; "
        "use --no-cuda to record no CUDA at all)", text));
  }
  return text;
}

absl::StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  std::string digits = text;
  uint64_t scale = 1;
  if (!digits.empty()) {
    char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    if (unit == 'K' || unit == 'M' || unit == 'G') {
      scale = unit == 'K' ? 1ull << 10 : unit == 'M' ? 1ull << 20 : 1ull << 30;
      digits.pop_back();
    }
  }
  uint64_t value = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &value) || value > (1ull << 40) / scale) {
    return Usage(absl::StrFormat("'%s' is not a size (examples: 4096, 64K, 256M, 1G)", text));
  }
  return value * scale;
}

absl::StatusOr<uint64_t> ParseDuration(const std::string& text) {
  struct Unit {
    const char* suffix;
    uint64_t ns;
  };
  // Longest suffixes first, so "ms" is not read as "s".
  static const Unit kUnits[] = {{"ns", 1},           {"us", 1'000},          {"ms", 1'000'000},
                                {"s", 1'000'000'000}, {"m", 60'000'000'000ull}, {"h", 3'600'000'000'000ull}};
  for (const Unit& unit : kUnits) {
    std::string suffix = unit.suffix;
    if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string number = text.substr(0, text.size() - suffix.size());
      double value = 0;
      if (absl::SimpleAtod(number, &value) && value >= 0 && value < 1e7 &&
          number.find_first_not_of("0123456789.") == std::string::npos) {
        return static_cast<uint64_t>(value * static_cast<double>(unit.ns) + 0.5);
      }
      break;
    }
  }
  return Usage(absl::StrFormat("'%s' is not a duration (examples: 500us, 1ms, 30s, 2m)", text));
}

}  // namespace gpuos
