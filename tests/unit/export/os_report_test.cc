// The text and JSON renderings of an OsSummary, and the JSON writer and
// text table under them.  JSON is checked by python3's own parser, not by
// string matching, so "valid JSON" means what a consumer will see.
#include "export/report/os_report.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "export/report/json_writer.h"
#include "export/report/text_table.h"
#include "gtest/gtest.h"

namespace gpuos {

// Defined in report/os_report.cc and called by the CLI; not yet in report/os_report.h.
void WriteOsJsonReport(const OsSummary& summary, std::ostream& out,
                       const std::function<void(JsonWriter&)>& extra_members);

namespace {

// Runs `script` with python3, `input` on its stdin.  Returns stdout; the
// exit status goes to `*status`.
std::string RunPython(const std::string& script, const std::string& input, int* status) {
  char dir[] = "/tmp/os_report_test.XXXXXX";
  if (!mkdtemp(dir)) return "mkdtemp failed";
  const std::string script_path = std::string(dir) + "/check.py";
  const std::string input_path = std::string(dir) + "/input.json";
  std::ofstream(script_path) << script;
  std::ofstream(input_path, std::ios::binary) << input;
  const std::string command = "python3 " + script_path + " < " + input_path;
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  if (pipe) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    *status = pclose(pipe);
  } else {
    *status = -1;
  }
  unlink(script_path.c_str());
  unlink(input_path.c_str());
  rmdir(dir);
  return out;
}

// True when python3's json module accepts `text` as one JSON document.
bool IsValidJson(const std::string& text) {
  int status = -1;
  RunPython("import json,sys; json.load(sys.stdin)\n", text, &status);
  return status == 0;
}

// Python expressions over a parsed JSON document `d`, evaluated in one
// python3 run.  Each result prints as ASCII-escaped JSON with sorted keys,
// so that strings compare by exact code points.
class JsonChecks {
 public:
  explicit JsonChecks(std::string json) : json_(std::move(json)) {}
  ~JsonChecks() { Run(); }

  void Expect(const std::string& expression, const std::string& expected) {
    checks_.push_back({expression, expected});
  }

 private:
  void Run() {
    std::string script =
        "import json,sys\n"
        "d = json.load(sys.stdin)\n"
        "def show(f):\n"
        "    try:\n"
        "        print(json.dumps(f(), ensure_ascii=True, sort_keys=True))\n"
        "    except Exception as e:\n"
        "        print('ERROR ' + repr(e))\n";
    for (const auto& [expression, expected] : checks_) {
      script += "show(lambda: " + expression + ")\n";
    }
    int status = -1;
    const std::string out = RunPython(script, json_, &status);
    ASSERT_EQ(status, 0) << out;
    std::vector<std::string> lines = absl::StrSplit(out, '\n');
    ASSERT_GE(lines.size(), checks_.size()) << out;
    for (size_t i = 0; i < checks_.size(); ++i) {
      EXPECT_EQ(lines[i], checks_[i].second) << checks_[i].first;
    }
  }

  std::string json_;
  std::vector<std::pair<std::string, std::string>> checks_;
};

// One expression, evaluated at once.
std::string Eval(const std::string& json_text, const std::string& expression) {
  int status = -1;
  const std::string out = RunPython(
      "import json,sys\n"
      "d = json.load(sys.stdin)\n"
      "print(json.dumps(" +
          expression + ", ensure_ascii=True, sort_keys=True), end='')\n",
      json_text, &status);
  EXPECT_EQ(status, 0) << expression;
  return out;
}

ThreadSummary Thread(uint32_t tid, const std::string& comm) {
  ThreadSummary t;
  t.tid = tid;
  t.comm = comm;
  return t;
}

// A summary with exactly known numbers: a root process with two threads,
// a child that exited with status 1, and one killed by SIGSEGV.
OsSummary MakeSummary() {
  OsSummary s;
  s.header.set_hostname("gpu-node-7");
  s.header.set_kernel_release("6.18.0-gpuos");
  s.header.set_arch("x86_64");
  s.header.set_tracer_version("0.1.0");
  s.header.set_root_pid(100);
  for (const char* arg : {"python3", "train.py", "--tag", "run 1"}) s.header.add_command_line(arg);
  s.header.mutable_start_clock()->set_monotonic_ns(1'000'000'000);
  s.header.mutable_start_clock()->set_realtime_ns(1'700'000'000'000'000'000);
  s.has_trailer = true;
  s.trailer.mutable_end_clock()->set_monotonic_ns(3'500'000'000);
  s.events = 123456;
  s.first_event_ns = 1'000'001'000;
  s.last_event_ns = 3'400'000'000;

  ProcessSummary root;
  root.pid = 100;
  root.ppid = 50;
  root.comm = "python3";
  root.exec_filename = "/usr/bin/python3";
  root.is_root = true;
  root.start_ns = 1'000'001'000;

  ThreadSummary main = Thread(100, "python3");
  main.voluntary_switches = 10;
  main.involuntary_switches = 3;
  main.off_cpu_ns = 12'345'678;
  main.runqueue_ns = 1'000'000;
  main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_FUTEX] = 10'000'000;
  main.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_PREEMPTED] = 2'345'678;
  main.page_faults = 1000;
  main.major_page_faults = 7;
  main.mmap = {5, 10 << 20, 2'000'000, 900'000};
  main.munmap = {2, 4 << 20, 500'000, 300'000};
  main.futex_wait = {4, 0, 9'000'000, 5'000'000};
  main.futex_wake_calls = 3;
  main.futex_woken = 2;
  main.syscalls = {500, 0, 30'000'000, 5'000'000};

  ThreadSummary loader = Thread(101, "pt_dataloader");
  loader.voluntary_switches = 1;
  loader.off_cpu_ns = 1'000'000;
  loader.runqueue_ns = 250'000;
  loader.off_cpu_by_cause_ns[v1::OFF_CPU_CAUSE_SYSCALL] = 1'000'000;
  loader.page_faults = 20;
  loader.mmap = {1, 1 << 20, 100'000, 100'000};
  loader.syscalls = {40, 0, 2'000'000, 1'000'000};
  loader.exit_ns = 2'000'000'000;
  root.threads = {main, loader};

  ProcessSummary child;
  child.pid = 200;
  child.ppid = 100;
  child.comm = "python3";
  child.exited = true;
  child.wait_status = 1 << 8;
  child.start_ns = 1'500'000'000;
  child.exit_ns = 1'600'000'000;
  ThreadSummary child_main = Thread(200, "python3");
  child_main.exit_ns = 1'600'000'000;
  child_main.page_faults = 5;
  child.threads = {child_main};

  ProcessSummary crashed;
  crashed.pid = 300;
  crashed.ppid = 100;
  crashed.comm = "crasher";
  crashed.exited = true;
  crashed.wait_status = SIGSEGV | 0x80;  // killed, core dumped
  crashed.threads = {Thread(300, "crasher")};

  s.processes = {root, child, crashed};
  s.syscalls = {{202, "futex", 100, 20'000'000, 5'000'000},
                {0, "read", 400, 10'000'000, 1'000'000}};
  return s;
}

std::string Json(const OsSummary& s) {
  std::ostringstream out;
  WriteOsJsonReport(s, out);
  return out.str();
}

std::string Text(const OsSummary& s) {
  std::ostringstream out;
  WriteOsTextReport(s, out);
  return out.str();
}

// --- JSON report ---------------------------------------------------------

TEST(OsJsonReportTest, IsValidAndHasTheNumbers) {
  const std::string json = Json(MakeSummary());
  ASSERT_TRUE(IsValidJson(json)) << json;
  JsonChecks c(json);

  c.Expect("d['dropped_events']", "0");
  c.Expect("d['drops_by_reason']", "{}");
  c.Expect("d['events']", "123456");
  c.Expect("d['read_error']", "null");
  c.Expect("d['trace']['command_line']", R"(["python3", "train.py", "--tag", "run 1"])");
  c.Expect("d['trace']['host']", R"("gpu-node-7")");
  c.Expect("d['trace']['kernel']", R"("6.18.0-gpuos")");
  c.Expect("d['trace']['duration_ns']", "2500000000");
  c.Expect("d['trace']['start_ns']", "1000000000");
  c.Expect("d['trace']['end_ns']", "3500000000");

  c.Expect("[p['pid'] for p in d['processes']]", "[100, 200, 300]");
  c.Expect("[p['ppid'] for p in d['processes']]", "[50, 100, 100]");
  c.Expect("[p['comm'] for p in d['processes']]", R"(["python3", "python3", "crasher"])");
  c.Expect("d['processes'][0]['exec']", R"("/usr/bin/python3")");
  c.Expect("d['processes'][1]['exec']", "null");
  c.Expect("d['processes'][0]['exit_status']", "null");
  c.Expect("d['processes'][1]['exit_status']['exit_code']", "1");
  c.Expect("d['processes'][2]['exit_status']['signal']", "11");
  c.Expect("d['processes'][2]['exit_status']['core_dumped']", "true");

  const std::string t0 = "d['processes'][0]['threads'][0]";
  c.Expect(t0 + "['tid']", "100");
  c.Expect(t0 + "['comm']", R"("python3")");
  c.Expect(t0 + "['context_switches']", R"({"involuntary": 3, "voluntary": 10})");
  c.Expect(t0 + "['off_cpu_ns']", "12345678");
  c.Expect(t0 + "['runqueue_ns']", "1000000");
  c.Expect(
      t0 + "['off_cpu_by_cause_ns']",
      R"({"futex": 10000000, "page_fault": 0, "preempted": 2345678, "syscall": 0, "unknown": 0})");
  c.Expect(t0 + "['page_faults']", "1000");
  c.Expect(t0 + "['major_page_faults']", "7");
  c.Expect(t0 + "['mmap']",
           R"({"bytes": 10485760, "calls": 5, "max_ns": 900000, "total_ns": 2000000})");
  c.Expect(t0 + "['munmap']",
           R"({"bytes": 4194304, "calls": 2, "max_ns": 300000, "total_ns": 500000})");
  c.Expect(t0 + "['futex_wait']", R"({"calls": 4, "max_ns": 5000000, "total_ns": 9000000})");
  c.Expect(t0 + "['futex_wake']", R"({"calls": 3, "woken": 2})");
  c.Expect(t0 + "['syscalls']", R"({"calls": 500, "max_ns": 5000000, "total_ns": 30000000})");
  c.Expect("d['processes'][0]['threads'][1]['comm']", R"("pt_dataloader")");
  c.Expect("d['processes'][0]['threads'][1]['exit_ns']", "2000000000");

  // Process totals are the sum of their threads.
  c.Expect("d['processes'][0]['totals']['off_cpu_ns']", "13345678");
  c.Expect("d['processes'][0]['totals']['mmap']",
           R"({"bytes": 11534336, "calls": 6, "max_ns": 900000, "total_ns": 2100000})");
  c.Expect("d['processes'][0]['totals']['syscalls']['calls']", "540");

  c.Expect(
      "d['syscalls']",
      R"([{"calls": 100, "max_ns": 5000000, "name": "futex", "nr": 202, "total_ns": 20000000}, )"
      R"({"calls": 400, "max_ns": 1000000, "name": "read", "nr": 0, "total_ns": 10000000}])");
}

TEST(OsJsonReportTest, NumbersAreNumbersNotStrings) {
  const std::string json = Json(MakeSummary());
  // Walks the whole document: every value under a key ending in _ns, or
  // named calls/bytes/pid/..., must be an int.
  EXPECT_EQ(Eval(json,
                 "(lambda f: f(f, d))(lambda f, x: "
                 "sum(f(f, v) for v in x.values()) + "
                 "sum(1 for k, v in x.items() if (k.endswith('_ns') or k in "
                 "('calls','bytes','pid','ppid','tid','voluntary','involuntary','page_faults',"
                 "'dropped_events','events')) and not (type(v) is int or "
                 "(k == 'off_cpu_by_cause_ns' and isinstance(v, dict)))) "
                 "if isinstance(x, dict) else "
                 "(sum(f(f, v) for v in x) if isinstance(x, list) else 0))"),
            "0");
}

TEST(OsJsonReportTest, DropsReadErrorAndHostileStrings) {
  OsSummary s = MakeSummary();
  s.dropped_events = 42;
  s.drops_by_reason = {{"ringbuf:off_cpu", 40}, {"map_full:sched_state", 2}};
  s.read_error = "trace.gpuos: frame at byte offset 4096: CRC mismatch";
  // A comm may be any bytes: control characters, quotes, a lone 0xff, an
  // overlong NUL (C0 80), a surrogate (ED A0 80), and valid UTF-8 (日本).
  s.processes[1].comm = std::string("a\x01\"\\\n\t\xff", 7) + "\xC0\x80" + "\xED\xA0\x80" +
                        "\xE6\x97\xA5\xE6\x9C\xAC" + "\x7f";
  s.header.add_command_line(std::string("nul\0byte", 8));
  const std::string json = Json(s);
  ASSERT_TRUE(IsValidJson(json)) << json;
  JsonChecks c(json);
  c.Expect("d['dropped_events']", "42");
  c.Expect("d['drops_by_reason']", R"({"map_full:sched_state": 2, "ringbuf:off_cpu": 40})");
  c.Expect("d['read_error']", R"("trace.gpuos: frame at byte offset 4096: CRC mismatch")");
  c.Expect("d['processes'][1]['comm']",
           R"("a\u0001\"\\\n\t\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\u65e5\u672c\u007f")");
  c.Expect("d['trace']['command_line'][-1]", R"("nul\u0000byte")");
}

TEST(OsJsonReportTest, ExtraMembersGoIntoTheTopLevelObject) {
  std::ostringstream out;
  WriteOsJsonReport(MakeSummary(), out, [](JsonWriter& json) {
    json.Key("cuda");
    json.BeginObject();
    json.Field("kernels", uint64_t{3});
    json.EndObject();
  });
  ASSERT_TRUE(IsValidJson(out.str())) << out.str();
  JsonChecks c(out.str());
  c.Expect("d['cuda']", R"({"kernels": 3})");
  c.Expect("d['dropped_events']", "0");
  c.Expect("len(d['processes'])", "3");
}

TEST(OsJsonReportTest, EmptySummaryIsValid) {
  const std::string json = Json(OsSummary());
  ASSERT_TRUE(IsValidJson(json)) << json;
  JsonChecks c(json);
  c.Expect("d['processes']", "[]");
  c.Expect("d['syscalls']", "[]");
  c.Expect("d['dropped_events']", "0");
}

TEST(OsTextReportTest, EmptySummarySaysSo) {
  OsSummary s;
  s.read_error = "t.gpuos: frame at byte offset 12: truncated payload";
  const std::string text = Text(s);
  EXPECT_NE(text.find("Processes: none in the readable part of the trace"), std::string::npos)
      << text;
  EXPECT_NE(text.find("(no syscall statistics in this trace)"), std::string::npos);
  EXPECT_NE(text.find("READ ERROR: t.gpuos: frame at byte offset 12"), std::string::npos);
  EXPECT_EQ(text.find("Threads"), std::string::npos);
}

// --- JSON writer ---------------------------------------------------------

TEST(JsonWriterTest, PrettyPrintsWithTwoSpaceIndent) {
  std::ostringstream out;
  JsonWriter json(out);
  json.BeginObject();
  json.Field("a", int32_t{-1});
  json.Key("b");
  json.BeginArray();
  json.Uint(1);
  json.BeginObject();
  json.EndObject();
  json.BeginArray();
  json.EndArray();
  json.EndArray();
  json.Field("c", true);
  json.Key("d");
  json.Null();
  json.EndObject();
  EXPECT_EQ(out.str(),
            "{\n"
            "  \"a\": -1,\n"
            "  \"b\": [\n"
            "    1,\n"
            "    {},\n"
            "    []\n"
            "  ],\n"
            "  \"c\": true,\n"
            "  \"d\": null\n"
            "}\n");
  EXPECT_TRUE(IsValidJson(out.str()));
}

TEST(JsonWriterTest, NumbersRoundTrip) {
  std::ostringstream out;
  JsonWriter json(out);
  json.BeginArray();
  json.Uint(std::numeric_limits<uint64_t>::max());
  json.Int(std::numeric_limits<int64_t>::min());
  json.Double(0.1);
  json.Double(1e300);
  json.Double(-2.5);
  json.Double(std::nan(""));
  json.Double(std::numeric_limits<double>::infinity());
  json.EndArray();
  ASSERT_TRUE(IsValidJson(out.str())) << out.str();
  EXPECT_EQ(Eval(out.str(), "d"),
            "[18446744073709551615, -9223372036854775808, 0.1, 1e+300, -2.5, null, null]");
}

TEST(JsonWriterTest, EscapesEveryControlCharacterAndInvalidUtf8) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string escaped = JsonEscape(all);
  ASSERT_TRUE(IsValidJson("\"" + escaped + "\""));
  // 0x00-0x7f come back as themselves; 0x80-0xff are each one U+FFFD
  // (none starts a complete sequence here).
  EXPECT_EQ(Eval("\"" + escaped + "\"",
                 "[ord(c) for c in d[:128]] == list(range(128)) and d[128:] == '\\ufffd' * 128"),
            "true");
  // Well-formed sequences of 2, 3 and 4 bytes pass through unchanged.
  EXPECT_EQ(JsonEscape("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  // Cut-short and out-of-range sequences do not.
  EXPECT_EQ(JsonEscape("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(JsonEscape("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(JsonEscape("x\xE2\x82y"), "x\xEF\xBF\xBD\xEF\xBF\xBDy");
}

// --- Text table ----------------------------------------------------------

TEST(TextTableTest, AlignsColumns) {
  TextTable table({{"name", TextTable::Align::kLeft}, {"n"}});
  table.AddRow({"a", "1"});
  table.AddRow({"\xE6\x97\xA5\xE6\x9C\xAC", "12345"});  // two code points
  table.AddRule();
  table.AddRow({"longer name"});
  std::ostringstream out;
  table.Render(out, "> ");
  EXPECT_EQ(out.str(),
            "> name             n\n"
            "> ------------------\n"
            "> a                1\n"
            "> \xE6\x97\xA5\xE6\x9C\xAC           12345\n"
            "> ------------------\n"
            "> longer name\n");
}

TEST(TextTableTest, PrintableEscapesWhatWouldBreakATerminal) {
  EXPECT_EQ(Printable("ok \xE6\x97\xA5"), "ok \xE6\x97\xA5");
  EXPECT_EQ(Printable(std::string("a\x1b[2J\n\0\xff", 8)), "a\\x1b[2J\\x0a\\x00\\xff");
  EXPECT_EQ(DisplayWidth("\xE6\x97\xA5x"), 2u);
}

// --- Text report ---------------------------------------------------------

// The lines of `text` between the line starting with `title` and the next
// blank line.
std::vector<std::string> Section(const std::string& text, const std::string& title) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : lines) {
    if (!in) {
      in = line.rfind(title, 0) == 0;
      continue;
    }
    if (line.empty()) break;
    out.push_back(line);
  }
  return out;
}

// The whitespace-separated cells of the row in `section` whose first cell
// is `first`.
std::vector<std::string> Row(const std::vector<std::string>& section, const std::string& first) {
  for (const std::string& line : section) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!cells.empty() && cells[0] == first) return cells;
  }
  return {};
}

TEST(OsTextReportTest, HeaderBlock) {
  const std::string text = Text(MakeSummary());
  EXPECT_NE(text.find("command:   python3 train.py --tag 'run 1'\n"), std::string::npos) << text;
  EXPECT_NE(text.find("host:      gpu-node-7 (kernel 6.18.0-gpuos, x86_64)\n"), std::string::npos);
  EXPECT_NE(text.find("duration:  2.500 s\n"), std::string::npos);
  EXPECT_NE(text.find("events:    123456\n"), std::string::npos);
  EXPECT_NE(text.find("dropped:   0 events\n"), std::string::npos);
  EXPECT_EQ(text.find("DROPPED"), std::string::npos);
  EXPECT_EQ(text.find("READ ERROR"), std::string::npos);
  EXPECT_NE(text.find("started:   2023-11-14 22:13:20 UTC"), std::string::npos);
}

TEST(OsTextReportTest, ProcessThreadSyscallAndOffCpuRows) {
  const std::string text = Text(MakeSummary());

  const std::vector<std::string> processes = Section(text, "Processes");
  ASSERT_EQ(processes.size(), 5u) << text;  // title, rule, 3 rows
  // pid ppid comm threads exit | vol invol offcpu runq faults majflt |
  // mmap MiB ms | munmap MiB ms | futex ms | syscalls ms
  EXPECT_EQ(
      Row(processes, "100*"),
      (std::vector<std::string>{"100*",   "50",    "python3", "2", "-",     "11",   "3",
                                "13.346", "1.250", "1020",    "7", "6",     "11.0", "2.100",
                                "2",      "4.0",   "0.500",   "4", "9.000", "540",  "32.000"}));
  EXPECT_EQ(
      Row(processes, "200"),
      (std::vector<std::string>{"200",   "100",   "python3", "1",     "exit", "1",    "0",     "0",
                                "0.000", "0.000", "5",       "0",     "0",    "0.0",  "0.000", "0",
                                "0.0",   "0.000", "0",       "0.000", "0",    "0.000"}));
  EXPECT_EQ(Row(processes, "300")[4], "SIGSEGV");
  EXPECT_EQ(Row(processes, "300")[5], "(core)");
  // Right-aligned last column: every line of the table ends at one column.
  for (const std::string& line : processes) EXPECT_EQ(line.size(), processes[0].size()) << line;

  const std::vector<std::string> threads = Section(text, "Threads");
  EXPECT_EQ(
      Row(threads, "100"),
      (std::vector<std::string>{"100",   "100",   "python3", "-",     "10",   "3",     "12.346",
                                "1.000", "1000",  "7",       "5",     "10.0", "2.000", "2",
                                "4.0",   "0.500", "4",       "9.000", "500",  "30.000"}));
  // Rules: under the titles, and around the two-thread process only.
  std::vector<size_t> rules;
  for (size_t i = 0; i < threads.size(); ++i) {
    if (threads[i].find_first_not_of(" -") == std::string::npos) rules.push_back(i);
  }
  EXPECT_EQ(rules, (std::vector<size_t>{1, 4})) << text;
  // The second thread of a process does not repeat the pid.
  EXPECT_EQ(Row(threads, "101"),
            (std::vector<std::string>{"101", "pt_dataloader", "+1.000s", "1", "0", "1.000", "0.250",
                                      "20", "0", "1", "1.0", "0.100", "0", "0.0", "0.000", "0",
                                      "0.000", "40", "2.000"}));

  const std::vector<std::string> syscalls = Section(text, "The most expensive OS calls");
  ASSERT_EQ(syscalls.size(), 4u) << text;
  // # name calls total_ms mean_us max_us %
  EXPECT_EQ(Row(syscalls, "1"),
            (std::vector<std::string>{"1", "futex", "100", "20.000", "200.0", "5000.0", "66.7"}));
  EXPECT_EQ(Row(syscalls, "2"),
            (std::vector<std::string>{"2", "read", "400", "10.000", "25.0", "1000.0", "33.3"}));

  const std::vector<std::string> off_cpu = Section(text, "Off-CPU time by cause");
  // pid comm off-CPU preempted futex syscall page_fault unknown runqueue
  EXPECT_EQ(Row(off_cpu, "100"),
            (std::vector<std::string>{"100", "python3", "13.346", "2.346", "10.000", "1.000",
                                      "0.000", "0.000", "1.250"}));

  // Sections come in the documented order.
  EXPECT_LT(text.find("Processes"), text.find("Threads"));
  EXPECT_LT(text.find("Threads"), text.find("The most expensive OS calls"));
  EXPECT_LT(text.find("The most expensive OS calls"), text.find("Off-CPU time by cause"));
}

// Intervals whose switch-in the kernel never traced: the header says how
// many, and how many end at a syscall (an upper bound), by the run time at
// the next switch-out, and (older traces) at the wakeup (a lower bound);
// JSON counts them.
TEST(OsTextReportTest, UnseenSwitchInsAreSaid) {
  OsSummary s = MakeSummary();
  EXPECT_EQ(Text(s).find("without a sched_switch"), std::string::npos);
  JsonChecks(Json(s)).Expect("d['unseen_switch_ins']", "0");
  s.unseen_switch_ins = 3;
  s.unseen_switch_ins_ended_running = 2;
  s.unseen_switch_ins_ended_by_run_time = 1;
  EXPECT_NE(Text(s).find("note:      3 off-CPU interval(s) came back without a sched_switch the kernel traced: "
                         "counted; 2 end(s) taken at the thread's next syscall (an upper bound), 1 from its run "
                         "time at its next switch-out\n"),
            std::string::npos)
      << Text(s);
  JsonChecks json(Json(s));
  json.Expect("d['unseen_switch_ins']", "3");
  json.Expect("d['unseen_switch_ins_ended_running']", "2");
  json.Expect("d['unseen_switch_ins_ended_by_run_time']", "1");
  s.unseen_switch_ins = 4;
  EXPECT_NE(Text(s).find("1 from its run time at its next switch-out, 1 at the wakeup (recorded by an older "
                         "tracer: a lower bound)\n"),
            std::string::npos)
      << Text(s);
}

TEST(OsTextReportTest, DropsAndReadErrorsAreLoud) {
  OsSummary s = MakeSummary();
  s.dropped_events = 42;
  s.drops_by_reason = {{"ringbuf:off_cpu", 40}, {"map_full:sched_state", 2}};
  s.read_error = "trace.gpuos: frame at byte offset 4096: CRC mismatch";
  s.has_trailer = false;
  const std::string text = Text(s);
  EXPECT_NE(text.find("DROPPED:   42 EVENTS WERE LOST"), std::string::npos) << text;
  EXPECT_NE(text.find("ringbuf:off_cpu"), std::string::npos);
  EXPECT_NE(text.find("map_full:sched_state"), std::string::npos);
  EXPECT_EQ(text.find("dropped:   0"), std::string::npos);
  EXPECT_NE(text.find("no trailer"), std::string::npos);
  EXPECT_NE(text.find("DAMAGED"), std::string::npos);
  // The error closes the report.
  const size_t error =
      text.find("READ ERROR: trace.gpuos: frame at byte offset 4096: CRC mismatch");
  ASSERT_NE(error, std::string::npos);
  EXPECT_GT(error, text.find("Off-CPU time by cause"));
  // Without a trailer the duration comes from the events.
  EXPECT_NE(text.find("duration:  2.400 s"), std::string::npos);
}

TEST(OsTextReportTest, LongTablesAreCut) {
  OsSummary s = MakeSummary();
  s.syscalls.clear();
  for (int i = 0; i < 30; ++i) {
    s.syscalls.push_back(
        {i, "sys" + std::to_string(i), 1, static_cast<uint64_t>(1000 * (30 - i)), 1});
  }
  ProcessSummary& root = s.processes[0];
  root.threads.clear();
  for (uint32_t i = 0; i < 40; ++i) {
    ThreadSummary t = Thread(1000 + i, "worker");
    t.off_cpu_ns = (i == 39) ? 1'000'000'000 : i;  // the last is the busiest
    t.page_faults = 1;
    root.threads.push_back(t);
  }
  const std::string text = Text(s);

  const std::vector<std::string> syscalls = Section(text, "The most expensive OS calls");
  EXPECT_FALSE(Row(syscalls, "25").empty());
  EXPECT_TRUE(Row(syscalls, "26").empty());
  // sys25..sys29: 5000+4000+3000+2000+1000 ns of 465000 ns.
  EXPECT_NE(text.find("... 5 more syscalls omitted (0.015 ms, 3.2% of syscall time"),
            std::string::npos)
      << text;

  const std::vector<std::string> threads = Section(text, "Threads");
  auto shown = [&](const std::string& tid) {
    for (const std::string& line : threads) {
      std::vector<std::string> c = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if ((c.size() > 1 && c[0] == tid && c[1] == "worker") ||
          (c.size() > 2 && c[1] == tid && c[2] == "worker")) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(shown("1039"));  // the busiest, shown although it came last
  EXPECT_TRUE(shown("1008"));
  EXPECT_TRUE(shown("1038"));
  for (int tid = 1000; tid < 1008; ++tid) EXPECT_FALSE(shown(std::to_string(tid))) << tid;
  // The 8 left out are summed in one row: 8 threads, 1 fault each.
  const std::vector<std::string> rest = Row(threads, "(8");
  ASSERT_FALSE(rest.empty()) << text;
  EXPECT_EQ(rest[2], "0");  // vol sw
  EXPECT_EQ(rest[6], "8");  // faults
}

}  // namespace
}  // namespace gpuos
