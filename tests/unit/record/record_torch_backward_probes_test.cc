// Where the backward uprobes go (record/torch_backward_probes.h): the file
// offsets of torch::autograd::Engine::execute in a real libtorch_cpu are
// where the loaded library's code for that function comes from, and
// nothing else (execute_with_graph_task, DistEngine::execute) is taken.
// The libtorch part skips where Debian's libtorch is not installed.
#include "record/torch_backward_probes.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr char kLibtorchCpu[] = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
// Engine::execute(edge_list const&, variable_list const&, bool, bool, bool,
// edge_list const&) as PyTorch 1.13 mangles it.
constexpr char kExecute113[] =
    "_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_IN2at6TensorESaIS9_EEbbbS7_";

std::string FileBytes(const std::string& path, uint64_t offset, size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  return in ? bytes : std::string();
}

TEST(AutogradEngineExecuteOffsets, PointsAtTheFunctionsCodeInLibtorch) {
  if (access(kLibtorchCpu, R_OK) != 0) GTEST_SKIP() << "no " << kLibtorchCpu << " (apt-get install libtorch1.13)";
  auto offsets = AutogradEngineExecuteOffsets(kLibtorchCpu);
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  // One overload in 1.13; DistEngine::execute and execute_with_graph_task
  // share the prefix of their demangled names, not of the mangled one.
  ASSERT_EQ(offsets->size(), 1u);

  void* lib = dlopen(kLibtorchCpu, RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  void* fn = dlsym(lib, kExecute113);
  if (fn == nullptr) GTEST_SKIP() << "this libtorch_cpu mangles Engine::execute otherwise";
  // The probe's place in the file holds the bytes the loaded function runs.
  constexpr size_t kBytes = 64;
  const std::string file = FileBytes(kLibtorchCpu, offsets->front(), kBytes);
  ASSERT_EQ(file.size(), kBytes);
  // A uprobe that another tracer (or a test running beside this one) holds
  // on the function shows in the loaded copy as an int3 (0xcc) over the first
  // instruction's first byte: the rest must still match.
  const auto* loaded = static_cast<const unsigned char*>(fn);
  if (loaded[0] != 0xcc) EXPECT_EQ(static_cast<unsigned char>(file[0]), loaded[0]);
  EXPECT_EQ(memcmp(file.data() + 1, loaded + 1, kBytes - 1), 0);
  // And not the bytes of the function beside it.
  EXPECT_NE(memcmp(FileBytes(kLibtorchCpu, offsets->front() + kBytes, kBytes).data(), fn, kBytes), 0);
}

TEST(AutogradEngineExecuteOffsets, LibraryWithoutTheEngineIsNotFound) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&strlen), &info), 0);
  auto offsets = AutogradEngineExecuteOffsets(info.dli_fname);  // the C library
  ASSERT_FALSE(offsets.ok());
  EXPECT_TRUE(absl::IsNotFound(offsets.status())) << offsets.status();
}

TEST(AutogradEngineExecuteOffsets, NotElfIsAnError) {
  char path[] = "/tmp/gpuos_not_elf_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not an ELF file\n", 16), 16);
  close(fd);
  auto offsets = AutogradEngineExecuteOffsets(path);
  unlink(path);
  ASSERT_FALSE(offsets.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(offsets.status())) << offsets.status();
  EXPECT_FALSE(AutogradEngineExecuteOffsets("/nonexistent/libtorch_cpu.so").ok());
}

}  // namespace
}  // namespace gpuos
