// Which store the collector uses, from its flags: a folder (the default) or
// s3://bucket/prefix with an endpoint, a region and credentials read from a
// file or the environment (never from the command line, where any local
// user could read them in /proc).
#ifndef LOUPE_TOOLS_COLLECTOR_STORE_CONFIG_H_
#define LOUPE_TOOLS_COLLECTOR_STORE_CONFIG_H_

#include <spdlog/logger.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/collector/s3_client.h"
#include "tools/collector/segment_store.h"

namespace loupe::collector {

struct StoreConfig {
  std::string store;  // a folder, or s3://bucket[/prefix]
  std::string s3_endpoint;  // default: AWS's endpoint of s3_region
  std::string s3_region = "us-east-1";
  // AWS's shared credentials format ([default] aws_access_key_id = ...);
  // unset: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN.
  std::string s3_credentials_file;
  uint64_t s3_part_bytes = 8 << 20;
  StoreLimits limits;
};

absl::StatusOr<std::unique_ptr<SegmentStore>> OpenStore(const StoreConfig& config,
                                                        std::shared_ptr<spdlog::logger> log);

// The credentials from the file's [default] section (or its lines before
// any section), else from `environment` (names as AWS's tools use them).
absl::StatusOr<S3Credentials> LoadS3Credentials(
    const std::string& file, const std::map<std::string, std::string>& environment);

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_STORE_CONFIG_H_
