// A small S3 REST client over libcurl, signed with curl's own SigV4
// (CURLOPT_AWS_SIGV4): path-style requests to one bucket, bodies in memory
// (at most one multipart part), responses either in memory or streamed.
// Thread-safe: each call has its own easy handle; connections are shared.
#ifndef LOUPE_TOOLS_COLLECTOR_S3_CLIENT_H_
#define LOUPE_TOOLS_COLLECTOR_S3_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

typedef void CURL;
struct curl_slist;

namespace loupe::collector {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only
};

struct S3Endpoint {
  std::string url;  // scheme://host[:port], no path
  std::string region;
  std::string bucket;
};

struct S3Request {
  std::string method = "GET";
  std::string key;  // empty: the bucket itself
  // Query parameters; an empty value is sent as "name=" (S3 accepts it,
  // and it keeps the signed query canonical).
  std::map<std::string, std::string> query;
  std::string_view body;
};

struct S3Response {
  long status = 0;
  std::string body;
  std::string etag;
};

class S3Client {
 public:
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(S3Endpoint endpoint,
                                                          S3Credentials credentials);
  ~S3Client();

  // A status for transport failures and non-2xx answers, naming the
  // request, the HTTP status and S3's error code and message.
  absl::StatusOr<S3Response> Call(const S3Request& request) const;
  // GET of `key`, its body passed to `sink` as it arrives; stops early when
  // `sink` returns false.
  absl::Status Get(const std::string& key,
                   const std::function<bool(std::string_view)>& sink) const;

  const S3Endpoint& endpoint() const { return endpoint_; }

 private:
  struct Shared;
  struct EasyFree {
    void operator()(CURL* easy) const;
  };
  struct ListFree {
    void operator()(curl_slist* list) const;
  };
  using Easy = std::unique_ptr<CURL, EasyFree>;
  using HeaderList = std::unique_ptr<curl_slist, ListFree>;
  // A signed request for `request`, waiting for its callbacks; null when
  // libcurl has no handle to give. `headers` must outlive it.
  Easy Prepare(const S3Request& request, HeaderList& headers) const;
  S3Client(S3Endpoint endpoint, S3Credentials credentials);
  std::string Url(const S3Request& request) const;
  std::string Describe(const S3Request& request) const;

  S3Endpoint endpoint_;
  S3Credentials credentials_;
  std::unique_ptr<Shared> shared_;
};

// S3's error answer as a status: "<what>: HTTP <status> <Code>: <Message>".
absl::Status S3Error(std::string_view what, long status, std::string_view body);

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_S3_CLIENT_H_
