#include "tools/collector/s3_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <array>

#include "daemon/ship/sha256.h"
#include "tools/collector/s3_xml.h"

namespace loupe::collector {
namespace {


// RFC 3986 unreserved characters stay, and '/' where it separates a key's
// parts; SigV4 signs the path exactly so encoded.
std::string UriEncode(std::string_view text, bool keep_slash) {
  std::string encoded;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  return encoded;
}

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

size_t KeepEtag(char* data, size_t size, size_t count, void* etag) {
  std::string_view line(data, size * count);
  constexpr std::string_view kName = "etag:";
  if (line.size() > kName.size() &&
      std::equal(kName.begin(), kName.end(), line.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    line.remove_prefix(kName.size());
    while (!line.empty() && (line.front() == ' ')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    *static_cast<std::string*>(etag) = std::string(line);
  }
  return size * count;
}

}  // namespace

// One connection cache (and DNS cache) for every call, so requests reuse
// kept-alive connections instead of a TCP (and TLS) handshake each.
struct S3Client::Shared {
  Shared() : share(curl_share_init()) {
    curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &Lock);
    curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &Unlock);
    curl_share_setopt(share, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  }
  ~Shared() { curl_share_cleanup(share); }
  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Shared*>(self)->locks[data % kLocks].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<Shared*>(self)->locks[data % kLocks].unlock();
  }
  static constexpr size_t kLocks = CURL_LOCK_DATA_LAST;
  CURLSH* share;
  std::array<std::mutex, kLocks> locks;
};

absl::Status S3Error(std::string_view what, long status, std::string_view body) {
  const std::string code = XmlText(body, "Code");
  const std::string message = XmlText(body, "Message");
  const std::string text =
      fmt::format("{}: HTTP {}{}{}", what, status, code.empty() ? "" : " " + code,
                  message.empty() ? "" : ": " + message);
  switch (status) {
    case 403:
      return absl::PermissionDeniedError(text);
    case 404:
      return absl::NotFoundError(text);
    case 400:
    case 409:
    case 412:
      return absl::FailedPreconditionError(text);
    default:
      return absl::UnavailableError(text);
  }
}

void S3Client::EasyFree::operator()(CURL* easy) const { curl_easy_cleanup(easy); }
void S3Client::ListFree::operator()(curl_slist* list) const { curl_slist_free_all(list); }

S3Client::S3Client(S3Endpoint endpoint, S3Credentials credentials)
    : endpoint_(std::move(endpoint)),
      credentials_(std::move(credentials)),
      shared_(std::make_unique<Shared>()) {}

S3Client::~S3Client() = default;

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(S3Endpoint endpoint,
                                                           S3Credentials credentials) {
  // Thread-safe since curl 7.84; the collector needs 7.75 for SigV4 anyway.
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    return absl::InternalError("libcurl: global initialization failed");
  }
  const curl_version_info_data* version = curl_version_info(CURLVERSION_NOW);
  if (version->version_num < 0x074b00) {
    return absl::FailedPreconditionError(
        fmt::format("libcurl {} has no SigV4 signing; S3 needs 7.75 or later", version->version));
  }
  return std::unique_ptr<S3Client>(new S3Client(std::move(endpoint), std::move(credentials)));
}

std::string S3Client::Url(const S3Request& request) const {
  std::string url = fmt::format("{}/{}", endpoint_.url, UriEncode(endpoint_.bucket, false));
  if (!request.key.empty()) url += "/" + UriEncode(request.key, true);
  char separator = '?';
  for (const auto& [name, value] : request.query) {  // std::map: sorted, as SigV4 wants
    url += fmt::format("{}{}={}", separator, UriEncode(name, false), UriEncode(value, false));
    separator = '&';
  }
  return url;
}

std::string S3Client::Describe(const S3Request& request) const {
  std::string what = fmt::format("S3 {} {}/{}", request.method, endpoint_.bucket, request.key);
  if (!request.query.empty()) what += "?" + request.query.begin()->first + "...";
  return what;
}

namespace {

struct Transfer {
  CURL* easy;
  std::string error_body;
  const std::function<bool(std::string_view)>* sink = nullptr;
  bool sink_stopped = false;
};

// Streams a 2xx body to the sink; keeps anything else as the error to report.
size_t StreamBody(char* data, size_t size, size_t count, void* opaque) {
  auto* transfer = static_cast<Transfer*>(opaque);
  long status = 0;
  curl_easy_getinfo(transfer->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300) {
    transfer->error_body.append(data, size * count);
  } else if (!(*transfer->sink)(std::string_view(data, size * count))) {
    transfer->sink_stopped = true;
    return 0;  // aborts the transfer
  }
  return size * count;
}

}  // namespace

S3Client::Easy S3Client::Prepare(const S3Request& request, HeaderList& headers) const {
  Easy easy(curl_easy_init());
  if (!easy) return easy;
  CURL* e = easy.get();
  ship::Sha256 payload;
  payload.Update(request.body);
  auto add_header = [&](const std::string& header) {
    headers.reset(curl_slist_append(headers.release(), header.c_str()));
  };
  // The payload's digest, signed: S3 checks the body against it.
  add_header("x-amz-content-sha256: " + ship::HexOf(payload.Finish()));
  if (!credentials_.session_token.empty()) {
    add_header("x-amz-security-token: " + credentials_.session_token);
  }
  // String options are copied by libcurl; the body and header list are not.
  curl_easy_setopt(e, CURLOPT_URL, Url(request).c_str());
  curl_easy_setopt(e, CURLOPT_SHARE, shared_->share);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, fmt::format("aws:amz:{}:s3", endpoint_.region).c_str());
  curl_easy_setopt(e, CURLOPT_USERNAME, credentials_.access_key_id.c_str());
  curl_easy_setopt(e, CURLOPT_PASSWORD, credentials_.secret_access_key.c_str());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 10L);
  // No 100-continue round trip before each part. (An "Expect:" header
  // would do it too, but curl 7.88 signs that header it then leaves out.)
  curl_easy_setopt(e, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
  // A stalled store fails the call instead of holding an upload forever.
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 60L);
  if (request.method == "PUT" || request.method == "POST") {
    add_header("Content-Type: application/octet-stream");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  if (request.method == "HEAD") curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (request.method != "GET" && request.method != "HEAD" && request.method != "POST") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  return easy;
}

absl::StatusOr<S3Response> S3Client::Call(const S3Request& request) const {
  HeaderList headers;
  Easy easy = Prepare(request, headers);
  if (!easy) return absl::ResourceExhaustedError("libcurl: no easy handle");
  S3Response response;
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy.get(), CURLOPT_HEADERFUNCTION, &KeepEtag);
  curl_easy_setopt(easy.get(), CURLOPT_HEADERDATA, &response.etag);
  if (const CURLcode code = curl_easy_perform(easy.get()); code != CURLE_OK) {
    return absl::UnavailableError(
        fmt::format("{}: {} ({})", Describe(request), curl_easy_strerror(code), endpoint_.url));
  }
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &response.status);
  if (response.status < 200 || response.status >= 300) {
    return S3Error(Describe(request), response.status, response.body);
  }
  return response;
}

absl::Status S3Client::Get(const std::string& key,
                           const std::function<bool(std::string_view)>& sink) const {
  const S3Request request{.method = "GET", .key = key};
  HeaderList headers;
  Easy easy = Prepare(request, headers);
  if (!easy) return absl::ResourceExhaustedError("libcurl: no easy handle");
  Transfer transfer{.easy = easy.get(), .sink = &sink};
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, &StreamBody);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &transfer);
  const CURLcode code = curl_easy_perform(easy.get());
  if (transfer.sink_stopped) return absl::OkStatus();
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        fmt::format("{}: {} ({})", Describe(request), curl_easy_strerror(code), endpoint_.url));
  }
  long status = 0;
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) return S3Error(Describe(request), status, transfer.error_body);
  return absl::OkStatus();
}

}  // namespace loupe::collector
