// Parsing of `gpuos-trace compare` and `gpuos-trace sweep`; see
// scenario_options.h.
#include "cli/scenario_options.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/options.h"

namespace gpuos {
namespace {

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

// "--name=value" or "--name" + the next argument.
absl::StatusOr<std::string> Value(const std::vector<std::string>& args, size_t* i, std::string* name) {
  const std::string& arg = args[*i];
  if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
    *name = arg.substr(0, eq);
    return arg.substr(eq + 1);
  }
  *name = arg;
  if (*i + 1 >= args.size()) return Usage(absl::StrFormat("option %s needs a value", arg));
  return args[++*i];
}

std::string FlagName(const std::string& arg) {
  size_t eq = arg.find('=');
  return arg.rfind("--", 0) == 0 && eq != std::string::npos ? arg.substr(0, eq) : arg;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// The options compare and sweep share; true when `args[*i]` was one.
absl::StatusOr<bool> SharedOption(const std::vector<std::string>& args, size_t* i, bool* json, std::string* html,
                                  std::optional<double>* knee, StepOptions* steps) {
  const std::string flag = FlagName(args[*i]);
  if (flag != "--format" && flag != "--html" && flag != "--knee-threshold" && flag != "--warmup-steps" &&
      flag != "--step-regex") {
    return false;
  }
  std::string name;
  auto v = Value(args, i, &name);
  if (!v.ok()) return v.status();
  if (name == "--format") {
    if (*v != "text" && *v != "json") return Usage(absl::StrFormat("--format %s: expected text or json", *v));
    *json = *v == "json";
  } else if (name == "--html") {
    if (v->empty()) return Usage("--html needs a file name");
    *html = *v;
  } else if (name == "--knee-threshold") {
    auto t = ParseKneeThreshold(*v);
    if (!t.ok()) return t.status();
    *knee = *t;
  } else if (name == "--warmup-steps") {
    if (!absl::SimpleAtoi(*v, &steps->warmup_steps)) {
      return Usage(absl::StrFormat("--warmup-steps %s: expected a whole number", *v));
    }
  } else {
    steps->step_regex = *v;
  }
  return true;
}

absl::StatusOr<std::vector<uint64_t>> ParseBatchSizes(const std::string& text) {
  std::vector<uint64_t> sizes;
  for (const std::string& part : std::vector<std::string>(absl::StrSplit(text, ','))) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n == 0) {
      return Usage(absl::StrFormat("--batch-size %s: expected a positive whole number (or a comma list)", text));
    }
    sizes.push_back(n);
  }
  return sizes;
}

std::string DefaultRunName(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (base.size() > 6 && base.compare(base.size() - 6, 6, ".gpuos") == 0) base.resize(base.size() - 6);
  return base;
}

// Replaces every {NAME} of `values` in `arg`; records the names used.
absl::StatusOr<std::string> Substitute(const std::string& arg, const std::vector<SweepSetting>& settings,
                                       const std::vector<size_t>& choice, std::set<std::string>* used) {
  std::string out;
  for (size_t i = 0; i < arg.size();) {
    if (arg[i] == '{' && i + 1 < arg.size() && IsNameStart(arg[i + 1])) {
      size_t end = i + 1;
      while (end < arg.size() && IsNameChar(arg[end])) ++end;
      if (end < arg.size() && arg[end] == '}') {
        const std::string name = arg.substr(i + 1, end - i - 1);
        auto it = std::find_if(settings.begin(), settings.end(), [&](const SweepSetting& s) { return s.name == name; });
        if (it == settings.end()) {
          std::vector<std::string> known;
          for (const SweepSetting& s : settings) known.push_back(s.name);
          return Usage(absl::StrFormat("sweep: {%s} in '%s' is not a --set name (%s)", name, arg,
                                       known.empty() ? "no --set given" : "known: " + absl::StrJoin(known, ", ")));
        }
        used->insert(name);
        out += it->values[choice[static_cast<size_t>(it - settings.begin())]];
        i = end + 1;
        continue;
      }
    }
    out += arg[i++];
  }
  return out;
}

}  // namespace

absl::StatusOr<double> ParseKneeThreshold(const std::string& text) {
  std::string number = text;
  if (!number.empty() && number.back() == '%') number.pop_back();
  double pct = 0;
  if (!absl::SimpleAtod(number, &pct) || !(pct > 0) || !(pct < 100)) {
    return Usage(absl::StrFormat("--knee-threshold %s: expected a percentage between 0 and 100 (e.g. 5%%)", text));
  }
  return pct / 100;
}

absl::StatusOr<SweepSetting> ParseSweepSetting(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string example = "(e.g. --set workers=0,2,4)";
  if (eq == std::string::npos) return Usage(absl::StrFormat("--set %s: expected NAME=V1,V2,... %s", text, example));
  SweepSetting setting;
  setting.name = text.substr(0, eq);
  if (setting.name.empty() || !IsNameStart(setting.name[0]) ||
      !std::all_of(setting.name.begin(), setting.name.end(), IsNameChar)) {
    return Usage(absl::StrFormat("--set %s: '%s' is not a name (a letter or _, then letters, digits, _ or -)", text,
                                 setting.name));
  }
  for (const std::string& value : std::vector<std::string>(absl::StrSplit(text.substr(eq + 1), ','))) {
    if (value.empty()) return Usage(absl::StrFormat("--set %s: an empty value %s", text, example));
    if (std::find(setting.values.begin(), setting.values.end(), value) != setting.values.end()) {
      return Usage(absl::StrFormat("--set %s: the value '%s' is listed twice", text, value));
    }
    setting.values.push_back(value);
  }
  return setting;
}

absl::StatusOr<std::vector<SweepRun>> ExpandSweep(const std::vector<SweepSetting>& settings,
                                                  const std::vector<std::string>& record_args,
                                                  const std::vector<std::string>& command) {
  if (settings.empty()) return Usage("sweep needs at least one --set NAME=V1,V2,...");
  std::vector<SweepRun> runs;
  std::set<std::string> used;
  std::vector<size_t> choice(settings.size(), 0);
  for (bool done = false; !done;) {
    SweepRun run;
    std::vector<std::string> parts;
    for (size_t s = 0; s < settings.size(); ++s) {
      parts.push_back(settings[s].name + "=" + settings[s].values[choice[s]]);
    }
    run.name = absl::StrJoin(parts, ",");
    for (const std::string& arg : record_args) {
      auto sub = Substitute(arg, settings, choice, &used);
      if (!sub.ok()) return sub.status();
      run.record_args.push_back(*sub);
    }
    for (const std::string& arg : command) {
      auto sub = Substitute(arg, settings, choice, &used);
      if (!sub.ok()) return sub.status();
      run.command.push_back(*sub);
    }
    runs.push_back(std::move(run));
    // Next combination, the last setting varying fastest.
    for (size_t s = settings.size();; ) {
      if (s == 0) {
        done = true;
        break;
      }
      --s;
      if (++choice[s] < settings[s].values.size()) break;
      choice[s] = 0;
    }
  }
  for (const SweepSetting& s : settings) {
    if (!used.count(s.name)) {
      return Usage(absl::StrFormat("sweep: --set %s is used nowhere: put {%s} into the command or an option",
                                   s.name, s.name));
    }
  }
  return runs;
}

absl::StatusOr<CompareCommand> ParseCompare(const std::vector<std::string>& args, size_t i) {
  CompareCommand c;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto shared = SharedOption(args, &i, &c.json, &c.html_path, &c.knee_threshold, &c.steps);
    if (!shared.ok()) return shared.status();
    if (*shared) continue;
    const std::string flag = FlagName(arg);
    if (flag == "--names") {
      std::string name;
      auto v = Value(args, &i, &name);
      if (!v.ok()) return v.status();
      c.names = absl::StrSplit(*v, ',');
    } else if (flag == "--batch-size") {
      std::string name;
      auto v = Value(args, &i, &name);
      if (!v.ok()) return v.status();
      auto sizes = ParseBatchSizes(*v);
      if (!sizes.ok()) return sizes.status();
      c.batch_sizes = *sizes;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return Usage(absl::StrFormat("unknown compare option %s", arg));
    } else {
      c.paths.push_back(arg);
    }
  }
  if (c.paths.empty()) return Usage("compare needs trace files (gpuos-trace compare A.gpuos B.gpuos ...)");
  if (c.names.empty()) {
    for (const std::string& path : c.paths) c.names.push_back(DefaultRunName(path));
  } else if (c.names.size() != c.paths.size()) {
    return Usage(absl::StrFormat("--names gives %d names for %d trace files", c.names.size(), c.paths.size()));
  }
  if (c.batch_sizes.size() > 1 && c.batch_sizes.size() != c.paths.size()) {
    return Usage(absl::StrFormat("--batch-size gives %d sizes for %d trace files (give one for all, or one each)",
                                 c.batch_sizes.size(), c.paths.size()));
  }
  return c;
}

absl::StatusOr<SweepCommand> ParseSweep(const std::vector<std::string>& args, size_t i,
                                        const std::string& now_suffix) {
  SweepCommand c;
  std::optional<double> knee;
  bool has_command = false;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      c.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i + 1), args.end());
      has_command = true;
      break;
    }
    auto shared = SharedOption(args, &i, &c.json, &c.html_path, &knee, &c.steps);
    if (!shared.ok()) return shared.status();
    if (*shared) continue;
    const std::string flag = FlagName(arg);
    std::string name;
    if (flag == "--set") {
      auto v = Value(args, &i, &name);
      if (!v.ok()) return v.status();
      auto setting = ParseSweepSetting(*v);
      if (!setting.ok()) return setting.status();
      for (const SweepSetting& s : c.settings) {
        if (s.name == setting->name) return Usage(absl::StrFormat("--set %s is given twice", s.name));
      }
      c.settings.push_back(*setting);
    } else if (flag == "-o" || flag == "--output") {
      auto v = Value(args, &i, &name);
      if (!v.ok()) return v.status();
      if (v->empty()) return Usage("sweep -o needs a directory");
      c.output_dir = *v;
    } else if (flag == "--batch-size") {
      auto v = Value(args, &i, &name);
      if (!v.ok()) return v.status();
      uint64_t n = 0;
      if (!absl::SimpleAtoi(*v, &n) || n == 0) {
        return Usage(absl::StrFormat("--batch-size %s: expected a positive whole number", *v));
      }
      c.batch_size = n;
    } else if (flag == "-h" || flag == "--help") {
      return Usage("see gpuos-trace --help for sweep's options");
    } else {
      c.record_args.push_back(arg);  // a record option, checked below
    }
  }
  if (knee) c.knee_threshold = *knee;
  if (!has_command || c.command.empty()) {
    return Usage("sweep needs a command after -- (gpuos-trace sweep --set NAME=V1,V2 -- COMMAND {NAME})");
  }
  auto runs = ExpandSweep(c.settings, c.record_args, c.command);
  if (!runs.ok()) return runs.status();
  // Each run's record options as `gpuos-trace` itself would read them.
  for (const SweepRun& run : *runs) {
    std::vector<std::string> argv = {"gpuos-trace"};
    argv.insert(argv.end(), run.record_args.begin(), run.record_args.end());
    argv.insert(argv.end(), {"-o", "sweep-check.gpuos", "--"});
    argv.insert(argv.end(), run.command.begin(), run.command.end());
    auto parsed = ParseCommandLine(argv, now_suffix);
    if (!parsed.ok()) return Usage(absl::StrCat("sweep (run ", run.name, "): ", parsed.status().message()));
    if (parsed->kind != ParsedCommandLine::Kind::kRecord || parsed->record.attaching() || parsed->record.prepare) {
      return Usage("sweep launches its command: --pid, --gpu-procs, --prepare, --help and --version do not go with it");
    }
  }
  c.runs = *std::move(runs);
  if (c.output_dir.empty()) c.output_dir = "sweep-" + now_suffix;
  return c;
}

}  // namespace gpuos
