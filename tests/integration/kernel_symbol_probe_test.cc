// Whether the verifier resolves a kernel symbol, asked with a tiny program,
// checked against what /proc/kallsyms lists: the preempt count's programs
// are loaded on that answer alone.
#include "daemon/bpf/kernel_symbol_probe.h"

#include <gtest/gtest.h>
#include <linux/btf.h>

#include <fstream>
#include <optional>
#include <string>

#include "daemon/symbols/kernel_btf_scan.h"
#include "tests/support/privileged.h"

namespace loupe::bpf {
namespace {

uint32_t KernelTypeId(const char* name, uint32_t kind) {
  const absl::StatusOr<std::optional<uint32_t>> id = symbols::KernelBtfTypeId(name, kind);
  EXPECT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(id.ok() && id->has_value()) << name << " is not in this kernel's BTF";
  return id.ok() ? id->value_or(0) : 0;
}

bool KallsymsLists(const std::string& name) {
  std::ifstream kallsyms("/proc/kallsyms");
  std::string address, type, listed;
  while (kallsyms >> address >> type >> listed) {
    if (listed == name) return true;
    kallsyms.ignore(1 << 10, '\n');  // a module's name, if any
  }
  return false;
}

TEST(KernelSymbolProbeTest, AgreesWithKallsyms) {
  LOUPE_REQUIRE_PRIVILEGES();
  // A function is always listed.
  absl::StatusOr<bool> function = VerifierResolvesKernelSymbol(KernelTypeId("schedule", BTF_KIND_FUNC));
  ASSERT_TRUE(function.ok()) << function.status();
  EXPECT_TRUE(*function);
  // A per-CPU variable is listed only with CONFIG_KALLSYMS_ALL.
  absl::StatusOr<bool> variable =
      VerifierResolvesKernelSymbol(KernelTypeId("__preempt_count", BTF_KIND_VAR));
  ASSERT_TRUE(variable.ok()) << variable.status();
  EXPECT_EQ(*variable, KallsymsLists("__preempt_count"));
}

TEST(KernelSymbolProbeTest, AnIdThatIsNoSymbolIsAnErrorNotAnAnswer) {
  LOUPE_REQUIRE_PRIVILEGES();
  absl::StatusOr<bool> integer = VerifierResolvesKernelSymbol(KernelTypeId("int", BTF_KIND_INT));
  ASSERT_FALSE(integer.ok());
  EXPECT_NE(integer.status().message().find("was refused"), std::string::npos) << integer.status();
}

}  // namespace
}  // namespace loupe::bpf
