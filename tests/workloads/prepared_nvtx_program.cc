// A program whose NVTX ranges are counted by phase, for the attach tests of
// the shim (tests/runtime/shim/shim_control_server_test.cc).  It does nothing on
// its own: it reads commands on stdin, one a line, and answers each on
// stdout once it is done, so the test knows exactly which ranges were made
// between its attach and its detach.
//   burst NAME N        N push/pop ranges NAME             -> "made NAME N"
//   spin NAME           a thread makes ranges NAME until "stop", about
//                       every 50 us                        -> "spinning NAME"
//   stop                                                   -> "made NAME COUNT"
//   fork                a child that takes "child ..." commands; it makes
//                       one range "child-hello" first      -> "child=PID"
//   child burst NAME N  the same, in the child             -> "child made NAME N"
//   child exit                                             -> "child exited"
//   quit
// It prints "pid=PID" first.
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

namespace {

void Burst(const std::string& name, long count) {
  for (long i = 0; i < count; ++i) {
    nvtxRangePushA(name.c_str());
    nvtxRangePop();
  }
}

// Reads one line from a pipe (the child's side of the relay).
bool ReadLine(int fd, std::string* line) {
  line->clear();
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

void WriteLine(int fd, const std::string& line) {
  std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) _exit(3);
}

[[noreturn]] void ChildMain(int commands, int answers) {
  Burst("child-hello", 1);
  WriteLine(answers, "child=" + std::to_string(getpid()));
  std::string line;
  while (ReadLine(commands, &line)) {
    std::istringstream in(line);
    std::string verb, name;
    long count = 0;
    in >> verb >> name >> count;
    if (verb == "burst") {
      Burst(name, count);
      WriteLine(answers, "child made " + name + " " + std::to_string(count));
    } else if (verb == "exit") {
      break;
    }
  }
  _exit(0);
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  printf("pid=%d\n", getpid());
  std::atomic<bool> spinning{false};
  std::atomic<long> spun{0};
  std::thread spinner;
  std::string spin_name;
  pid_t child = -1;
  int to_child = -1, from_child = -1;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "burst") {
      std::string name;
      long count = 0;
      in >> name >> count;
      Burst(name, count);
      printf("made %s %ld\n", name.c_str(), count);
    } else if (verb == "spin" && !spinning) {
      in >> spin_name;
      spun = 0;
      spinning = true;
      spinner = std::thread([&] {
        while (spinning.load()) {
          Burst(spin_name, 1);
          spun.fetch_add(1);
          usleep(50);
        }
      });
      printf("spinning %s\n", spin_name.c_str());
    } else if (verb == "stop" && spinning) {
      spinning = false;
      spinner.join();
      printf("made %s %ld\n", spin_name.c_str(), spun.load());
    } else if (verb == "fork" && child < 0) {
      int down[2], up[2];
      if (pipe(down) != 0 || pipe(up) != 0) return 2;
      fflush(stdout);
      child = fork();
      if (child == 0) {
        close(down[1]);
        close(up[0]);
        ChildMain(down[0], up[1]);
      }
      close(down[0]);
      close(up[1]);
      to_child = down[1];
      from_child = up[0];
      std::string answer;
      if (!ReadLine(from_child, &answer)) return 2;
      printf("%s\n", answer.c_str());
    } else if (verb == "child" && child > 0) {
      std::string rest;
      std::getline(in, rest);
      WriteLine(to_child, rest);
      if (rest.find("exit") != std::string::npos) {
        waitpid(child, nullptr, 0);
        child = -1;
        printf("child exited\n");
      } else {
        std::string answer;
        if (!ReadLine(from_child, &answer)) return 2;
        printf("%s\n", answer.c_str());
      }
    } else if (verb == "quit") {
      break;
    } else {
      printf("unknown %s\n", line.c_str());
    }
  }
  if (spinning) {
    spinning = false;
    spinner.join();
  }
  return 0;
}
