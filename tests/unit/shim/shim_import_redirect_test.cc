// Redirecting other objects' imports (cupti_shim/import_redirect.h), on
// this very test binary: its call of glibc's gnu_get_libc_version goes
// through a GOT slot that the redirect rewrites, and back.
#include "import_redirect.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <string>

#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

const char* Replacement() { return "redirected"; }

TEST(ShimImportRedirectTest, RewritesAnImportAndPutsItBack) {
  const std::string real = gnu_get_libc_version();
  void* libc_function = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
  ASSERT_NE(libc_function, nullptr);
  // Kept object: libc (it defines the function, so it is never rewritten).
  EXPECT_GE(RedirectImports("gnu_get_libc_version", reinterpret_cast<void*>(&Replacement),
                            libc_function),
            1u);
  EXPECT_STREQ(gnu_get_libc_version(), "redirected");
  // Already pointing there: nothing to write.
  EXPECT_EQ(RedirectImports("gnu_get_libc_version", reinterpret_cast<void*>(&Replacement),
                            libc_function),
            0u);
  EXPECT_GE(RedirectImports("gnu_get_libc_version", libc_function, libc_function), 1u);
  EXPECT_EQ(gnu_get_libc_version(), real);
}

TEST(ShimImportRedirectTest, TheKeptObjectAndUnknownNamesAreLeftAlone) {
  const std::string real = gnu_get_libc_version();
  // Keeping this binary (where the only import is) changes nothing.
  EXPECT_EQ(RedirectImports("gnu_get_libc_version", reinterpret_cast<void*>(&Replacement),
                            reinterpret_cast<void*>(&Replacement)),
            0u);
  EXPECT_EQ(gnu_get_libc_version(), real);
  void* libc_function = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
  EXPECT_EQ(RedirectImports("gpuos_no_such_function_anywhere",
                            reinterpret_cast<void*>(&Replacement), libc_function),
            0u);
}

}  // namespace
}  // namespace gpuos_shim
