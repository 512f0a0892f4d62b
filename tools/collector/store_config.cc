#include "tools/collector/store_config.h"

#include <fmt/format.h>

#include <fstream>

#include "tools/collector/fs_segment_store.h"
#include "tools/collector/s3_segment_store.h"

namespace loupe::collector {
namespace {

constexpr std::string_view kS3Scheme = "s3://";

std::string Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  return std::string(text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1));
}

// The value of `name` for AWS credentials, or empty.
std::string Lookup(const std::map<std::string, std::string>& values, const std::string& name) {
  auto found = values.find(name);
  return found == values.end() ? std::string() : found->second;
}

absl::StatusOr<std::unique_ptr<SegmentStore>> OpenS3(const StoreConfig& config,
                                                     std::shared_ptr<spdlog::logger> log) {
  std::string_view path = std::string_view(config.store).substr(kS3Scheme.size());
  const std::string bucket(path.substr(0, path.find('/')));
  std::string prefix = path.find('/') == std::string_view::npos
                           ? std::string()
                           : std::string(path.substr(path.find('/') + 1));
  if (bucket.size() < 3 || bucket.size() > 63 ||
      bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "--store {}: bucket '{}' must be 3-63 lowercase letters, digits, '.', '-'",
        config.store, bucket));
  }
  if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
  if (prefix.starts_with('/') || prefix.find("//") != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("--store {}: the prefix '{}' has an empty folder name", config.store, prefix));
  }
  if (config.s3_part_bytes < kMinS3PartBytes || config.s3_part_bytes % 64 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("--s3-part-size {}: must be at least {} (S3's minimum) and a multiple of 64",
                    config.s3_part_bytes, kMinS3PartBytes));
  }
  std::string endpoint = config.s3_endpoint.empty()
                             ? fmt::format("https://s3.{}.amazonaws.com", config.s3_region)
                             : config.s3_endpoint;
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://")) {
    return absl::InvalidArgumentError(fmt::format(
        "--s3-endpoint {}: must be http://host[:port] or https://host[:port]", endpoint));
  }
  if (endpoint.find('/', endpoint.find("//") + 2) != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "--s3-endpoint {}: no path after the host (the bucket goes in --store)", endpoint));
  }
  std::map<std::string, std::string> environment;
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
    if (const char* value = getenv(name)) environment[name] = value;
  }
  absl::StatusOr<S3Credentials> credentials =
      LoadS3Credentials(config.s3_credentials_file, environment);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<std::unique_ptr<S3Client>> client =
      S3Client::Create({.url = endpoint, .region = config.s3_region, .bucket = bucket},
                       *std::move(credentials));
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<S3SegmentStore>> store = S3SegmentStore::Open(
      *std::move(client),
      {.prefix = prefix, .part_bytes = config.s3_part_bytes, .limits = config.limits},
      std::move(log));
  if (!store.ok()) return store.status();
  return std::unique_ptr<SegmentStore>(*std::move(store));
}

}  // namespace

absl::StatusOr<S3Credentials> LoadS3Credentials(
    const std::string& file, const std::map<std::string, std::string>& environment) {
  S3Credentials credentials;
  std::string source;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return absl::NotFoundError(fmt::format("--s3-credentials-file {}: cannot be read", file));
    }
    std::map<std::string, std::string> values;
    std::string section = "default";
    for (std::string line; std::getline(in, line);) {
      line = Trim(line);
      if (line.empty() || line.starts_with('#') || line.starts_with(';')) continue;
      if (line.starts_with('[') && line.ends_with(']')) {
        section = Trim(std::string_view(line).substr(1, line.size() - 2));
        continue;
      }
      const size_t equals = line.find('=');
      if (section == "default" && equals != std::string::npos) {
        values[Trim(std::string_view(line).substr(0, equals))] =
            Trim(std::string_view(line).substr(equals + 1));
      }
    }
    credentials = {.access_key_id = Lookup(values, "aws_access_key_id"),
                   .secret_access_key = Lookup(values, "aws_secret_access_key"),
                   .session_token = Lookup(values, "aws_session_token")};
    source = fmt::format("--s3-credentials-file {} ([default] aws_access_key_id, "
                         "aws_secret_access_key)",
                         file);
  } else {
    credentials = {.access_key_id = Lookup(environment, "AWS_ACCESS_KEY_ID"),
                   .secret_access_key = Lookup(environment, "AWS_SECRET_ACCESS_KEY"),
                   .session_token = Lookup(environment, "AWS_SESSION_TOKEN")};
    source = "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and no "
             "--s3-credentials-file";
  }
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("S3 credentials: no access key id and secret access key in {}", source));
  }
  return credentials;
}

absl::StatusOr<std::unique_ptr<SegmentStore>> OpenStore(const StoreConfig& config,
                                                        std::shared_ptr<spdlog::logger> log) {
  if (config.store.starts_with(kS3Scheme)) return OpenS3(config, std::move(log));
  if (config.store.find("://") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "--store {}: only a folder or s3://bucket[/prefix] is understood", config.store));
  }
  absl::StatusOr<std::unique_ptr<FsSegmentStore>> store =
      FsSegmentStore::Open({.root = config.store,
                            .max_total_bytes = config.limits.max_total_bytes,
                            .max_age_s = config.limits.max_age_s,
                            .max_segment_bytes = config.limits.max_segment_bytes},
                           std::move(log));
  if (!store.ok()) return store.status();
  return std::unique_ptr<SegmentStore>(*std::move(store));
}

}  // namespace loupe::collector
