// Runs one InjectLibrary call as its own process, so that
// library_injection_test can kill the caller (and the guardian) mid-way.
//   injection_driver <pid|self> <library> <entry_symbol> <argument> [timeout_ms]
// Prints "injected tid=N stopped_us=X entry_us=Y path=P" and exits 0, or
// "error: <code>: <message>" and exits 1.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "inject/library_injector.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr,
            "usage: injection_driver <pid|self> <library> <entry_symbol> <argument> "
            "[timeout_ms]\n");
    return 2;
  }
  gpuos::InjectionRequest request;
  request.pid = std::string(argv[1]) == "self" ? getpid() : atoi(argv[1]);
  request.library_path = argv[2];
  request.entry_symbol = argv[3];
  request.entry_argument = argv[4];
  if (argc > 5) request.timeout = absl::Milliseconds(atoi(argv[5]));
  auto report = gpuos::InjectLibrary(request);
  if (!report.ok()) {
    printf("error: %s: %s\n", absl::StatusCodeToString(report.status().code()).c_str(),
           std::string(report.status().message()).c_str());
    return 1;
  }
  printf("injected tid=%d stopped_us=%.1f entry_us=%.1f path=%s\n", report->hijacked_tid,
         absl::ToDoubleMicroseconds(report->stopped),
         absl::ToDoubleMicroseconds(report->until_entry_returned),
         report->library_path_in_target.c_str());
  return 0;
}
